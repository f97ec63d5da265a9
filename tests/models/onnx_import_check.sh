#!/usr/bin/env bash
# ctest onnx_import_matches_onnxruntime: make_onnx_import_models.py writes small ONNX models, one
# per operator and attribute, as other engines' exporters write them; train_images imports each
# (--load) and exports it again (--export-onnx), and compare_onnx_models.py runs both files with
# onnxruntime on the same random inputs (outputs within 1e-4 of the logits' scale). The models it
# must refuse are refused naming the node and its operator, writing nothing; one of a symbolic
# image size is imported at --image-size; one model goes
# through a checkpoint (--save) and back, predicts, and is fine-tuned on three classes, then
# exported and evaluated. Exits 77 (skipped) when the virtual environment with
# onnx and onnxruntime cannot be made.
#   onnx_import_check.sh VENV TRAIN_IMAGES WORK_DIR
set -euo pipefail
venv=$1 train_images=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
python=$(bash "$here/../../scripts/python_venv.sh" "$venv" "import onnx, onnxruntime, numpy" onnx onnxruntime numpy) || exit $?
rm -rf "$work"
mkdir -p "$work/ours"
"$python" "$here/make_onnx_import_models.py" --out "$work" >/dev/null
failed=0

while read -r model; do
  log=$work/ours/$model.log
  if ! "$train_images" --load "$work/$model" --export-onnx "$work/ours/$model" >"$log" 2>&1; then
    echo "FAILED: $model was not imported:"
    tail -n 3 "$log"
    failed=1
    continue
  fi
  "$python" "$here/compare_onnx_models.py" --original "$work/$model" --ours "$work/ours/$model" || failed=1
done <"$work/models.txt"

while IFS=$'\t' read -r model name kind; do
  log=$work/ours/$model.log
  if "$train_images" --load "$work/$model" --export-onnx "$work/ours/$model" >"$log" 2>&1; then
    echo "FAILED: $model was imported, where it must be refused"
    failed=1
  elif ! grep -q "$name" "$log" || ! grep -q "$kind" "$log"; then
    echo "FAILED: the refusal of $model does not name $name ($kind): $(tail -n 1 "$log")"
    failed=1
  elif [ -e "$work/ours/$model" ]; then
    echo "FAILED: refusing $model wrote $work/ours/$model"
    failed=1
  else
    echo "refused $model: $(tail -n 1 "$log")"
  fi
done <"$work/refusals.tsv"

# A model whose height and width are symbolic: refused without --image-size, naming its input;
# converted at --image-size N, it computes what the original does at N x N.
while IFS=$'\t' read -r model size; do
  log=$work/ours/$model.log
  if "$train_images" --load "$work/$model" --export-onnx "$work/ours/$model" >"$log" 2>&1 ||
      ! grep -q "symbolic.*--image-size" "$log"; then
    echo "FAILED: $model, of a symbolic size, was not refused asking for --image-size: $(tail -n 1 "$log")"
    failed=1
  fi
  if ! "$train_images" --load "$work/$model" --image-size "$size" --export-onnx "$work/ours/$model" >"$log" 2>&1; then
    echo "FAILED: $model was not imported at $size:"
    tail -n 3 "$log"
    failed=1
    continue
  fi
  "$python" "$here/compare_onnx_models.py" --original "$work/$model" --ours "$work/ours/$model" --size "$size" ||
    failed=1
done <"$work/sized.tsv"

# Through a checkpoint: --save converts, and the checkpoint exports the same model.
"$train_images" --load "$work/tiny_resnet.onnx" --save "$work/ours/tiny_resnet.ckpt" >/dev/null
"$train_images" --load "$work/ours/tiny_resnet.ckpt" --export-onnx "$work/ours/tiny_resnet_from_checkpoint.onnx" >/dev/null
"$python" "$here/compare_onnx_models.py" --original "$work/tiny_resnet.onnx" \
  --ours "$work/ours/tiny_resnet_from_checkpoint.onnx" || failed=1

# An imported model predicts as a checkpoint does.
log=$work/ours/predict.log
if ! "$train_images" --load "$work/tiny_resnet.onnx" --predict "$here/../train_images/predict_images/fashion_1.png" \
    --top 2 --threads 1 >"$log" 2>&1 || ! grep -q "fashion_1.png" "$log"; then
  echo "FAILED: --predict with an imported model:"
  tail -n 3 "$log"
  failed=1
fi

# Fine-tuning: with no --model the imported network trains on 3 classes, its head replaced, the
# layers before it loaded and frozen.
log=$work/ours/fine_tune.log
"$train_images" --load "$work/tiny_resnet.onnx" --data "$here/../train_images/one_image_per_class" --image-size 16 \
  --channels 3 --epochs 1 --threads 1 --quiet --freeze backbone --export-onnx "$work/ours/fine_tuned.onnx" >"$log" 2>&1 ||
  { echo "FAILED: fine-tuning:"; tail -n 3 "$log"; failed=1; }
if ! grep -q "new head for 3 classes: dense 10 -> dense 3" "$log" || ! grep -q "frozen: nodes 1 to 22" "$log" ||
    ! grep -q "loaded from .*tiny_resnet.onnx (another network): .* initialised: [0-9]* dense 3" "$log"; then
  echo "FAILED: fine-tuning the imported network did not replace its head and load the rest:"
  cat "$log"
  failed=1
fi

# The fine-tuned model, exported, evaluates on its data as a checkpoint does.
log=$work/ours/evaluate.log
if ! "$train_images" --load "$work/ours/fine_tuned.onnx" --evaluate --data "$here/../train_images/one_image_per_class" \
    --image-size 16 --channels 3 --threads 1 >"$log" 2>&1 || ! grep -q "accuracy" "$log"; then
  echo "FAILED: --evaluate with an imported model:"
  tail -n 3 "$log"
  failed=1
fi

[ "$failed" = 0 ] && echo "all $(wc -l <"$work/models.txt") models imported faithfully"
exit "$failed"
