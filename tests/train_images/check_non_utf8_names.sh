#!/usr/bin/env bash
# File and folder names that are not UTF-8 (any bytes but '/' on Linux) in an image folder: a class
# folder trains and saves (its name escaped as \xNN in the checkpoint), an image predicts (its name
# escaped in the metrics file), and a --data path that a checkpoint cannot record is refused before
# any work.
#   check_non_utf8_names.sh TRAIN_IMAGES ONE_IMAGE_PER_CLASS WORK
set -u
train=$1 images=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work/data"
cp -r "$images"/* "$work/data/"
mv "$work/data/b" "$work/data/caf$(printf '\xe9')"

"$train" --data "$work/data" --epochs 1 --quiet --threads 1 --save "$work/run.ckpt" >"$work/train.log" 2>&1 ||
  fail "training on a class folder whose name is not UTF-8: exit $? ($(cat "$work/train.log"))"
[ -f "$work/run.ckpt" ] || fail "no checkpoint saved"
grep -aq 'caf\\\\xE9' "$work/run.ckpt" || fail "the checkpoint does not hold the escaped class name caf\\xE9"

mkdir -p "$work/predict"
cp "$images/a/0.png" "$work/predict/x$(printf '\xff').png"
cp "$images/c/0.png" "$work/predict/y.png"
"$train" --load "$work/run.ckpt" --predict "$work/predict" --metrics-out "$work/predict.jsonl" >"$work/predict.log" 2>&1 ||
  fail "predicting an image whose name is not UTF-8: exit $? ($(cat "$work/predict.log"))"
[ "$(grep -c '"type":"prediction"' "$work/predict.jsonl")" = 2 ] || fail "not two predictions: $(cat "$work/predict.jsonl")"
grep -q 'x\\\\xFF.png' "$work/predict.jsonl" || fail "the metrics file does not name x\\xFF.png"

ln -s data "$work/data$(printf '\xfe')"
"$train" --data "$work/data$(printf '\xfe')" --epochs 1 --quiet --threads 1 --save "$work/other.ckpt" \
  >"$work/refused.log" 2>&1
rc=$?
[ "$rc" = 2 ] || fail "a --data path that is not UTF-8, with --save: exit $rc, expected 2 ($(cat "$work/refused.log"))"
grep -q 'not UTF-8 text, which a checkpoint cannot record' "$work/refused.log" || fail "$(cat "$work/refused.log")"
grep -q '^epoch' "$work/refused.log" && fail "it trained before refusing"
echo "ok"
