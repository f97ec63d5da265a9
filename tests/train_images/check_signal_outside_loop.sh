#!/usr/bin/env bash
# A first SIGTERM or SIGINT outside the training loop (here while it would plan, held there by the
# test hook CNN_TRAIN_IMAGES_PAUSE_BEFORE_PLAN) ends train_images within a second, with 128 + the
# signal, and writes nothing.
#   check_signal_outside_loop.sh TRAIN_IMAGES DATA WORK
set -u
train=$1 data=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
for signal in TERM INT; do
  log=$work/$signal.log
  CNN_TRAIN_IMAGES_PAUSE_BEFORE_PLAN=120 "$train" --data "$data" --epochs 1 --limit 128 --quiet --threads 1 \
    --save "$work/run.ckpt" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do  # until it has read the data and built the network (30 s at most)
    grep -q "^model:" "$log" && break
    sleep 0.1
  done
  grep -q "^model:" "$log" || { echo "FAIL: the run never reached its network:"; cat "$log"; kill -9 $pid; exit 1; }
  sent=$(date +%s%N)
  kill -s "$signal" $pid
  wait $pid
  rc=$?
  ms=$((($(date +%s%N) - sent) / 1000000))
  expected=$([ "$signal" = TERM ] && echo 143 || echo 130)
  if [ "$rc" != "$expected" ] || [ "$ms" -gt 1000 ]; then
    echo "FAIL: SIG$signal before planning: exit $rc after $ms ms (expected $expected within 1000 ms)"
    cat "$log"
    exit 1
  fi
  if [ -e "$work/run.ckpt" ]; then echo "FAIL: SIG$signal before training left a checkpoint"; exit 1; fi
  echo "SIG$signal before planning: exit $rc after $ms ms"
done
