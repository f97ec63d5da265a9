#!/usr/bin/env bash
# Copies the header-only dependencies from this (Debian) machine into .deps/ (git-ignored), with
# CMake package files that find_package() accepts under -DCMAKE_PREFIX_PATH=.deps, so that a
# machine without Debian's packages (the GPU machine) can build: Eigen 3.4, stb, Catch2 v2,
# CLI11, nlohmann json, zlib's headers. Also copies Fashion-MNIST when it is installed, for the benchmarks.
# Run here, then carry .deps to the GPU machine and run scripts/gpu_session.sh there.
#
#   scripts/fetch_gpu_deps.sh [DESTINATION]   (default: .deps; scripts/simulate_gpu_image.sh uses a scratch one)
set -euo pipefail
cd "$(dirname "$0")/.."
deps=${1:-.deps}
rm -rf "$deps"
mkdir -p "$deps/include" "$deps/lib/cmake"

need() { [ -e "$1" ] || { echo "fetch_gpu_deps: $1 is missing: install $2 (apt-get install $2)" >&2; exit 1; }; }
need /usr/include/eigen3/Eigen libeigen3-dev
need /usr/include/stb/stb_image.h libstb-dev
need /usr/include/catch2/catch.hpp catch2
need /usr/include/CLI/CLI.hpp libcli11-dev
need /usr/include/nlohmann/json.hpp nlohmann-json3-dev
need /usr/include/zlib.h zlib1g-dev

cp -r /usr/include/eigen3 /usr/include/stb /usr/include/catch2 /usr/include/CLI /usr/include/nlohmann "$deps/include/"
# zlib's headers: the GPU machine has libz.so.1 but no development files.
cp /usr/include/zlib.h /usr/include/zconf.h "$deps/include/"
# The commit the results belong to (the copy on the GPU machine may have no .git).
git rev-parse HEAD > "$deps/commit" 2>/dev/null || echo unknown > "$deps/commit"

# Version files are location-independent: take Debian's. The config files are ours: Debian's
# hard-code /usr.
mkdir -p "$deps/lib/cmake/Eigen3" "$deps/lib/cmake/Catch2" "$deps/lib/cmake/CLI11" "$deps/lib/cmake/nlohmann_json"
cp /usr/share/eigen3/cmake/Eigen3ConfigVersion.cmake "$deps/lib/cmake/Eigen3/"
cp /usr/lib/cmake/Catch2/Catch2ConfigVersion.cmake /usr/lib/cmake/Catch2/Catch.cmake \
   /usr/lib/cmake/Catch2/CatchAddTests.cmake /usr/lib/cmake/Catch2/ParseAndAddCatchTests.cmake "$deps/lib/cmake/Catch2/"
cp /usr/share/cmake/CLI11/CLI11ConfigVersion.cmake "$deps/lib/cmake/CLI11/"
cp /usr/share/cmake/nlohmann_json/nlohmann_jsonConfigVersion.cmake "$deps/lib/cmake/nlohmann_json/"

# One header-only INTERFACE target, its include folder relative to this file's place.
write_config() {  # file target include-subdir [extra cmake]
  cat > "$1" <<CMAKE
# Written by scripts/fetch_gpu_deps.sh: headers copied from Debian into .deps/include.
get_filename_component(_deps_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET $2)
  add_library($2 INTERFACE IMPORTED)
  set_target_properties($2 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "\${_deps_prefix}/include$3")
endif()
${4:-}
CMAKE
}
write_config "$deps/lib/cmake/Eigen3/Eigen3Config.cmake" Eigen3::Eigen /eigen3 \
  'set(EIGEN3_FOUND TRUE)
set(EIGEN3_INCLUDE_DIR "${_deps_prefix}/include/eigen3")
set(EIGEN3_INCLUDE_DIRS "${EIGEN3_INCLUDE_DIR}")'
write_config "$deps/lib/cmake/Catch2/Catch2Config.cmake" Catch2::Catch2 "" \
  'list(APPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")  # include(Catch)'
write_config "$deps/lib/cmake/CLI11/CLI11Config.cmake" CLI11::CLI11 ""
write_config "$deps/lib/cmake/nlohmann_json/nlohmann_jsonConfig.cmake" nlohmann_json::nlohmann_json ""

if [ -d /usr/share/datasets/fashion-mnist ]; then
  mkdir -p "$deps/datasets"
  cp -r /usr/share/datasets/fashion-mnist "$deps/datasets/"
fi
du -sh "$deps"
