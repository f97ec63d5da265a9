#pragma once
// Picks the backend for --device auto|cpu|cuda and says why. Never falls back silently: asking
// for cuda where there is none is an error that says what is missing.
#include <memory>
#include <string>

#include "cnnengine/engine/backend.hpp"

namespace cnn {

struct DeviceRequest {
  std::string device = "auto";  // auto, cpu or cuda
  int threads = 0;              // CPU threads (0: all cores)
  bool tf32 = false;            // CUDA: let cuDNN and cuBLAS use tensor cores
  bool fast_start = false;      // CUDA: heuristics instead of measuring convolution algorithms
};

struct DeviceChoice {
  std::unique_ptr<Backend> backend;
  std::string reason;  // e.g. "auto: no CUDA device (this build has no CUDA backend); using the CPU"
};

DeviceChoice select_device(const DeviceRequest& request);
bool built_with_cuda();
// Driver, runtime, cuDNN and cuBLAS versions, GPU and memory; problems marked "ERROR:".
std::string environment_report();

}  // namespace cnn
