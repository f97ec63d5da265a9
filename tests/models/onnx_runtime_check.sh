#!/usr/bin/env bash
# ctest onnx_export_matches_onnxruntime: for each model, onnx_reference.cpp trains it a few steps,
# exports it and writes our logits; check_onnx.py runs the file with onnxruntime on the same
# Fashion-MNIST test images and compares. Exits 77 (skipped) when the virtual environment with
# onnxruntime cannot be made.
#   onnx_runtime_check.sh VENV REFERENCE_PROGRAM FASHION_MNIST_DIR WORK_DIR MODEL...
set -euo pipefail
venv=$1 reference=$2 data=$3 work=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
python=$(bash "$here/../../scripts/python_venv.sh" "$venv" "import onnxruntime, numpy" onnxruntime numpy) || exit $?
images=$(ls "$data"/t10k-images-idx3-ubyte* | head -n 1)
count=256
mkdir -p "$work"
for model in "$@"; do
  prefix=$work/$(basename "$model" .txt)
  "$reference" "$data" "$model" "$prefix" "$count"
  "$python" "$here/check_onnx.py" --model "$prefix.onnx" --logits "$prefix.logits" --images "$images" --count "$count"
done
