// The entry point backends/device/cuda_plugin.cpp looks up in libcnnengine_cuda.
#include "cnnengine/backends/device/detail/cuda_plugin.hpp"

extern "C" __attribute__((visibility("default"))) const cnn::CudaPlugin* cnn_cuda_plugin() {
  static const cnn::CudaPlugin plugin{cnn::kCudaPluginAbi, &cnn::probe_cuda, &cnn::make_cuda_backend,
                                      &cnn::cuda_environment_report};
  return &plugin;
}
