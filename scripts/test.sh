#!/usr/bin/env bash
# Install, build and run every test (GPU tests skip with a message where there is no GPU); then
# the CPU tests again under AddressSanitizer and UndefinedBehaviorSanitizer, and the fuzzers for
# CNN_FUZZ_SECONDS each (default 20, which keeps a CI run on 2 cores under 35 minutes; 0 leaves
# them out).
set -euo pipefail
cd "$(dirname "$0")/.."
CNN_WITH_TEST_TOOLS=1 bash scripts/install_deps.sh
# The Python package is built and tested with a virtual environment's Python that has nanobind,
# numpy and pytest (made once in build/; where it cannot be made, no network, the package is
# left out and says so).
python_flags=()
if python=$(bash scripts/python_venv.sh "$PWD/build/python-venv" "import nanobind, numpy, pytest" nanobind numpy pytest); then
  python_flags=("-DPython_EXECUTABLE=$python")
else
  echo "== no virtual environment for the Python package: it is not built nor tested"
fi
# In CI, device code is built for sm_90 (H100/H200) only, to keep the build short.
# Tests and benchmarks ON explicitly: the main job turns them off in the same build folder.
bash scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=90 -DCNN_BUILD_TESTS=ON -DCNN_BUILD_BENCHMARKS=ON "${python_flags[@]}"
(cd build && ctest --output-on-failure --no-tests=error -j"$(nproc)" --timeout 900)

# The same tests under the sanitizers: every Catch2 case but those tagged [slow_under_sanitizers]
# (each says why where it is tagged), the trainer and train_images (CUDA, the installed package,
# the layering probes, the GPU image's simulated configure, the benchmarks and the
# resident-memory bound, which a sanitizer's shadow memory breaks, left out; MPI too: the
# data-parallel trainer runs on threads in cnn_tests, and mpirun's ranks under the sanitizers
# take minutes each and report Open MPI's own allocations; the tests labelled long, minutes
# each there; and those labelled timing, wall-clock guards the sanitizers' slowdown voids). An
# error stops the program that made it.
echo "== the tests under AddressSanitizer and UndefinedBehaviorSanitizer"
sanitized_start=$SECONDS
# Line tables only (-g1: the reports keep file and line) and the programs at -O0, the library at
# -O2 (CMakeLists.txt, Note [Programs compiled apart from the library]). On 2 cores the programs'
# objects took 494 s of CPU at -O0, 769 s at -O1, and their tests ran 59 s longer: a minute and a
# half less in all.
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCNN_CUDA=OFF -DCNN_MPI=OFF \
  -DCNN_SANITIZE=address,undefined -DCNN_BUILD_BENCHMARKS=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  -DCNN_PROGRAM_FLAGS=-O0 >/dev/null
cmake --build build-sanitize -j"$(nproc)"
# Every case of the plain build's cnn_tests, but the excluded, must be a test there: a discovery
# that crashed or found fewer cases fails here.
cmake -DPROGRAM=build/tests/cnn_tests "-DSPEC=~[slow_under_sanitizers]" -DCTEST_DIR=build-sanitize \
  -P tests/check_test_listing.cmake
# A request too large for any machine must come back as nullptr from the nothrow allocation
# functions, as it does without ASan (the memory resources turn it into an OutOfMemory).
(cd build-sanitize && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1 \
  UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure --no-tests=error -j"$(nproc)" --timeout 900 -LE "cuda|install|layering|resident|mpi|long|timing|gpu_image")
echo "== the sanitizers' stage took $((SECONDS - sanitized_start)) s"

seconds=${CNN_FUZZ_SECONDS:-20}
if ((seconds > 0)); then
  echo "== the fuzzers, ${seconds}s each"
  bash scripts/fuzz.sh "$seconds"
fi
