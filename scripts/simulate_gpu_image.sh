#!/usr/bin/env bash
# Builds the project the way scripts/gpu_session.sh does on the GPU machine, here: a machine that
# has nvcc, CMake, ninja, g++ and PyTorch's NVIDIA Python wheels, and no Debian development
# package. In a private mount namespace (as root):
#   - every header, CMake package and development library under /usr that the C/C++ toolchain
#     does not own is hidden (Eigen, stb, Catch2, CLI11, nlohmann-json, zlib, MPI, ONNX...), and
#     MPI's compiler wrappers;
#   - the CUDA toolkit's cuDNN, cuBLAS and NCCL are hidden;
#   - the NVIDIA wheels are laid out as pip lays them out (nvidia/cudnn, nvidia/cu13, nvidia/nccl:
#     versioned libraries only), from the toolkit's own dist-info records (this machine's toolkit
#     was made from the same wheels), on python3's path;
# then scripts/fetch_gpu_deps.sh's .deps (made before the hiding) and scripts/gpu_configure.sh
# configure the build. The configure must find cuDNN, cuBLAS and NCCL in the wheels.
#
#   scripts/simulate_gpu_image.sh configure    the configure alone (seconds; a CI test runs it)
#   scripts/simulate_gpu_image.sh build        configure, build everything gpu_session.sh runs, and
#                                              check that every program and library resolves its
#                                              libraries (ldd) and the CUDA plugin loads (dlopen)
# Run `build` before a change that touches the CUDA build, the GPU scripts or their libraries
# lands (about 6 minutes on 2 cores). Exit 77: this machine cannot simulate (not root, no mount
# namespaces, or no toolkit made from the wheels); anything else non-zero: the simulation failed.
# CNN_SIMULATION_KEEP=DIR keeps the build folder there.
set -uo pipefail
WHAT=${1:-configure}
case "$WHAT" in configure|build) ;; *) echo "usage: $0 [configure|build]" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
skip() { echo "simulate_gpu_image: skipped: $*"; exit 77; }
fail() { echo "simulate_gpu_image: FAILED: $*" >&2; exit 1; }

if [ "${CNN_SIMULATION_INSIDE:-0}" != 1 ]; then
  [ "$(id -u)" = 0 ] || skip "needs root (a mount namespace and overlay mounts)"
  unshare -m true 2>/dev/null || skip "this machine refuses a private mount namespace (unshare -m)"
  nvcc_path=$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
  [ -x "$nvcc_path" ] || skip "no CUDA toolkit (nvcc)"
  toolkit=$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")
  ls "$toolkit"/dist-info/nvidia_cudnn_*.dist-info/RECORD >/dev/null 2>&1 ||
    skip "the toolkit at $toolkit was not made from NVIDIA's wheels (no dist-info records to lay them out from)"
  # On the toolkit's file system, so that the wheels' files can be hard links to the toolkit's.
  sim=$(mktemp -d "$(dirname "$toolkit")/.cnn-gpu-image.XXXXXX" 2>/dev/null || mktemp -d /var/tmp/cnn-gpu-image.XXXXXX)
  CNN_SIMULATION_INSIDE=1 CNN_SIMULATION_TOOLKIT=$toolkit CNN_SIMULATION_DIR=$sim \
    unshare -m --propagation private bash "$0" "$WHAT"
  rc=$?
  rm -rf "$sim"  # its mounts went with the namespace
  exit $rc
fi

# ---- inside the namespace ----------------------------------------------------------------------
TOOLKIT=$CNN_SIMULATION_TOOLKIT
SIM=$CNN_SIMULATION_DIR
SITE=$SIM/site-packages
BUILD=${CNN_SIMULATION_KEEP:-$SIM/build}
echo "== simulating the GPU image in $SIM (toolkit $TOOLKIT)"

# The header-only dependencies, copied while Debian's headers are still visible.
bash scripts/fetch_gpu_deps.sh "$SIM/deps" >/dev/null || fail "scripts/fetch_gpu_deps.sh"

# The toolkit as it is, for the wheels' files to point to once it is hidden (a hard link where
# the file system allows, else a symbolic link into this private view).
mkdir -p "$SIM/toolkit-original" && mount --bind "$TOOLKIT" "$SIM/toolkit-original" || fail "cannot bind $TOOLKIT"
# The wheels PyTorch's environment holds on the GPU machine, laid out from their records.
wheels=(nvidia_cublas nvidia_cuda_runtime nvidia_cudnn_cu13 nvidia_nccl_cu13 nvidia_cuda_nvrtc nvidia_cuda_cupti
        nvidia_nvjitlink nvidia_nvtx nvidia_cufft nvidia_curand nvidia_cusolver nvidia_cusparse)
for wheel in "${wheels[@]}"; do
  for record in "$TOOLKIT"/dist-info/"$wheel"-*.dist-info/RECORD; do
    [ -e "$record" ] || continue
    while IFS=, read -r path _; do
      case "$path" in nvidia/*/*) ;; *) continue ;; esac
      file=${path#nvidia/*/}
      mkdir -p "$SITE/$(dirname "$path")"
      ln "$TOOLKIT/$file" "$SITE/$path" 2>/dev/null || ln -s "$SIM/toolkit-original/$file" "$SITE/$path" ||
        fail "laying out $path"
    done <"$record"
  done
done
[ -e "$SITE/nvidia/cudnn/lib/libcudnn.so.9" ] && [ -e "$SITE/nvidia/nccl/lib/libnccl.so.2" ] &&
  [ -e "$SITE/nvidia/cu13/lib/libcublas.so.13" ] || fail "the wheels' layout lacks cuDNN, NCCL or cuBLAS"

# Hides `paths` (under the mount point `dir`) behind an overlay whose upper layer is in memory.
layer=0
hide_under() {  # dir path...
  local dir=$1
  shift
  (($#)) || return 0
  layer=$((layer + 1))
  mkdir -p "$SIM/overlay/$layer"
  mount -t tmpfs tmpfs "$SIM/overlay/$layer" && mkdir -p "$SIM/overlay/$layer/upper" "$SIM/overlay/$layer/work" &&
    mount -t overlay overlay -o "lowerdir=$dir,upperdir=$SIM/overlay/$layer/upper,workdir=$SIM/overlay/$layer/work" "$dir" ||
    fail "cannot mount an overlay on $dir"
  rm -rf "$@" || fail "cannot hide files under $dir"
}

# The toolkit's cuDNN, cuBLAS and NCCL: every file their wheels' records name, and the
# development symlinks beside them.
toolkit_hidden=()
for wheel in nvidia_cublas nvidia_cudnn_cu13 nvidia_nccl_cu13; do
  for record in "$TOOLKIT"/dist-info/"$wheel"-*.dist-info/RECORD; do
    while IFS=, read -r path _; do
      case "$path" in nvidia/*/*) toolkit_hidden+=("$TOOLKIT/${path#nvidia/*/}") ;; esac
    done <"$record"
  done
done
toolkit_hidden+=("$TOOLKIT"/lib/libcudnn*.so "$TOOLKIT"/lib/libcublas*.so "$TOOLKIT"/lib/libnccl*.so
                 "$TOOLKIT"/lib/libnvblas*.so "$TOOLKIT"/include/nccl_device)
hide_under "$TOOLKIT" "${toolkit_hidden[@]}"

# Debian's development files: whatever the toolchain's packages do not own.
toolchain=(libc6-dev linux-libc-dev libcrypt-dev libnsl-dev libtirpc-dev rpcsvc-proto libstdc++-12-dev
           libgcc-12-dev gcc-12 g++-12 cpp-12 libc-dev-bin cmake cmake-data ninja-build)
mapfile -t debian_hidden < <(python3 - "${toolchain[@]}" <<'PY'
import glob, os, sys
def listed(package_glob):
    for listing in glob.glob(f"/var/lib/dpkg/info/{package_glob}.list"):
        package = os.path.basename(listing)[:-len(".list")].split(":")[0]
        for line in open(listing):
            yield package, line.rstrip("\n")

owned = {path for package in sys.argv[1:] for pattern in (package, package + ":*") for _, path in listed(pattern)}
kept_dirs = set()
for path in owned:
    while path not in ("", "/"):
        path = os.path.dirname(path)
        kept_dirs.add(path)
# In the shared library folder only development packages' files go: the runtime libraries stay.
libdir = "/usr/lib/x86_64-linux-gnu"
development = {path for package, path in listed("*") if package.endswith("-dev") and
               os.path.dirname(path) == libdir}

def hidden(path):
    """The smallest set of entries under `path` that no toolchain package owns."""
    for name in sorted(os.listdir(path)):
        entry = os.path.join(path, name)
        is_dir = os.path.isdir(entry) and not os.path.islink(entry)
        if entry in owned and not is_dir:
            continue
        if path == libdir and entry not in development:
            continue
        if is_dir and entry in kept_dirs:
            yield from hidden(entry)
        else:
            yield entry

for root in ("/usr/include", "/usr/lib/cmake", "/usr/share/cmake", "/usr/share/eigen3", libdir):
    if os.path.isdir(root):
        print(root)
        for entry in hidden(root):
            print(entry)
PY
)
((${#debian_hidden[@]})) || fail "could not list Debian's development files"
current=""
batch=()
for entry in "${debian_hidden[@]}" /end; do
  case "$entry" in
    /usr/include|/usr/lib/cmake|/usr/share/cmake|/usr/share/eigen3|/usr/lib/x86_64-linux-gnu|/end)
      [ -n "$current" ] && hide_under "$current" "${batch[@]}"
      current=$entry
      batch=() ;;
    *) batch+=("$entry") ;;
  esac
done
mpi_wrappers=()
for tool in mpicc mpicxx mpic++ mpiCC mpirun mpiexec orterun protoc; do
  [ -e "/usr/bin/$tool" ] && mpi_wrappers+=("/usr/bin/$tool")
done
hide_under /usr/bin "${mpi_wrappers[@]}"

# What the GPU image has and has not, checked before configuring.
for gone in /usr/include/eigen3 /usr/include/zlib.h /usr/include/catch2 "$TOOLKIT/include/cudnn.h" \
            "$TOOLKIT/include/cublas_v2.h" "$TOOLKIT/include/nccl.h" "$TOOLKIT/lib/libcudnn.so.9"; do
  [ ! -e "$gone" ] || fail "$gone is still visible"
done
export PATH=$TOOLKIT/bin:$PATH PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
unset LD_LIBRARY_PATH CUDNN_ROOT CUBLAS_ROOT NCCL_ROOT CPATH LIBRARY_PATH
echo "== hidden: ${#debian_hidden[@]} Debian entries, ${#toolkit_hidden[@]} toolkit files; wheels in $SITE"

CNN_DEPS_DIR=$SIM/deps bash scripts/gpu_configure.sh "$BUILD" >"$SIM/configure.log" 2>&1 || {
  tail -40 "$SIM/configure.log"
  fail "the configure failed (above)"
}
grep -E '^(nvcc|zlib|CUDNN|CUBLAS|NCCL)|cnnengine:' "$SIM/configure.log"
for library in CUDNN CUBLAS NCCL; do
  found=$(sed -n "s/^${library}_LIBRARY:FILEPATH=//p" "$BUILD/CMakeCache.txt")
  case "$found" in "$SITE"/nvidia/*) ;; *) fail "$library was not found in the wheels (found: ${found:-nothing})" ;; esac
done
grep -q "cnnengine: CUDA backend ON" "$SIM/configure.log" || fail "the CUDA backend is off"
echo "== configure: cuDNN, cuBLAS and NCCL found in the wheels"
[ "$WHAT" = build ] || exit 0

cmake --build "$BUILD" -j"$(nproc)" >"$SIM/build.log" 2>&1 || {
  grep -E '^FAILED: |error:' "$SIM/build.log" | head -20
  tail -5 "$SIM/build.log"
  fail "the build failed (above)"
}
echo "== build: done"
unresolved=0
while IFS= read -r -d '' file; do
  head -c 4 "$file" | grep -q ELF || continue
  if ldd "$file" 2>&1 | grep -q "not found"; then
    echo "unresolved in $file:" && ldd "$file" | grep "not found"
    unresolved=1
  fi
done < <(find "$BUILD" -type f \( -perm -u+x -o -name '*.so*' \) -not -path '*/CMakeFiles/*' -print0)
((unresolved == 0)) || fail "libraries left unresolved (above)"
for program in tests/cnn_cuda_tests tests/cnn_tests examples/train_images/train_images benchmarks/alloc_compare; do
  [ -x "$BUILD/$program" ] || fail "$program was not built"
done
plugin=$(ls "$BUILD"/libcnnengine_cuda.so.0 2>/dev/null) || fail "the CUDA plugin was not built"
python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)' "$plugin" ||
  fail "the CUDA plugin does not load"
ldd "$plugin" | grep -E "cudnn|cublas|nccl"
echo "== build: every program and library resolves; the CUDA plugin loads"
