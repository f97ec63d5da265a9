#!/usr/bin/env bash
# Configures a CUDA build on a machine without Debian's packages (the GPU machine, or
# scripts/simulate_gpu_image.sh's copy of it): the header-only dependencies from .deps/
# (scripts/fetch_gpu_deps.sh), zlib's runtime library where it has no development symlink, and
# cuDNN, cuBLAS and NCCL wherever CMake finds them (the toolkit, or python3's NVIDIA wheels:
# cmake/CnnCudaLibraries.cmake). Says what it found; exits non-zero with the reason otherwise.
#
#   scripts/gpu_configure.sh BUILD_DIR [extra CMake arguments]
# CNN_DEPS_DIR: the .deps folder (default: the repository's).
set -uo pipefail
if (($# < 1)); then
  echo "usage: $0 BUILD_DIR [cmake arguments]" >&2
  exit 2
fi
BUILD=$1
shift
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
DEPS=${CNN_DEPS_DIR:-$ROOT/.deps}

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
if ! command -v nvcc >/dev/null 2>&1; then
  echo "gpu_configure: no nvcc on the PATH nor in /usr/local/cuda/bin" >&2
  exit 1
fi
echo "nvcc: $(command -v nvcc) ($(nvcc --version | tail -1))"
echo "python3 (for the NVIDIA wheels): $(command -v python3 || echo none)"
if [ ! -d "$DEPS/lib/cmake" ]; then
  echo "gpu_configure: $DEPS is missing or incomplete: run scripts/fetch_gpu_deps.sh on the Debian machine and carry it" >&2
  exit 1
fi

# zlib (gzipped IDX files): the system's headers, else those carried in .deps/include; the
# library, else the runtime libz.so.1 (no development symlink on a bare machine).
zlib_header=$(ls /usr/include/zlib.h /usr/local/include/zlib.h "$DEPS/include/zlib.h" 2>/dev/null | head -1)
zlib_lib=$(ls /usr/lib/x86_64-linux-gnu/libz.so /usr/lib64/libz.so /usr/lib/libz.so /usr/local/lib/libz.so 2>/dev/null | head -1)
[ -n "$zlib_lib" ] || zlib_lib=$(ldconfig -p 2>/dev/null | awk '/libz\.so\.1 .*x86-64/ {print $NF; exit}')
[ -n "$zlib_lib" ] || zlib_lib=$(ls /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libz.so.1 2>/dev/null | head -1)
if [ -z "$zlib_header" ] || [ -z "$zlib_lib" ]; then
  echo "gpu_configure: zlib missing (zlib.h: ${zlib_header:-none}, libz: ${zlib_lib:-none}); run scripts/fetch_gpu_deps.sh" >&2
  exit 1
fi
echo "zlib: $zlib_header, $zlib_lib"

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCNN_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_STANDARD=17 "-DCMAKE_PREFIX_PATH=$DEPS" \
  -DCNN_BUILD_BENCHMARKS=ON "-DCNN_FASHION_MNIST_DIR=$DEPS/datasets/fashion-mnist" \
  "-DZLIB_INCLUDE_DIR=$(dirname "$zlib_header")" "-DZLIB_LIBRARY=$zlib_lib" "$@" || exit 1
# What the build will link: the libraries the CUDA backend needs, and NCCL (optional).
grep -E '^(CUDNN|CUBLAS|NCCL)_LIBRARY:' "$BUILD/CMakeCache.txt" | sed 's/:FILEPATH=/: /'
