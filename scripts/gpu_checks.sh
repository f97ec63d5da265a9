#!/usr/bin/env bash
# After `scripts/gpu_session.sh test` on the same machine (its build in build-gpu): the questions
# one run each left open, answered in a few minutes.
#   - --cuda-graph against eager, each twice, alternating (resnet18 and small, tf32 and fp32):
#     is the difference larger than a configuration's own spread?
#   - the largest batch in GPU_SESSION_BUDGET (2GiB) for resnet18, keeping and recomputing
#     (--recompute auto), and for small: the plan's figure, run, and one more refused.
#   - the driver's count of our process after the backend is made, after planning, after the
#     first step and at the end, beside what we reserve: where the libraries' own memory appears.
# GPU_CHECKS_QUICK=1: one round of the timings, no recomputing search (to check a fix).
# JSON lines to $OUT/checks.jsonl, the programs' output to $OUT/checks.log, a table last.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
BUILD=${GPU_SESSION_BUILD:-$PWD/build-gpu}
BUDGET=${GPU_SESSION_BUDGET:-2GiB}
THROUGHPUT=$BUILD/benchmarks/train_throughput
JSON=$OUT/checks.jsonl
LOG=$OUT/checks.log
[ -x "$THROUGHPUT" ] || { echo "gpu_checks: no $THROUGHPUT: run scripts/gpu_session.sh test first" >&2; exit 1; }
ours() {  # seconds args...
  local seconds=$1
  shift
  echo "=== $*" >>"$LOG"
  timeout --kill-after=5 "$seconds" "$THROUGHPUT" --device cuda --algo-cache "$BUILD/algo-cache.txt" \
    --json-out "$JSON" "$@" >>"$LOG" 2>&1 || echo "exit $? (${seconds}s cap): $*" | tee -a "$LOG"
}

QUICK=${GPU_CHECKS_QUICK:-0}
for round in $( ((QUICK)) && echo 1 || echo 1 2); do
  for model in "resnet18 3x32x32" "small 1x28x28"; do
    set -- $model
    for precision in tf32 fp32; do
      ours 60 --model "$1" --input "$2" --batch 256 --precision "$precision"
      ours 60 --model "$1" --input "$2" --batch 256 --precision "$precision" --cuda-graph
    done
  done
done
ours 150 --model resnet18 --input 3x32x32 --largest-batch --memory-budget "$BUDGET" --most 16384 --fast-start
((QUICK)) || ours 150 --model resnet18 --input 3x32x32 --largest-batch --memory-budget "$BUDGET" --most 16384 \
  --fast-start --recompute auto
ours 60 --model small --input 1x28x28 --largest-batch --memory-budget "$BUDGET" --most 262144 --fast-start

python3 - "$JSON" <<'EOF'
import json, sys
MiB = 1 << 20
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "throughput":
        print(f'{r["model"]:9} {r["precision"]} {r["mode"]:5} {r["images_per_second"]:10.0f} img/s '
              f'reserved {r["reserved_bytes"] / MiB:7.1f} MiB (libraries {r["library_reserved_bytes"] / MiB:5.1f}), driver beyond context: backend '
              f'{(r.get("driver_bytes_after_backend", 0) - r.get("driver_bare_context_bytes", 0)) / MiB:6.1f}, plan '
              f'{(r.get("driver_bytes_after_plan", 0) - r.get("driver_bare_context_bytes", 0)) / MiB:7.1f}, '
              f'step 1 {(r.get("driver_bytes_after_first_step", 0) - r.get("driver_bare_context_bytes", 0)) / MiB:7.1f}, '
              f'end {r.get("driver_bytes_beyond_context", 0) / MiB:7.1f} MiB')
    elif r.get("kind") == "largest_batch":
        print(f'largest {r["model"]} recompute={r.get("recompute")}: {r.get("largest_batch")} '
              f'{ {k: v for k, v in r.items() if k in ("trained_steps", "one_more_refused", "driver_bytes_beyond_context", "planned_bytes", "reserved_bytes")} }')
    else:
        print(r)
EOF
