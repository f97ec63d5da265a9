#!/usr/bin/env bash
# Install, build and run every test (GPU tests skip with a message where there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
# In CI, device code is built for sm_90 (H100/H200) only, to keep the build short.
# Tests and benchmarks ON explicitly: the main job turns them off in the same build folder.
bash scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=90 -DCNN_BUILD_TESTS=ON -DCNN_BUILD_BENCHMARKS=ON
cd build
ctest --output-on-failure --no-tests=error -j"$(nproc)" --timeout 900
