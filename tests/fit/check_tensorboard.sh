#!/usr/bin/env bash
# train_images --tensorboard DIR writes event files TensorBoard reads (its own Python reader, from
# PyPI in a virtual environment made once by scripts/python_venv.sh; skipped, 77, where that
# cannot be made): every step's loss, accuracy, rate, memory and speed, each epoch's metrics, the
# test set's at the end. A run killed after step 3 (its checkpoint at step 2) and resumed logs
# every step once: the resumed file's session start drops the killed run's step 3. --csv FILE
# holds a row an epoch.
#   check_tensorboard.sh VENV TRAIN_IMAGES TRAIN_IMAGES_KILLED_AT_STEP FASHION_MNIST WORK
set -u
venv=$1 train=$2 killed_at_step=$3 data=$4 work=$5
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
python=$(bash "$here/../../scripts/python_venv.sh" "$venv" \
  "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator" tensorboard) || exit $?
rm -rf "$work" && mkdir -p "$work"
run=(--data "$data" --epochs 2 --limit 320 --limit-eval 64 --batch 64 --validation-split 0.2 --quiet --threads 2
     --tensorboard "$work/logs" --csv "$work/epochs.csv" --save "$work/run.ckpt" --save-every 2)
"$killed_at_step" 3 "${run[@]}" >"$work/killed.log" 2>&1
[ $? = 137 ] || fail "the run was not killed at step 3: $(cat "$work/killed.log")"
"$train" --resume "$work/run.ckpt" --tensorboard "$work/logs" --csv "$work/epochs.csv" --quiet --threads 2 \
  >"$work/resumed.log" 2>&1 || fail "the resumed run: $(cat "$work/resumed.log")"
[ "$(ls "$work/logs" | grep -c tfevents)" = 2 ] || fail "expected two event files: $(ls "$work/logs")"

"$python" - "$work/logs" <<'PY' || fail "TensorBoard's reader disagrees"
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
acc.Reload()
tags = set(acc.Tags()["scalars"])
want = {"train/loss", "train/accuracy", "learning_rate", "images_per_second", "memory/reserved_bytes",
        "epoch/train_loss", "epoch/val_loss", "epoch/val_accuracy", "epoch/learning_rate", "test/accuracy"}
assert want <= tags, f"missing {want - tags} in {tags}"
steps = [e.step for e in acc.Scalars("train/loss")]
assert steps == list(range(1, 9)), f"train/loss at steps {steps}, expected 1..8 once each"
rate = acc.Scalars("learning_rate")[0].value
assert abs(rate - 1e-3) < 1e-9, f"the first rate {rate}"
assert all(e.value > 0 for e in acc.Scalars("memory/reserved_bytes"))
epochs = [e.step for e in acc.Scalars("epoch/val_loss")]
assert epochs == [4, 8], f"epoch/val_loss at steps {epochs}"
accuracy = acc.Scalars("test/accuracy")[-1].value
assert 0 < accuracy <= 1, accuracy
print(f"TensorBoard reads {len(tags)} scalars; train/loss at steps {steps}; test accuracy {accuracy:.4f}")
PY
[ "$(head -1 "$work/epochs.csv")" = "epoch,train_loss,train_accuracy,val_loss,val_accuracy,test_loss,test_accuracy,lr,seconds,images_per_second" ] ||
  fail "the CSV header: $(head -1 "$work/epochs.csv")"
[ "$(wc -l <"$work/epochs.csv")" = 3 ] || fail "the CSV: $(cat "$work/epochs.csv")"
grep -qE '^2,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,,,' "$work/epochs.csv" || fail "the CSV's epoch 2: $(cat "$work/epochs.csv")"
echo "the CSV: $(tail -1 "$work/epochs.csv")"
