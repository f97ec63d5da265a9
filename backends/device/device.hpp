#pragma once
// Picks the backend for --device auto|cpu|cuda and says why. Never falls back silently: asking
// for cuda where there is none is an error that says what is missing.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <cnnengine/engine/core/backend_types.hpp>
#include <cnnengine/engine/core/communicator.hpp>

namespace cnn {

struct DeviceRequest {
  std::optional<DeviceKind> device;  // none: auto, the GPU where one is usable
  int threads = 0;                   // CPU threads (0: all cores)
  // How convolutions and dense layers multiply (Precision): tf32 is CUDA's (fp32 on the CPU), bf16
  // and fp16 both backends'.
  Precision precision = Precision::fp32;
  bool fast_start = false;           // CUDA: heuristics instead of measuring convolution algorithms
  bool deterministic = false;        // CUDA: deterministic convolution algorithms only (the CPU always is)
  std::string algorithm_cache;       // CUDA: keep measured algorithms in this file; empty: none
  int cuda_device = 0;               // CUDA: which GPU (a data-parallel rank takes its local rank's)
  bool channels_last = false;        // CUDA in bf16 and fp16: images channels last (CudaOptions::channels_last)
};

// "auto" (none), "cpu" or "cuda"; anything else is a ConfigError naming them.
std::optional<DeviceKind> parse_device(std::string_view word);

struct DeviceChoice {
  // Made where Backend is whole (device.cpp), so that a program that passes *backend on needs
  // only its name (engine/core/backend_types.hpp), not the kernel contract.
  DeviceChoice();
  DeviceChoice(DeviceChoice&&) noexcept;
  DeviceChoice& operator=(DeviceChoice&&) noexcept;
  ~DeviceChoice();

  std::unique_ptr<Backend> backend;
  std::string reason;  // e.g. "auto: no CUDA device (this build has no CUDA backend); using the CPU"
};

DeviceChoice select_device(const DeviceRequest& request);
// Where a program keeps the measured convolution algorithms unless told otherwise
// (DeviceRequest::algorithm_cache): $XDG_CACHE_HOME/cnnengine/cudnn-algorithms.txt, else under
// ~/.cache; empty where neither is known.
std::string default_algorithm_cache();
bool built_with_cuda();

// The communicator whose sums reach `backend`'s memory, for a data-parallel run over the ranks
// `host` joins: null where `host` reaches it already (the CPU); NCCL for a CUDA backend (its
// unique id sent through `host`, which must outlive it). A ConfigError where this build has no
// NCCL.
std::unique_ptr<Communicator> make_device_communicator(Backend& backend, Communicator& host);
// Driver, runtime, cuDNN and cuBLAS versions, GPU and memory; problems marked "ERROR:".
std::string environment_report();

}  // namespace cnn
