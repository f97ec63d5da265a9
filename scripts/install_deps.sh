#!/usr/bin/env bash
# Installs what cnnengine needs from Debian's packages (as root). Skips the update and the
# install when everything is already there.
set -euo pipefail
packages=(build-essential cmake ninja-build libeigen3-dev libstb-dev catch2 dataset-fashion-mnist
          libcli11-dev nlohmann-json3-dev zlib1g-dev gnuplot-nox libturbojpeg0-dev)
# ONNX export (optional in the build), and the venv its onnxruntime test makes; Python's headers
# for the Python package (python/, pip install .).
packages+=(libonnx-dev libprotobuf-dev python3-venv python3-dev)
# Data-parallel training (optional in the build): mpirun and the MPI library.
packages+=(openmpi-bin libopenmpi-dev)
# The tests also run the fuzzers (clang's libFuzzer); the benchmarks build conv_peak --onednn
# where oneDNN is installed (optional in the build).
if [ "${CNN_WITH_TEST_TOOLS:-0}" = 1 ]; then packages+=(clang libclang-rt-14-dev libdnnl-dev); fi
if [ "${CNN_WITH_PEERS:-0}" = 1 ]; then packages+=(python3-torch); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
