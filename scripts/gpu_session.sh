#!/usr/bin/env bash
# One session on a GPU machine (nvcc, CMake, ninja, PyTorch; no Debian packages, no network):
# build with the header-only dependencies carried in .deps/ (scripts/fetch_gpu_deps.sh makes
# it), run the CUDA tests, the environment report, our training benchmarks and the PyTorch
# peer (benchmarks/peers/torch_gpu.py), the allocation comparison on the device, then the CPU
# tests with the time left. Logs and JSON go
# to $OUT (./out by default), at most 8 files. Every phase has a time limit; the whole stays
# under GPU_SESSION_SECONDS (default 520). A phase that fails is logged and the next one runs.
#
#   scripts/gpu_session.sh [all|test|bench]
# all (default) does everything in one call. `test` (build, CUDA tests, doctor, CPU tests) then
# `bench` (benchmarks and the peer) split it over two calls while the machine stays warm: the
# second call finds build-gpu/ and only checks that it is up to date.
set -uo pipefail
WHAT=${1:-all}
case "$WHAT" in all|test|bench) ;; *) echo "usage: $0 [all|test|bench]" >&2; exit 2 ;; esac
want_tests() { [ "$WHAT" != bench ]; }
want_bench() { [ "$WHAT" != test ]; }
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
LIMIT=${GPU_SESSION_SECONDS:-520}
BUDGET=${GPU_SESSION_BUDGET:-2GiB}  # memory budget for the largest-batch comparisons
BUILD=${GPU_SESSION_BUILD:-$ROOT/build-gpu}
START=$SECONDS
SESSION_LOG=$OUT/session.log
: > "$SESSION_LOG"

log() { echo "[+$((SECONDS - START))s] $*" | tee -a "$SESSION_LOG"; }
# Seconds a phase may take: its cap, less when that would eat the `reserve` later phases need.
allow() {
  local cap=$1 left=$((LIMIT - (SECONDS - START) - $2))
  if ((left < cap)); then cap=$left; fi
  if ((cap < 5)); then cap=5; fi
  echo "$cap"
}
run_phase() {  # name cap reserve logfile command...
  local name=$1 cap rc
  cap=$(allow "$2" "$3")
  local logfile=$4
  shift 4
  log "$name: start (limit ${cap}s)"
  timeout --kill-after=10 "$cap" "$@" >>"$logfile" 2>&1
  rc=$?
  if ((rc == 124 || rc == 137)); then log "$name: TIMED OUT after ${cap}s"; else log "$name: exit $rc"; fi
  return $rc
}

# ---- environment ---------------------------------------------------------------------------
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
commit=$(git rev-parse HEAD 2>/dev/null || cat "$ROOT/.deps/commit" 2>/dev/null || echo unknown)
log "commit $commit (.deps made at $(cat "$ROOT/.deps/commit" 2>/dev/null || echo unknown)), $(nproc) cores"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  nvcc --version 2>&1 | tail -1
  cmake --version 2>&1 | head -1
  echo "ninja $(ninja --version 2>&1)"
  g++ --version 2>&1 | head -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1
} | tee -a "$SESSION_LOG"

# ---- build and test ------------------------------------------------------------------------
# cuDNN, cuBLAS and NCCL: CMake finds them in the toolkit or in python3's NVIDIA wheels
# (cmake/CnnCudaLibraries.cmake); scripts/simulate_gpu_image.sh builds this way on a Debian machine.
configured=0
if run_phase configure 60 300 "$OUT/build.log" bash scripts/gpu_configure.sh "$BUILD"; then
  configured=1
  grep -E '^(nvcc|python3|zlib|CUDNN|CUBLAS|NCCL)|cnnengine:' "$OUT/build.log" >>"$SESSION_LOG"
  # -k 0: a file that does not compile (one test, say) leaves the other programs built; each
  # phase below runs when its program is there.
  if ! run_phase build 240 250 "$OUT/build.log" cmake --build "$BUILD" -j"$(nproc)" -- -k 0; then
    { grep -E '^FAILED: |error:' "$OUT/build.log" | head -20; tail -3 "$OUT/build.log"; } >>"$SESSION_LOG"
  fi
else
  tail -30 "$OUT/build.log" >>"$SESSION_LOG" 2>/dev/null
fi
TRAIN_IMAGES=$BUILD/examples/train_images/train_images
built() {  # program: whether the build made it (else says so)
  ((configured)) || return 1
  [ -x "$1" ] && return 0
  log "not built: $1"
  return 1
}
if want_tests && built "$BUILD/tests/cnn_cuda_tests"; then
  run_phase "cuda tests" 150 "$(want_bench && echo 200 || echo 40)" "$OUT/cuda_tests.log" \
    "$BUILD/tests/cnn_cuda_tests" --durations yes
  tail -4 "$OUT/cuda_tests.log" >>"$SESSION_LOG"
fi
if want_tests && built "$TRAIN_IMAGES"; then
  run_phase doctor 20 190 "$SESSION_LOG" "$TRAIN_IMAGES" --doctor
fi

# ---- our training benchmarks ------------------------------------------------------------------
OURS_LOG=$OUT/ours.log
OURS_JSON=$OUT/ours.jsonl
if want_bench && built "$TRAIN_IMAGES"; then
  data_small=$ROOT/.deps/datasets/fashion-mnist
  data_rgb=/tmp/cnn_synthetic_rgb32
  # resnet18 runs on 3x32x32: synthetic PNGs, 10 classes, 10,000 training and 1,000 test images.
  run_phase "synthetic data" 30 180 "$OURS_LOG" python3 - "$data_rgb" <<'PY'
import os, sys
import numpy as np
from PIL import Image
root = sys.argv[1]
rng = np.random.default_rng(1)
for split, per_class in (("train", 1000), ("test", 100)):
    for c in range(10):
        folder = os.path.join(root, split, f"class{c}")
        os.makedirs(folder, exist_ok=True)
        images = rng.integers(0, 256, size=(per_class, 32, 32, 3), dtype=np.uint8)
        for i, image in enumerate(images):
            Image.fromarray(image).save(os.path.join(folder, f"{i}.png"), compress_level=1)
print("synthetic data in", root)
PY
  train=("$TRAIN_IMAGES" --device cuda --seed 1 --quiet)
  bench() {  # model data precision [graph]
    local metrics=/tmp/metrics_$1_$3${4:+_$4}.jsonl flags=()
    [ "$3" = tf32 ] && flags+=(--precision tf32)
    [ "${4:-}" = graph ] && flags+=(--cuda-graph)
    rm -f "$metrics"
    echo "=== $1 $3 ${4:-}" >>"$OURS_LOG"
    run_phase "ours $1 $3 ${4:-}" 40 160 "$OURS_LOG" "${train[@]}" --data "$2" --model "$1" --epochs 2 --batch 256 \
      --micro-batch 256 --optimizer adamw --lr 1e-3 --metrics-out "$metrics" "${flags[@]}"
    python3 - "$metrics" "$1" "$3" "${4:-eager}" >>"$OURS_JSON" <<'PY'
import json, sys
path, model, precision, mode = sys.argv[1:5]
try:
    records = [json.loads(l) for l in open(path) if l.strip()]
except OSError:
    records = []
epochs = [r for r in records if r.get("type") == "epoch"]
steps = [r for r in records if r.get("type") == "step"]
summary = next((r for r in records if r.get("type") == "summary"), {})
# Everything we reserve on the device: the step arena and persistent blocks, and cuBLAS's
# workspace (PyTorch's max_memory_reserved counts its own too).
library = summary.get("library_reserved_bytes", 0)
print(json.dumps({"engine": "cnnengine", "kind": "throughput", "model": model, "precision": precision,
                  "mode": mode, "graph_replays": summary.get("graph_replays"), "batch": 256, "epochs": len(epochs),
                  "images_per_second": epochs[-1]["images_per_second"] if epochs else None,
                  "images_per_second_by_epoch": [e["images_per_second"] for e in epochs],
                  "reserved_bytes": max((s.get("reserved_bytes", 0) + library for s in steps), default=None),
                  "library_reserved_bytes": library}))
PY
  }
  plan() {  # model data largest-batch-to-try
    echo "=== plan $1 budget $BUDGET" >>"$OURS_LOG"
    local before
    before=$(wc -l <"$OURS_LOG")
    # --fast-start: measuring every candidate micro-batch's convolutions would not fit the time.
    run_phase "ours plan $1" 45 0 "$OURS_LOG" "${train[@]}" --data "$2" --model "$1" --plan --fast-start \
      --memory-budget "$BUDGET" --batch "$3"
    tail -n +"$((before + 1))" "$OURS_LOG" | python3 -c '
import json, re, sys
text = sys.stdin.read()
m = (re.search(r"largest micro-batch that fits: (\d+)", text)  # examples/train_images/plan_report.cpp
     or re.search(r"chosen: batch \d+ = \d+ x micro-batch (\d+)", text))
print(json.dumps({"engine": "cnnengine", "kind": "largest_batch", "model": sys.argv[1], "budget": sys.argv[2],
                  "largest_batch": int(m.group(1)) if m else None,
                  "note": "largest micro-batch the planner fits; capped at the batch asked for (" + sys.argv[3] + ")"}))' \
      "$1" "$BUDGET" "$3" >>"$OURS_JSON"
  }
  if [ -d "$data_small" ]; then
    bench small "$data_small" fp32
    bench small "$data_small" fp32 graph
    bench small "$data_small" tf32
    bench small "$data_small" tf32 graph
  else
    log "no Fashion-MNIST in .deps/datasets: the small benchmarks are skipped"
  fi
  bench resnet18 "$data_rgb" fp32
  bench resnet18 "$data_rgb" tf32
  bench resnet18 "$data_rgb" tf32 graph
fi

# ---- the PyTorch peer -------------------------------------------------------------------------
# It starts no measurement after its time budget and no torch.compile one in the last 100 s of it.
if want_bench; then
  peer_seconds=$(allow 200 40)
  log "pytorch peer: start (time budget ${peer_seconds}s)"
  PYTHONUNBUFFERED=1 timeout --kill-after=10 "$peer_seconds" python3 benchmarks/peers/torch_gpu.py \
    --budget "$BUDGET" --time-budget "$((peer_seconds > 30 ? peer_seconds - 20 : 10))" --compile-reserve 100 \
    --out "$OUT/torch_gpu.jsonl" >>"$SESSION_LOG" 2>&1
  log "pytorch peer: exit $?"
fi

# ---- the largest micro-batch our planner fits in the budget (slowest: cuDNN measures every
# candidate batch's convolutions), with what time is left -------------------------------------
if want_bench && built "$TRAIN_IMAGES"; then
  [ -d "$data_small" ] && plan small "$data_small" 16384
  plan resnet18 "$data_rgb" 2048
  cat "$OURS_JSON" >>"$SESSION_LOG"
fi

# ---- the allocation-strategy comparison on the cudaMalloc upstream (issue 3), with the time
# left; its five files come back as one archive ($OUT takes 8 files) -------------------------
if want_bench && built "$BUILD/benchmarks/alloc_compare"; then
  alloc_out=/tmp/alloc_gpu
  rm -rf "$alloc_out"
  run_phase "alloc_compare cuda" 120 0 "$OURS_LOG" "$BUILD/benchmarks/alloc_compare" --device cuda \
    --budget 64MiB --churn-steps 1000 --search-steps 100 --series-stride 10 --out "$alloc_out"
  [ -d "$alloc_out" ] && tar -czf "$OUT/alloc_gpu.tar.gz" -C "$alloc_out" . && cat "$alloc_out"/alloc_table.txt >>"$SESSION_LOG"
fi

# ---- the CPU tests (CI runs them too): with the time left --------------------------------------
if want_tests && built "$BUILD/tests/cnn_tests"; then
  run_phase "cpu tests" 200 0 "$OUT/cpu_tests.log" \
    ctest --test-dir "$BUILD" -LE "cuda|install" -j"$(nproc)" --timeout 80 --output-on-failure
  tail -4 "$OUT/cpu_tests.log" >>"$SESSION_LOG"
fi

log "done; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
