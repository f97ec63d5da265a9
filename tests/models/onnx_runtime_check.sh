#!/usr/bin/env bash
# ctest onnx_export_matches_onnxruntime: for each model, onnx_reference.cpp trains it a few steps,
# exports it and writes our outputs; check_onnx.py runs the file with onnxruntime on the same
# Fashion-MNIST test images and compares. The MODELs given are classifications; after them come
# the other tasks' outputs, each on a small network: a U-Net exported as a segmentation (logits
# and softmax per pixel), a multilabel network (sigmoid) and a regression (values). Exits 77
# (skipped) when the virtual environment with onnxruntime cannot be made.
#   onnx_runtime_check.sh VENV REFERENCE_PROGRAM FASHION_MNIST_DIR WORK_DIR MODEL...
set -euo pipefail
venv=$1 reference=$2 data=$3 work=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
python=$(bash "$here/../../scripts/python_venv.sh" "$venv" "import onnxruntime, numpy" onnxruntime numpy) || exit $?
images=$(ls "$data"/t10k-images-idx3-ubyte* | head -n 1)
count=256
mkdir -p "$work"

# check NAME MODEL [TASK CLASSES]: the files are WORK_DIR/NAME.onnx, its float16 export
# WORK_DIR/NAME.fp16.onnx and our outputs WORK_DIR/NAME.logits.
check() {
  local prefix=$work/$1 model=$2 task=${3:-classify}
  "$reference" "$data" "$model" "$prefix" "$count" "${@:3}"
  for file in "$prefix.onnx" "$prefix.fp16.onnx"; do
    "$python" "$here/check_onnx.py" --model "$file" --logits "$prefix.logits" --images "$images" \
      --count "$count" --task "$task"
  done
}

for model in "$@"; do
  check "$(basename "$model" .txt)" "$model"
done
check segment-unet unet:depth=2,width=8 segment 3
check multilabel "$here/onnx_multilabel_net.txt" multilabel 6
check regress "$here/onnx_regression_net.txt" regress 3
