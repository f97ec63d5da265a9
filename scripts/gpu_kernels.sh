#!/usr/bin/env bash
# Where a training step's GPU time goes, kernel by kernel: ours (benchmarks/train_throughput under
# Nsight Compute, summed by benchmarks/ncu_kernels.py) beside PyTorch eager's
# (benchmarks/peers/torch_gpu_kernels.py, in channels_last unless told), the same model, batch and
# precision. Run on the GPU machine after scripts/gpu_session.sh (or gpu_configure.sh and a build
# of train_throughput).
#
#   scripts/gpu_kernels.sh [MODEL [INPUT [PRECISION [BATCH [PEER_MEMORY_FORMAT]]]]]
#   (default resnet18 3x32x32 tf32 256 channels_last)
set -uo pipefail
MODEL=${1:-resnet18}
INPUT=${2:-3x32x32}
PRECISION=${3:-tf32}
BATCH=${4:-256}
PEER_FORMAT=${5:-channels_last}
cd "$(dirname "$0")/.." || exit 1
if ! command -v ncu >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/ncu ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
BUILD=${GPU_SESSION_BUILD:-$PWD/build-gpu}
THROUGHPUT=$BUILD/benchmarks/train_throughput
[ -x "$THROUGHPUT" ] || { echo "gpu_kernels: $THROUGHPUT is not built" >&2; exit 1; }
args=(--device cuda --model "$MODEL" --input "$INPUT" --batch "$BATCH" --precision "$PRECISION"
      --algo-cache "$BUILD/algo-cache.txt")
# A first run measures the convolutions' algorithms into the cache, so that the profiled run
# launches no measurement kernels: its two steps (one warm-up, one timed) are the step's own.
"$THROUGHPUT" "${args[@]}" --steps 5 --warmup 2 >/dev/null || exit 1
profile=$(mktemp)
ncu --clock-control none --metrics gpu__time_duration.sum --csv "$THROUGHPUT" "${args[@]}" --steps 1 --warmup 1 \
  >"$profile" 2>&1 || { tail -20 "$profile"; exit 1; }
python3 benchmarks/ncu_kernels.py "$profile" --steps 2 --title "cnnengine $MODEL $PRECISION batch $BATCH:"
rm -f "$profile"
python3 benchmarks/peers/torch_gpu_kernels.py --model "$MODEL" --precision "$PRECISION" --batch "$BATCH" \
  --memory-format "$PEER_FORMAT" --top 30
