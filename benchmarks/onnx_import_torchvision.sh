#!/usr/bin/env bash
# Runs benchmarks/onnx_import_torchvision.py (ONNX import of torchvision's networks, checked by
# onnxruntime) in a virtual environment of torch, torchvision, onnx, onnxruntime, numpy and
# onnxscript, made once by scripts/python_venv.sh under $VENV (default
# ~/.cache/cnnengine/torchvision-venv). Arguments pass through to the script, e.g.
#   benchmarks/onnx_import_torchvision.sh --train-images build-portable/examples/train_images/train_images \
#     --work /tmp/onnx-tv --out-md benchmarks/results/onnx_import_torchvision.md \
#     --out-jsonl benchmarks/results/onnx_import_torchvision.jsonl
# torch comes from PyTorch's CPU-only wheel index where that can be reached (a few hundred MB),
# else from plain PyPI (the CUDA build: some GB of nvidia-* packages, run on the CPU all the same).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${VENV:-$HOME/.cache/cnnengine/torchvision-venv}
cpu_index=https://download.pytorch.org/whl/cpu
index=()
if [ ! -f "$venv/.ready" ] &&
    python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/torch/', timeout=10)" "$cpu_index" \
      2>/dev/null; then
  index=(--extra-index-url "$cpu_index")
fi
python=$(bash "$here/../scripts/python_venv.sh" "$venv" "import torch, torchvision, onnx, onnxruntime, numpy, onnxscript" \
  torch torchvision onnx onnxruntime numpy onnxscript "${index[@]}")
exec "$python" "$here/onnx_import_torchvision.py" "$@"
