#!/usr/bin/env bash
# A session on the GPU machine (nvcc, CMake, ninja, PyTorch and NVIDIA's wheels; no Debian
# packages, no network), in one call or two while the machine stays warm (on an H100: configure
# 5 s, the build 25 s, the cuda tests 55 s, the measurements about 3 minutes):
#
#   scripts/gpu_session.sh test    configure and build (scripts/gpu_configure.sh, with the
#                                  header-only dependencies carried in .deps: make it here with
#                                  scripts/fetch_gpu_deps.sh), the CUDA tests, the environment
#                                  report, where the libraries were found
#   scripts/gpu_session.sh bench   the build checked up to date, then the measurements, the most
#                                  informative first: resnet18 and small, ours
#                                  (benchmarks/train_throughput) against PyTorch
#                                  (benchmarks/peers/torch_gpu.py) on one device-resident batch,
#                                  eager, with and without a per-step .item(); the largest batch in
#                                  GPU_SESSION_BUDGET (2GiB), both sides by running it; the main job
#                                  (train_images --device cuda on Fashion-MNIST); torch.compile;
#                                  small-bn's time to 93%; the allocation comparison on the device
#   scripts/gpu_session.sh all     both, in one call (a machine that stays longer)
#   scripts/gpu_session.sh mixed   mixed precision: the build (configured first on a bare
#                                  machine), the CUDA tests tagged [bf16], then ours in tf32, bf16
#                                  and fp16 against PyTorch's autocast (GradScaler in fp16) on
#                                  resnet18, small's and small-bn's Fashion-MNIST accuracy in fp32,
#                                  bf16 and fp16 (benchmarks/compare_precision_accuracy.py --device
#                                  cuda), resnet18's largest batch in fp32 and bf16 within
#                                  GPU_SESSION_BUDGET
#   scripts/gpu_session.sh mixed-all test, then mixed's measurements, in one call (the test files
#                                  already ran the [bf16] tests)
#   scripts/gpu_session.sh best-peer test (with recomputation's step-by-step distances), then resnet18
#                                  in bf16 and tf32, ours eager and with graphs against PyTorch
#                                  eager in channels_last and NCHW, the kernels of a bf16 step,
#                                  torch.compile in bf16 and channels_last, then resnet50 at
#                                  3x224x224, batch 128, bf16 (ours, PyTorch eager channels_last),
#                                  ours with channels-last images (--channels-last: resnet18 with
#                                  graphs, resnet50) and resnet50's layers in both orders
#                                  (conv_layouts, into layouts.txt)
#   scripts/gpu_session.sh speed-bf16 train_throughput alone built, then resnet18 in bf16, ours eager
#                                  and with graphs, the kernels of its step, and torch.compile in
#                                  bf16 and channels_last: a short call after a change
#   scripts/gpu_session.sh mixed-speed test, then mixed's speed alone (resnet18 in tf32, bf16 and
#                                  fp16 against PyTorch eager in NCHW and channels_last, small
#                                  too), the kernels of a resnet18
#                                  bf16 step (scripts/gpu_kernels.sh, into kernels.txt), and
#                                  resnet18's largest batch in fp32 and bf16 (ours only)
#
# Logs and JSON lines go to $OUT (./out by default), at most 8 files; benchmarks/gpu_report.py
# turns them into the markdown report for benchmarks/results/. Every phase has a cap and leaves
# the phases after it the time they reserve; one that fails or times out is logged and the next
# runs. GPU_SESSION_SECONDS (default 530) bounds the call.
#
# cuDNN's measured algorithms are kept in the build folder (algo-cache.txt) between the processes
# of a session, so only the first process that meets a shape measures it.
set -uo pipefail
WHAT=${1:-all}
case "$WHAT" in all|test|bench|mixed|mixed-all|mixed-speed|best-peer|speed-bf16) ;;
  *) echo "usage: $0 [all|test|bench|mixed|mixed-all|mixed-speed|best-peer|speed-bf16]" >&2; exit 2 ;;
esac
want_tests() {
  [ "$WHAT" = all ] || [ "$WHAT" = test ] || [ "$WHAT" = mixed-all ] || [ "$WHAT" = mixed-speed ] ||
    [ "$WHAT" = best-peer ]
}
want_bench() { [ "$WHAT" = all ] || [ "$WHAT" = bench ]; }
want_mixed() { [ "$WHAT" = mixed ] || [ "$WHAT" = mixed-all ]; }
want_mixed_speed() { want_mixed || [ "$WHAT" = mixed-speed ]; }
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
LIMIT=${GPU_SESSION_SECONDS:-$([ "$WHAT" = all ] && echo 1060 || echo 530)}
BUDGET=${GPU_SESSION_BUDGET:-2GiB}  # the largest-batch comparison's memory budget
BUILD=${GPU_SESSION_BUILD:-$ROOT/build-gpu}
ALGO_CACHE=$BUILD/algo-cache.txt
START=$SECONDS
SESSION_LOG=$OUT/session.log
OURS_JSON=$OUT/ours.jsonl
TORCH_JSON=$OUT/torch_gpu.jsonl
RUNS_LOG=$OUT/runs.log  # every measurement's own output
: >>"$SESSION_LOG"

log() { echo "[$WHAT +$((SECONDS - START))s] $*" | tee -a "$SESSION_LOG"; }
left() { echo $((LIMIT - (SECONDS - START))); }
# Seconds a phase may take: its cap, less when that would eat the `reserve` later phases need.
allow() {
  local cap=$1 rest=$(($(left) - $2))
  if ((rest < cap)); then cap=$rest; fi
  echo "$cap"
}
run_phase() {  # name cap reserve logfile command...: skipped under 10 s, else run with its limit
  local name=$1 cap rc
  cap=$(allow "$2" "$3")
  local logfile=$4
  shift 4
  if ((cap < 10)); then
    log "$name: SKIPPED (${cap}s left for it)"
    return 124
  fi
  log "$name: start (limit ${cap}s)"
  echo "=== $name" >>"$logfile"
  timeout --kill-after=10 "$cap" "$@" >>"$logfile" 2>&1
  rc=$?
  if ((rc == 124 || rc == 137)); then log "$name: TIMED OUT after ${cap}s"; else log "$name: exit $rc"; fi
  return $rc
}

# ---- the machine ---------------------------------------------------------------------------
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
# The commit .deps names (scripts/fetch_gpu_deps.sh, run after the last commit): the device's copy
# of .git has been seen naming the session's first commit instead.
commit=$(cat "$ROOT/.deps/commit" 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)
export CNN_COMMIT=$commit  # for the benchmarks' reports (benchmarks/machine.py)
log "commit $commit, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if want_tests; then
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
    echo "nvcc $(command -v nvcc): $(nvcc --version 2>&1 | tail -1)"
    cmake --version 2>&1 | head -1
    echo "ninja $(ninja --version 2>&1)"
    g++ --version 2>&1 | head -1
    echo "python3 $(command -v python3)"
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1
    # Where the NVIDIA wheels are, for the next session's notes.
    python3 -c 'import importlib
for m in ("nvidia.cudnn", "nvidia.cu13", "nvidia.cublas", "nvidia.nccl"):
    try: print(m, *importlib.import_module(m).__path__)
    except Exception as e: print(m, "absent:", e)' 2>&1
  } | tee -a "$SESSION_LOG"
fi

# ---- build ---------------------------------------------------------------------------------
# cuDNN, cuBLAS and NCCL: CMake finds them in the toolkit or in python3's NVIDIA wheels
# (cmake/CnnCudaLibraries.cmake); scripts/simulate_gpu_image.sh builds this way on a Debian machine.
# What the build leaves the later phases: best-peer, made for a short call, keeps less for them
# (its measurements come last and are skipped when the time is spent).
if [ "$WHAT" = best-peer ]; then CONFIGURE_RESERVE=150 BUILD_RESERVE=120
elif [ "$WHAT" = speed-bf16 ]; then CONFIGURE_RESERVE=100 BUILD_RESERVE=90
else CONFIGURE_RESERVE=420 BUILD_RESERVE=$(want_tests && echo 310 || echo 300); fi
TARGETS=(cnn_cuda_tests train_images train_throughput alloc_compare conv_layouts)
[ "$WHAT" = speed-bf16 ] && TARGETS=(train_throughput cnnengine_cuda)  # the CUDA backend is a plugin loaded at run time
configured=0
if [ -f "$BUILD/CMakeCache.txt" ] && ! want_tests; then
  configured=1  # the test call configured it
elif run_phase configure 90 "$CONFIGURE_RESERVE" "$OUT/build.log" bash scripts/gpu_configure.sh "$BUILD"; then
  configured=1
  grep -E '^(nvcc|python3|zlib|CUDNN|CUBLAS|NCCL)|cnnengine:' "$OUT/build.log" >>"$SESSION_LOG"
else
  tail -30 "$OUT/build.log" >>"$SESSION_LOG" 2>/dev/null
fi
if ((configured)); then
  # -k 0: a file that does not compile (one test, say) leaves the other programs built; each
  # phase below runs when its program is there. A warm second call finds it up to date.
  if ! run_phase build 240 "$BUILD_RESERVE" "$OUT/build.log" \
       cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}" \
       -- -k 0; then
    { grep -E '^FAILED: |error:' "$OUT/build.log" | head -20; tail -3 "$OUT/build.log"; } >>"$SESSION_LOG"
  fi
fi
TRAIN_IMAGES=$BUILD/examples/train_images/train_images
THROUGHPUT=$BUILD/benchmarks/train_throughput
built() {  # program: whether the build made it (else says so)
  ((configured)) || return 1
  [ -x "$1" ] && return 0
  log "not built: $1"
  return 1
}

# ---- the CUDA tests and the environment report ---------------------------------------------
# One process a test file: a crash or a sticky CUDA error (an illegal address poisons the
# context) then spoils that file's results alone. GPU_SESSION_TEST_SECONDS bounds them all.
if want_tests && built "$BUILD/tests/cnn_cuda_tests"; then
  tests_until=$((SECONDS + ${GPU_SESSION_TEST_SECONDS:-300}))
  for source in tests/backends/cuda/*_test.cpp; do
    file=$(basename "$source" .cpp)
    run_phase "cuda $file" 120 "$(($(left) - (tests_until - SECONDS)))" "$OUT/cuda_tests.log" \
      "$BUILD/tests/cnn_cuda_tests" -# "[#$file]" --durations yes
    rc=$?
    ((rc == 0)) || failed_files+=" $file($rc)"
  done
  log "cuda test files failed:${failed_files:- none}"
  grep -E "FAILED|failed|REQUIRE|CHECK|[Ee]rror" "$OUT/cuda_tests.log" | head -40 >>"$SESSION_LOG"
  if [ "$WHAT" = best-peer ]; then  # each step's distance between recomputing and keeping
    run_phase "recomputation distances" 20 120 "$OUT/cuda_tests.log" "$BUILD/tests/cnn_cuda_tests" \
      "on the GPU recomputing trains as keeping, within 1e-5" -s
    grep -E "distance from keeping|auto's:" "$OUT/cuda_tests.log" | sort -u | head -12 >>"$SESSION_LOG"
  fi
fi
if want_tests && built "$TRAIN_IMAGES"; then
  run_phase doctor 20 0 "$SESSION_LOG" "$TRAIN_IMAGES" --doctor
fi

# ---- measurements --------------------------------------------------------------------------
DATA=$ROOT/.deps/datasets/fashion-mnist
# Each phase below has a cap and a reserve: the least the phases after it need to give their
# first answer. Phases that finish early leave the later ones more.
# Ours: one JSON line a run (train_throughput), the algorithm cache shared by every process.
ours() {  # name cap reserve args...
  local name=$1 cap=$2 reserve=$3
  shift 3
  run_phase "ours $name" "$cap" "$reserve" "$RUNS_LOG" "$THROUGHPUT" --device cuda --algo-cache "$ALGO_CACHE" \
    --json-out "$OURS_JSON" "$@"
}
# PyTorch: one process per group, its own time budget inside the phase's.
peer() {  # name cap reserve args...
  local name=$1 cap=$2 reserve=$3
  shift 3
  local seconds
  seconds=$(allow "$cap" "$reserve")
  ((seconds >= 20)) || { log "pytorch $name: SKIPPED (${seconds}s left for it)"; return; }
  run_phase "pytorch $name" "$seconds" "$reserve" "$RUNS_LOG" env PYTHONUNBUFFERED=1 python3 benchmarks/peers/torch_gpu.py \
    --time-budget "$((seconds - 10))" --out "$TORCH_JSON" "$@"
}
throughput() {  # model input precision cap-of-ours cap-of-pytorch reserve
  local model=$1 input=$2 precision=$3 cap=$4 peer_cap=$5 reserve=$6
  ours "$model $precision" "$cap" "$reserve" --model "$model" --input "$input" --batch 256 --precision "$precision"
  ours "$model $precision graph" "$cap" "$reserve" --model "$model" --input "$input" --batch 256 \
    --precision "$precision" --cuda-graph
  peer "$model $precision eager" "$peer_cap" "$reserve" --models "$model" --precisions "$precision" --modes eager \
    --budget 0 --data-on-gpu
}

# Most informative first, so that a short lease still answers the main questions: tf32 speed
# against PyTorch eager, the main job, then fp32, the largest batch, torch.compile, small-bn's
# time to 93%, the allocation comparison. Each phase leaves the next one its reserve.
if want_bench && built "$THROUGHPUT"; then
  throughput resnet18 3x32x32 tf32 45 60 20
  throughput small 1x28x28 tf32 30 45 20
fi

# The main job on the GPU: accuracy and wall time (the CPU's: README).
if want_bench && built "$TRAIN_IMAGES" && [ -d "$DATA" ]; then
  run_phase "main job" 90 20 "$OUT/main_job.log" "$TRAIN_IMAGES" --device cuda --data "$DATA" --quiet \
    --algo-cache "$ALGO_CACHE" --metrics-out "$OUT/main_job.jsonl"
fi

if want_bench && built "$THROUGHPUT"; then
  throughput resnet18 3x32x32 fp32 45 60 20
  throughput small 1x28x28 fp32 30 45 20
  # The largest batch in the budget: ours from the plan (heuristic algorithms: measuring every
  # candidate's convolutions would not fit the time), confirmed by running it and refusing one
  # more; PyTorch's by running each size tried.
  ours "largest resnet18" 60 20 --model resnet18 --input 3x32x32 --largest-batch --memory-budget "$BUDGET" \
    --most 16384 --fast-start
  ours "largest small" 40 20 --model small --input 1x28x28 --largest-batch --memory-budget "$BUDGET" \
    --most 262144 --fast-start
  peer "largest batch" 120 20 --models resnet18,small --modes none --syncs none --budget "$BUDGET"
fi

if want_bench; then
  peer "compile" 200 0 --models resnet18,small --modes compile --precisions tf32,fp32 --budget 0 --data-on-gpu \
    --compile-reserve 60
fi

# small-bn until it first reaches 93% test accuracy (its epochs' times in the metrics file). At the
# default weight decay (0.01) three runs ended at 92.86% to 93.04%; 0.05 reached 93.24% (gpu_h100.md).
if want_bench && built "$TRAIN_IMAGES" && [ -d "$DATA" ]; then
  run_phase "small-bn to 93%" 120 0 "$OUT/main_job.log" "$TRAIN_IMAGES" --device cuda --data "$DATA" --quiet \
    --model small-bn --epochs 30 --augment --weight-decay 0.05 --test-each-epoch --algo-cache "$ALGO_CACHE" \
    --metrics-out "$OUT/small_bn.jsonl"
fi

if want_bench && built "$BUILD/benchmarks/alloc_compare"; then
  # 200 MiB: the 64 MiB of the CPU's comparison plus what cuDNN and cuBLAS hold on an H100 (their
  # handles, kernels and cuBLAS's workspace: 134 MiB).
  run_phase "alloc_compare cuda" 120 0 "$RUNS_LOG" "$BUILD/benchmarks/alloc_compare" --device cuda \
    --budget 200MiB --churn-steps 1000 --search-steps 100 --series-stride 10 --out /tmp/alloc_gpu
  [ -f /tmp/alloc_gpu/alloc_table.txt ] && cat /tmp/alloc_gpu/alloc_table.txt >>"$RUNS_LOG"
fi

# Mixed precision: the 16-bit tests first (unless the test files ran them), then ours against
# PyTorch's autocast, one tf32 run of each beside them for the ratio, then the accuracy of the
# 16-bit runs against fp32's, then the largest batch.
if want_mixed && ! want_tests && built "$BUILD/tests/cnn_cuda_tests"; then
  run_phase "cuda tests [bf16]" 150 240 "$OUT/cuda_tests.log" "$BUILD/tests/cnn_cuda_tests" "[bf16]" --durations yes
  grep -E "FAILED|failed|REQUIRE|CHECK|[Ee]rror" "$OUT/cuda_tests.log" | head -40 >>"$SESSION_LOG"
fi
if want_mixed_speed && built "$THROUGHPUT"; then
  for precision in tf32 bf16 fp16; do
    ours "resnet18 $precision" 40 150 --model resnet18 --input 3x32x32 --batch 256 --precision "$precision"
  done
  ours "resnet18 bf16 graph" 40 150 --model resnet18 --input 3x32x32 --batch 256 --precision bf16 --cuda-graph
  peer "resnet18 tf32,bf16,fp16 eager" 100 130 --models resnet18 --precisions tf32,bf16,fp16 --modes eager \
    --memory-formats contiguous,channels_last --syncs none --budget 0 --data-on-gpu
fi
if [ "$WHAT" = mixed-speed ] && built "$THROUGHPUT"; then
  for precision in tf32 bf16 fp16; do
    ours "small $precision" 30 90 --model small --input 1x28x28 --batch 256 --precision "$precision"
  done
  peer "small tf32,bf16,fp16 eager" 60 90 --models small --precisions tf32,bf16,fp16 --modes eager \
    --memory-formats contiguous,channels_last --syncs none --budget 0 --data-on-gpu
  run_phase "kernels resnet18 bf16" 90 60 "$OUT/kernels.txt" bash scripts/gpu_kernels.sh resnet18 3x32x32 bf16
fi
if want_mixed && built "$TRAIN_IMAGES" && [ -d "$DATA" ]; then
  run_phase "accuracy fp32 bf16 fp16" 150 60 "$RUNS_LOG" python3 benchmarks/compare_precision_accuracy.py \
    --device cuda --binary "$TRAIN_IMAGES" --data "$DATA" --precisions fp32,bf16,fp16 \
    --train-args "--algo-cache $ALGO_CACHE" --out "$OUT/precision_gpu_accuracy"
fi
if want_mixed_speed && built "$THROUGHPUT"; then
  for precision in fp32 bf16; do
    ours "largest resnet18 $precision" 30 30 --model resnet18 --input 3x32x32 --precision "$precision" \
      --largest-batch --memory-budget "$BUDGET" --most 16384 --fast-start
  done
fi
if want_mixed && built "$THROUGHPUT"; then
  peer "largest batch bf16" 60 0 --models resnet18 --modes none --syncs none --largest-precisions bf16 \
    --budget "$BUDGET"
fi

# Against the best PyTorch a user would run: channels_last, autocast, torch.compile.
if [ "$WHAT" = best-peer ] && built "$THROUGHPUT"; then
  for precision in bf16 tf32; do
    ours "resnet18 $precision" 20 90 --model resnet18 --input 3x32x32 --batch 256 --precision "$precision"
    ours "resnet18 $precision graph" 20 90 --model resnet18 --input 3x32x32 --batch 256 --precision "$precision" \
      --cuda-graph
  done
  peer "resnet18 bf16,tf32 eager" 50 60 --models resnet18 --precisions bf16,tf32 --modes eager \
    --memory-formats channels_last,contiguous --syncs none --budget 0 --data-on-gpu
  run_phase "kernels resnet18 bf16" 45 30 "$OUT/kernels.txt" bash scripts/gpu_kernels.sh resnet18 3x32x32 bf16
  peer "resnet18 bf16 compile" 80 0 --models resnet18 --precisions bf16 --modes compile \
    --memory-formats channels_last --budget 0 --data-on-gpu --compile-reserve 40
  ours "resnet50 bf16" 60 0 --model resnet50 --input 3x224x224 --batch 128 --precision bf16 --cuda-graph
  peer "resnet50 bf16 eager" 60 0 --models resnet50 --precisions bf16 --modes eager --batch 128 \
    --memory-formats channels_last --syncs none --budget 0 --data-on-gpu
  # Channels-last images (train_throughput --channels-last, off by default): both networks, and
  # resnet50's convolutions and BatchNorms timed in each order (conv_layouts).
  ours "resnet18 bf16 graph channels-last" 20 0 --model resnet18 --input 3x32x32 --batch 256 --precision bf16 \
    --cuda-graph --channels-last
  ours "resnet50 bf16 channels-last" 60 0 --model resnet50 --input 3x224x224 --batch 128 --precision bf16 \
    --cuda-graph --channels-last
  built "$BUILD/benchmarks/conv_layouts" &&
    run_phase "conv_layouts resnet50 bf16" 90 0 "$OUT/layouts.txt" "$BUILD/benchmarks/conv_layouts" --device cuda \
      --precision bf16 --model resnet50 --input 3x224x224 --batch 128 --repeat 10
  # Why the measured search chose each algorithm: its timings, shape by shape.
  [ -f "$ALGO_CACHE" ] && { echo "=== algorithm cache"; cat "$ALGO_CACHE"; } >>"$RUNS_LOG"
fi

if [ "$WHAT" = speed-bf16 ] && built "$THROUGHPUT"; then
  ours "resnet18 bf16" 20 90 --model resnet18 --input 3x32x32 --batch 256 --precision bf16
  ours "resnet18 bf16 graph" 20 90 --model resnet18 --input 3x32x32 --batch 256 --precision bf16 --cuda-graph
  run_phase "kernels resnet18 bf16" 45 40 "$OUT/kernels.txt" bash scripts/gpu_kernels.sh resnet18 3x32x32 bf16
  peer "resnet18 bf16 compile" 120 0 --models resnet18 --precisions bf16 --modes compile \
    --memory-formats channels_last --budget 0 --data-on-gpu --compile-reserve 40
fi

# At most 8 files come back: session.log, build.log, cuda_tests.log, runs.log, ours.jsonl,
# torch_gpu.jsonl, main_job.log, main_job.jsonl (small-bn's lines are appended to it); in mixed,
# precision_gpu_accuracy.jsonl and .md instead of the main job's two.
[ -f "$OUT/small_bn.jsonl" ] && { sed 's/^{/{"run":"small-bn",/' "$OUT/small_bn.jsonl" >>"$OUT/main_job.jsonl"; rm -f "$OUT/small_bn.jsonl"; }
log "done; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
[ -f "$OURS_JSON" ] && tail -n 20 "$OURS_JSON" | cut -c1-300
