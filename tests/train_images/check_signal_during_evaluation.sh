#!/usr/bin/env bash
# A first SIGTERM during an epoch's evaluation (--test-each-epoch: 10 000 test images, seconds on
# the CPU) stops the
# run within a second, saved at the epoch's last step; the resumed run evaluates that epoch and
# ends as a run never stopped does, with the same test accuracy.
#   check_signal_during_evaluation.sh TRAIN_IMAGES FASHION_MNIST WORK
set -u
train=$1 data=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
run=(--data "$data" --epochs 1 --limit 64 --batch 64 --quiet --threads 1 --test-each-epoch)
"$train" "${run[@]}" --metrics-out "$work/clean.jsonl" >"$work/clean.log" 2>&1 || fail "the clean run: $(cat "$work/clean.log")"

"$train" "${run[@]}" --save "$work/run.ckpt" --metrics-out "$work/stopped.jsonl" >"$work/stopped.log" 2>&1 &
pid=$!
for _ in $(seq 600); do  # the epoch's one step is recorded: its evaluation has begun (60 s at most)
  grep -q '"type":"step"' "$work/stopped.jsonl" 2>/dev/null && break
  sleep 0.05
done
sent=$(date +%s%N)
kill -TERM $pid
wait $pid
rc=$?
ms=$((($(date +%s%N) - sent) / 1000000))
[ "$rc" = 143 ] && [ "$ms" -le 1000 ] || fail "SIGTERM during evaluation: exit $rc after $ms ms ($(cat "$work/stopped.log"))"
grep -q '"type":"epoch"' "$work/stopped.jsonl" && fail "the epoch was recorded: the signal came after its evaluation"
grep -q "stopped by signal 15 at step 1 (epoch 1, batch 1)" "$work/stopped.log" || fail "$(cat "$work/stopped.log")"

"$train" --resume "$work/run.ckpt" --metrics-out "$work/stopped.jsonl" --quiet >"$work/resumed.log" 2>&1 ||
  fail "the resumed run: $(cat "$work/resumed.log")"
accuracy() { grep -o '"test_accuracy":[0-9.]*' "$1" | head -1; }
[ -n "$(accuracy "$work/clean.jsonl")" ] && [ "$(accuracy "$work/clean.jsonl")" = "$(accuracy "$work/stopped.jsonl")" ] ||
  fail "test accuracy $(accuracy "$work/stopped.jsonl") after the stop, $(accuracy "$work/clean.jsonl") without"
echo "stopped $ms ms after SIGTERM during evaluation; resumed to the same $(accuracy "$work/clean.jsonl")"
