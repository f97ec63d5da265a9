#!/usr/bin/env bash
# Each task through train_images, on small data sets made from Fashion-MNIST by
# scripts/make_task_datasets.py: a run trains and saves (its task taken from the data's layout),
# learns (above chance), --evaluate shows the task's scores, --predict writes a segmentation's masks
# and overlays, a multi-label's classes and a regression's values (JSON lines too), a resumed run
# goes on; and what does not suit a task is refused, naming it. SEGMENTATION is learn (ten epochs,
# and the mean IoU must show it learned) or run (two epochs, the IoU not judged: the sanitizers' stage).
#   check_tasks.sh TRAIN_IMAGES FASHION_MNIST WORK MAKE_TASK_DATASETS [SEGMENTATION]
set -u
train=$1 fashion=$2 work=$3 make=$4 segmentation=${5:-learn}
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
# Small, for the sanitizers' stage: the segmentation learns (in the plain build), the others only run.
python3 "$make" --fashion "$fashion" --out "$work/data" --train 512 --test 64 --kinds segment >"$work/make.log" 2>&1 &&
  python3 "$make" --fashion "$fashion" --out "$work/data" --train 256 --test 32 --kinds multilabel,regress \
    >>"$work/make.log" 2>&1 || fail "making the data sets: $(cat "$work/make.log")"
common=(--batch 32 --quiet --threads 2 --device cpu)

# Segmentation: unet on 1x28x28 masks of 11 classes (ten epochs to learn: from PyTorch's
# initialisation six ended near a mean IoU of 0.15).
case $segmentation in
  learn) segment_epochs=10 ;;
  run) segment_epochs=2 ;;
  *) fail "SEGMENTATION is learn or run, not '$segmentation'" ;;
esac
"$train" --data "$work/data/fashion-segment" --model unet:depth=2,width=8 "${common[@]}" --epochs $segment_epochs --lr 0.02 \
  --save "$work/seg.ckpt" --metrics-out "$work/seg.jsonl" >"$work/seg.log" 2>&1 || fail "segment run: $(cat "$work/seg.log")"
grep -q "mean IoU" "$work/seg.log" || fail "segment run: no mean IoU ($(cat "$work/seg.log"))"
# Every pixel called background would score a mean IoU near 0.05 (the background's IoU, about 0.5,
# over 11 classes).
mean_iou=$(grep -o '"test_mean_iou":[0-9.e-]*' "$work/seg.jsonl" | tail -1 | cut -d: -f2)
[ -n "$mean_iou" ] || fail "segment run: no test_mean_iou in its JSON lines"
if [ "$segmentation" = learn ]; then
  python3 -c "import sys; sys.exit(0 if float('$mean_iou') > 0.15 else 1)" || fail "segment run: test mean IoU $mean_iou"
fi
"$train" --load "$work/seg.ckpt" --data "$work/data/fashion-segment" --evaluate --quiet \
  --metrics-out "$work/seg_eval.jsonl" >"$work/seg_eval.log" 2>&1 || fail "segment --evaluate: $(cat "$work/seg_eval.log")"
grep -q "IoU" "$work/seg_eval.log" && grep -q '"mean_iou"' "$work/seg_eval.jsonl" && grep -q '"iou"' "$work/seg_eval.jsonl" ||
  fail "segment --evaluate: $(cat "$work/seg_eval.log")"
"$train" --load "$work/seg.ckpt" --predict "$work/data/fashion-segment/test/images/00000.png" \
  "$work/data/fashion-segment/test/images/00001.png" --predict-out "$work/masks" --overlay \
  --metrics-out "$work/seg_predict.jsonl" >"$work/seg_predict.log" 2>&1 || fail "segment --predict: $(cat "$work/seg_predict.log")"
for f in 00000.mask.png 00000.overlay.png 00001.mask.png 00001.overlay.png; do
  [ -s "$work/masks/$f" ] || fail "segment --predict wrote no $f ($(cat "$work/seg_predict.log"))"
done
grep -q '"mask"' "$work/seg_predict.jsonl" || fail "segment --predict: no mask in its JSON lines"
# A mask file is an 8-bit grey PNG of the model's size (IHDR: 28 x 28, depth 8, colour type 0).
python3 - "$work/masks/00000.mask.png" <<'PY' || fail "segment --predict: the mask is not a 28x28 8-bit grey PNG"
import struct, sys
b = open(sys.argv[1], 'rb').read()
assert b[:8] == b'\x89PNG\r\n\x1a\n' and b[12:16] == b'IHDR'
w, h, depth, colour = struct.unpack('>IIBB', b[16:26])
assert (w, h, depth, colour) == (28, 28, 8, 0), (w, h, depth, colour)
PY
"$train" --load "$work/seg.ckpt" --predict "$work/data/fashion-segment/test/images/00000.png" --predict-out "$work/masks" \
  >"$work/seg_again.log" 2>&1 && fail "segment --predict over its own masks without --overwrite was not refused"
grep -q "exists" "$work/seg_again.log" || fail "segment --predict: $(cat "$work/seg_again.log")"

# Multi-label: 2x2 mosaics of garments, 10 labels.
"$train" --data "$work/data/fashion-multilabel" "${common[@]}" --epochs 1 --save "$work/ml.ckpt" --metrics-out "$work/ml.jsonl" \
  >"$work/ml.log" 2>&1 || fail "multilabel run: $(cat "$work/ml.log")"
grep -q "mAP" "$work/ml.log" || fail "multilabel run: no mAP ($(cat "$work/ml.log"))"
"$train" --load "$work/ml.ckpt" --predict "$work/data/fashion-multilabel/test/images/00000.png" --threshold 0.3 \
  --metrics-out "$work/ml_predict.jsonl" >"$work/ml_predict.log" 2>&1 || fail "multilabel --predict: $(cat "$work/ml_predict.log")"
grep -q '"threshold":0.3' "$work/ml_predict.jsonl" || fail "multilabel --predict: $(cat "$work/ml_predict.jsonl")"
"$train" --load "$work/ml.ckpt" --data "$work/data/fashion-multilabel" --evaluate --quiet >"$work/ml_eval.log" 2>&1 ||
  fail "multilabel --evaluate: $(cat "$work/ml_eval.log")"
grep -q "precision" "$work/ml_eval.log" || fail "multilabel --evaluate: $(cat "$work/ml_eval.log")"

# Regression: three values an image; resumed for a second epoch.
"$train" --data "$work/data/fashion-regress" "${common[@]}" --epochs 1 --loss huber --save "$work/reg.ckpt" \
  --metrics-out "$work/reg.jsonl" >"$work/reg.log" 2>&1 || fail "regress run: $(cat "$work/reg.log")"
grep -q "MAE" "$work/reg.log" || fail "regress run: no MAE ($(cat "$work/reg.log"))"
"$train" --resume "$work/reg.ckpt" --epochs 2 --quiet >"$work/reg_resumed.log" 2>&1 ||
  fail "regress --resume: $(cat "$work/reg_resumed.log")"
grep -q "epoch 2/2" "$work/reg_resumed.log" || fail "regress --resume: $(cat "$work/reg_resumed.log")"
"$train" --load "$work/reg.ckpt" --predict "$work/data/fashion-regress/test/images/00000.png" \
  --metrics-out "$work/reg_predict.jsonl" >"$work/reg_predict.log" 2>&1 || fail "regress --predict: $(cat "$work/reg_predict.log")"
grep -q '"values":{.*"ink":' "$work/reg_predict.jsonl" || fail "regress --predict: $(cat "$work/reg_predict.jsonl")"

# Refusals (exit 2, the option named).
refused() {
  local what=$1 expect=$2; shift 2
  "$train" "$@" >"$work/refused.log" 2>&1
  local rc=$?
  [ $rc = 2 ] && grep -q -- "$expect" "$work/refused.log" || fail "$what: exit $rc, $(cat "$work/refused.log")"
}
refused "--task against the layout" "asked for the task classify" --data "$work/data/fashion-segment" --task classify "${common[@]}"
refused "an option of another task" "applies to --task classify" --data "$work/data/fashion-segment" --model unet \
  --label-smoothing 0.1 "${common[@]}"
refused "a classifier on masks" "the unet preset segments" --data "$work/data/fashion-segment" "${common[@]}"
refused "--overlay on a regression" "applies to a segmentation model" --load "$work/reg.ckpt" --overlay \
  --predict "$work/data/fashion-regress/test/images/00000.png"
refused "--monitor of another task" "val_mean_iou" --data "$work/data/fashion-regress" --monitor val_mean_iou \
  --validation-split 0.1 --keep-best --save "$work/x.ckpt" "${common[@]}"
echo "tasks: segment, multilabel and regress trained, evaluated, predicted and refused as they should"
