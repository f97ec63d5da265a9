#!/usr/bin/env bash
# The main job: install, build, and train the default network on Fashion-MNIST on the best
# device present. Extra arguments go to train_images.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh -DCNN_BUILD_TESTS=OFF -DCNN_BUILD_BENCHMARKS=OFF
./build/examples/train_images/train_images --data /usr/share/datasets/fashion-mnist --model small --device auto "$@"
