#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/) with clang, AddressSanitizer and UBSan in their own build
# folder, and runs each for SECONDS (default 60) on its seeds (fuzz/make_seeds.cpp), the inputs
# that once failed (fuzz/regressions/<harness>/) and what earlier runs found. Exits non-zero when
# a fuzzer finds a crash, a hang (-timeout), a leak or memory over -rss_limit_mb; the input is
# left in the build folder's artifacts/<harness>/: add it to fuzz/regressions/<harness>/.
#
#   scripts/fuzz.sh [SECONDS]
# Environment: CNN_FUZZ_BUILD (the build folder), CNN_FUZZ_JOBS (build jobs, and fuzzers run at
# once; default 2, so four fuzzers take twice SECONDS).
set -euo pipefail

seconds=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${CNN_FUZZ_BUILD:-$root/build-fuzz}
jobs=${CNN_FUZZ_JOBS:-2}
harnesses=(idx image network_text checkpoint onnx)
# A checkpoint's seed of a whole run (make_seeds.cpp) is 2.6 KB: shorter, every input would be truncated.
# The ONNX seeds (fuzz/regressions/onnx/) are up to 25 KB: a small residual network whole.
declare -A max_len=([idx]=4096 [image]=8192 [network_text]=2048 [checkpoint]=4096 [onnx]=32768)

# The whole library with coverage for libFuzzer and the sanitizers; stb_image's known arithmetic
# on corrupt JPEGs is left to AddressSanitizer (fuzz/ubsan_ignore.txt).
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCNN_FUZZ=ON -DCNN_CUDA=OFF -DCNN_NATIVE=OFF -DCNN_SANITIZE=address,undefined \
  "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link -fsanitize-ignorelist=$root/fuzz/ubsan_ignore.txt" \
  -DCNN_BUILD_TESTS=OFF -DCNN_BUILD_EXAMPLES=OFF -DCNN_BUILD_BENCHMARKS=OFF >/dev/null
ninja -C "$build" -j "$jobs" fuzz_make_seeds "${harnesses[@]/#/fuzz_}"
"$build/fuzz/fuzz_make_seeds" "$build/seeds"

# One fuzzer a core: CNN_FUZZ_JOBS at a time.
run_fuzzer() {
  local harness=$1
  mkdir -p "$build/corpus/$harness" "$build/artifacts/$harness" "$root/fuzz/regressions/$harness"
  "$build/fuzz/fuzz_$harness" -max_total_time="$seconds" -rss_limit_mb=512 -malloc_limit_mb=512 -timeout=10 \
    -max_len="${max_len[$harness]}" -print_final_stats=1 -artifact_prefix="$build/artifacts/$harness/" \
    "$build/corpus/$harness" "$build/seeds/$harness" "$root/fuzz/regressions/$harness" \
    >"$build/fuzz_$harness.log" 2>&1
}

declare -A harness_of=()
failed=()
running=0
# Waits for the next fuzzer to end and notes whether it found something.
reap_one() {
  local pid rc=0
  wait -n -p pid || rc=$?
  running=$((running - 1))
  if ((rc != 0)); then
    failed+=("${harness_of[$pid]}")
    echo "== fuzz_${harness_of[$pid]} found something:"
    tail -n 40 "$build/fuzz_${harness_of[$pid]}.log"
  fi
}

for harness in "${harnesses[@]}"; do
  while ((running >= jobs)); do reap_one; done
  echo "== fuzz_$harness: ${seconds}s (log: $build/fuzz_$harness.log)"
  run_fuzzer "$harness" &
  harness_of[$!]=$harness
  running=$((running + 1))
done
while ((running > 0)); do reap_one; done

if ((${#failed[@]})); then
  echo "fuzzers that found something: ${failed[*]} (inputs in $build/artifacts/)" >&2
  exit 1
fi
echo "all fuzzers ran ${seconds}s each without finding anything"
