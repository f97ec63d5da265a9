#!/usr/bin/env bash
# One rank of a data-parallel run killed (SIGKILL, by train_images_killed_at_step, after a step):
# the whole job ends within 10 seconds, non-zero, with a message naming that rank; never a hang.
#   check_rank_killed.sh MPIEXEC TRAIN_IMAGES_KILLED_AT_STEP WORK RUN_ARGS...
set -u
mpiexec=$1 train=$2 work=$3
shift 3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$mpiexec" --oversubscribe -np 2 "$train" --rank 1 3 "$@" --metrics-out metrics.jsonl > log.txt 2>&1 &
job=$!
# Rank 0 writes step 3's line when rank 1, done with the same step, is killed.
for _ in $(seq 1 6000); do
  grep -q '"step":3,' metrics.jsonl 2>/dev/null && break
  kill -0 $job 2>/dev/null || break
  sleep 0.05
done
killed_at=$(date +%s.%N)
for _ in $(seq 1 600); do  # 30 s at most, then it is a hang
  kill -0 $job 2>/dev/null || break
  sleep 0.05
done
if kill -0 $job 2>/dev/null; then
  pkill -9 -P $job 2>/dev/null; kill -9 $job
  echo "FAILED: the job still runs 30 s after rank 1 was killed (a hang)"; cat log.txt; exit 1
fi
wait $job
rc=$?
seconds=$(awk -v a="$killed_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "the job ended ${seconds}s after rank 1 was killed, exit code $rc"
if [ $rc -eq 0 ]; then echo "FAILED: exit code 0"; cat log.txt; exit 1; fi
if ! grep -q "rank 1" log.txt; then echo "FAILED: no message names rank 1"; cat log.txt; exit 1; fi
if awk -v s="$seconds" 'BEGIN { exit !(s > 10) }'; then echo "FAILED: more than 10 s"; cat log.txt; exit 1; fi
grep "rank 1" log.txt | head -2
