#pragma once
// The CUDA backend: cuDNN for convolution and batch normalisation, cuBLAS for dense layers, own
// kernels for the rest. No CUDA header here: code built without nvcc may include this. The
// functions are in libcnnengine_cuda (backends/device/cuda_plugin.cpp loads it on first use); a program
// that calls them directly links cnnengine::cuda.
//
// Asynchrony, beyond what engine/core/backend.hpp promises:
// - Every call enqueues work on one compute stream and returns; copy_to_host and synchronize wait.
// - copy_to_device runs on its own copy stream and returns once `host` may be reused. It waits
//   only for earlier work that touched the destination (the backend tracks the ranges it has
//   copied into, and a graph's replay the ranges its captured calls touched), so a copy into
//   the trainer's input staging slot overlaps the running step. copy_to_device_async returns at
//   once with a fence (an event of a small ring), copy_to_host_async likewise on the compute
//   stream; reached() asks an event, wait() waits for it.
// - A label out of range in softmax_cross_entropy is found on the device; the DataError
//   comes from the next synchronize() or copy_to_host(), not from the call itself.
#include <memory>
#include <string>

#include <cnnengine/engine/core/backend.hpp>

namespace cnn {

struct CudaOptions {
  int device = 0;
  // fp32; tf32 (cuDNN and cuBLAS may use the tensor cores on float operands); bf16 or fp16 (the
  // convolutions' and dense layers' operands rounded to 16 bits, products summed in float on the
  // tensor cores: Note [16-bit products on CUDA], backends/cuda/conv.cpp).
  Precision precision = Precision::fp32;
  bool fast_start = false;  // heuristics (cudnnGetConvolution*Algorithm_v7) instead of cudnnFind*
  // Only the convolution algorithms cuDNN reports deterministic: the same seed gives the same
  // bits on every run (cuDNN's other algorithms may sum in an order that varies). Our own
  // kernels and cuBLAS's are deterministic either way.
  bool deterministic = false;
  // A file that keeps the measured convolution algorithms for later processes on the same GPU,
  // driver and libraries (backends/device/detail/algorithm_cache_file.hpp); empty: none.
  std::string algorithm_cache;
  // In bf16 and fp16, training steps keep their images channels last (Note [Channels-last images],
  // engine/core/tensor.hpp) where every layer takes them: no transposes inside cuDNN's tensor-core
  // convolutions. Off by default until it is faster on every network measured: on an H200 resnet18
  // (3x32x32) trained 1.12 x faster with it, resnet50 at 224 2.9 x slower
  // (benchmarks/results/gpu_h200_channels_last.md).
  bool channels_last = false;
};

struct CudaProbe {
  bool available = false;
  std::string reason;  // why not: no driver, no device, driver too old for runtime, cuDNN load failure...
  std::string device_name;
};

// Whether GPU `device` (of those visible) can run this build: every reason it cannot, in words.
CudaProbe probe_cuda(int device = 0) noexcept;
// Throws DeviceError with a clear message when the device cannot be used.
std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options);
// For `train_images --doctor`: versions compiled against and loaded, the GPU, and every mismatch
// that will fail flagged "ERROR:" with what to install. Never throws; works without a GPU.
std::string cuda_environment_report();

}  // namespace cnn
