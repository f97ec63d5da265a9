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

CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")}
log "nvcc: $(command -v nvcc || echo none), CUDA prefix $CUDA_HOME"
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DCNN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
            -DCMAKE_CUDA_STANDARD=17 "-DCMAKE_PREFIX_PATH=$ROOT/.deps" -DCNN_BUILD_BENCHMARKS=ON
            "-DCNN_FASHION_MNIST_DIR=$ROOT/.deps/datasets/fashion-mnist")
can_build=1

# cuDNN and cuBLAS: in the CUDA prefix, else in the NVIDIA Python wheels PyTorch came with
# (nvidia.cudnn; cuBLAS in nvidia.cu13 from CUDA 13 on, nvidia.cublas before), which hold only
# versioned libraries (libcudnn.so.9, libcublas.so.13) and no unversioned development symlink.
wheel_dirs() {  # python-package...: their folders, one a line
  python3 - "$@" 2>/dev/null <<'PY'
import importlib, sys
for name in sys.argv[1:]:
    try:
        print(*importlib.import_module(name).__path__, sep="\n")
    except Exception:
        pass
PY
}
first_file() {  # name-pattern folder...: the first file of that name under the folders
  local pattern=$1
  shift
  (($#)) && find -L "$@" -name "$pattern" 2>/dev/null | sort | head -1
}
prepend_library_path() { export LD_LIBRARY_PATH=$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; }
cuda_lib_dirs=("$CUDA_HOME"/lib64 "$CUDA_HOME"/lib "$CUDA_HOME"/targets/*/lib)

if [ -e "$CUDA_HOME"/include/cudnn.h ] && [ -n "$(first_file 'libcudnn.so' "${cuda_lib_dirs[@]}")" ]; then
  log "cuDNN: in $CUDA_HOME"
else
  mapfile -t cudnn_roots < <(wheel_dirs nvidia.cudnn)
  cudnn_header=$(first_file cudnn.h "${cudnn_roots[@]}")
  cudnn_lib=$(first_file 'libcudnn.so*' "${cudnn_roots[@]}")
  if [ -n "$cudnn_header" ] && [ -n "$cudnn_lib" ]; then
    log "cuDNN: from the Python package at ${cudnn_roots[0]} ($cudnn_lib)"
    cmake_args+=("-DCUDNN_ROOT=${cudnn_roots[0]}" "-DCUDNN_INCLUDE_DIR=$(dirname "$cudnn_header")" "-DCUDNN_LIBRARY=$cudnn_lib")
    prepend_library_path "$(dirname "$cudnn_lib")"
  else
    log "ERROR: no cuDNN (neither $CUDA_HOME/include/cudnn.h nor the nvidia-cudnn Python package with headers)"
    can_build=0
  fi
fi
if [ -e "$CUDA_HOME"/include/cublas_v2.h ] && [ -n "$(first_file 'libcublas.so' "${cuda_lib_dirs[@]}")" ]; then
  log "cuBLAS: in $CUDA_HOME"
else
  mapfile -t cublas_roots < <(wheel_dirs nvidia.cu13 nvidia.cublas)
  cublas_header=$(first_file cublas_v2.h "${cublas_roots[@]}")
  cublas_lib=$(first_file 'libcublas.so*' "${cublas_roots[@]}")
  cublaslt_lib=$(first_file 'libcublasLt.so*' "${cublas_roots[@]}")
  if [ -n "$cublas_header" ] && [ -n "$cublas_lib" ] && [ -n "$cublaslt_lib" ]; then
    log "cuBLAS: from the Python package ($cublas_lib, $cublaslt_lib, $cublas_header)"
    # FindCUDAToolkit's CUDA::cublas takes the cached library paths; its headers come last on
    # every compile line (the tests include backends/cuda/detail/check.hpp too).
    cublas_include=$(dirname "$cublas_header")
    cmake_args+=("-DCUDA_cublas_LIBRARY=$cublas_lib" "-DCUDA_cublasLt_LIBRARY=$cublaslt_lib"
                 "-DCMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES=$cublas_include"
                 "-DCMAKE_CUDA_STANDARD_INCLUDE_DIRECTORIES=$cublas_include")
    prepend_library_path "$(dirname "$cublas_lib")"
  else
    log "ERROR: no cuBLAS (neither $CUDA_HOME/include/cublas_v2.h with libcublas.so nor the nvidia-cublas Python package)"
    can_build=0
  fi
fi
# zlib (gzipped IDX files): the system's headers, else those carried in .deps/include; the
# library, else the runtime libz.so.1 (no development symlink on a bare machine).
zlib_header=$(ls /usr/include/zlib.h /usr/local/include/zlib.h "$ROOT/.deps/include/zlib.h" 2>/dev/null | head -1)
zlib_lib=$(ls /usr/lib/x86_64-linux-gnu/libz.so /usr/lib64/libz.so /usr/lib/libz.so /usr/local/lib/libz.so 2>/dev/null | head -1)
[ -n "$zlib_lib" ] || zlib_lib=$(ldconfig -p 2>/dev/null | awk '/libz\.so\.1 .*x86-64/ {print $NF; exit}')
[ -n "$zlib_lib" ] || zlib_lib=$(ls /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libz.so.1 2>/dev/null | head -1)
if [ -z "$zlib_header" ] || [ -z "$zlib_lib" ]; then
  log "ERROR: zlib missing (zlib.h: ${zlib_header:-none}, libz: ${zlib_lib:-none}); run scripts/fetch_gpu_deps.sh"
  can_build=0
else
  log "zlib: $zlib_header, $zlib_lib"
  cmake_args+=("-DZLIB_INCLUDE_DIR=$(dirname "$zlib_header")" "-DZLIB_LIBRARY=$zlib_lib")
fi
if [ ! -d "$ROOT/.deps/lib/cmake" ]; then
  log "ERROR: .deps/ missing: run scripts/fetch_gpu_deps.sh on the Debian machine and carry .deps"
  can_build=0
fi

# ---- build and test ------------------------------------------------------------------------
configured=0
if ((can_build)) && run_phase configure 60 300 "$OUT/build.log" cmake -S . -B "$BUILD" -G Ninja "${cmake_args[@]}"; then
  configured=1
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
