#!/usr/bin/env bash
# A first SIGTERM or SIGINT outside the training loop (here after it planned, before its first
# step, held there by the test's callback) ends train_images within a second, with 128 + the
# signal, and writes nothing.
#   check_signal_outside_loop.sh TRAIN_IMAGES_PAUSED_BEFORE_TRAINING DATA WORK
set -u
paused=$1 data=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
for signal in TERM INT; do
  log=$work/$signal.log
  "$paused" 120 --data "$data" --epochs 1 --limit 128 --quiet --threads 1 \
    --save "$work/run.ckpt" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do  # until it has read the data, built the network and planned (30 s at most)
    grep -q "^paused before training" "$log" && break
    sleep 0.1
  done
  grep -q "^paused before training" "$log" ||
    { echo "FAIL: the run never reached its first step:"; cat "$log"; kill -9 $pid; exit 1; }
  sent=$(date +%s%N)
  kill -s "$signal" $pid
  wait $pid
  rc=$?
  ms=$((($(date +%s%N) - sent) / 1000000))
  expected=$([ "$signal" = TERM ] && echo 143 || echo 130)
  if [ "$rc" != "$expected" ] || [ "$ms" -gt 1000 ]; then
    echo "FAIL: SIG$signal before training: exit $rc after $ms ms (expected $expected within 1000 ms)"
    cat "$log"
    exit 1
  fi
  if [ -e "$work/run.ckpt" ]; then echo "FAIL: SIG$signal before training left a checkpoint"; exit 1; fi
  echo "SIG$signal before training: exit $rc after $ms ms"
done
