// The entry point backends/device/cuda_plugin.cpp looks up in libcnnengine_cuda.
#include "backends/device/detail/cuda_plugin.hpp"

#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include <cnnengine/base/error.hpp>
#if CNN_HAVE_NCCL
#include "backends/cuda/detail/nccl_communicator.hpp"
#endif

namespace {

#if CNN_HAVE_NCCL
std::unique_ptr<cnn::Communicator> make_nccl_communicator(cnn::Backend& backend, cnn::Communicator& host) {
  auto* cuda = dynamic_cast<cnn::cuda::CudaBackend*>(&backend);
  if (!cuda) throw cnn::ConfigError("NCCL sums need a CUDA backend made by this library");
  return std::make_unique<cnn::cuda::NcclCommunicator>(*cuda, host);
}
constexpr auto kMakeNccl = &make_nccl_communicator;
#else
constexpr std::unique_ptr<cnn::Communicator> (*kMakeNccl)(cnn::Backend&, cnn::Communicator&) = nullptr;
#endif

}  // namespace

extern "C" __attribute__((visibility("default"))) const cnn::CudaPlugin* cnn_cuda_plugin() {
  static const cnn::CudaPlugin plugin{cnn::kCudaPluginAbi, &cnn::probe_cuda, &cnn::make_cuda_backend,
                                      &cnn::cuda_environment_report, kMakeNccl};
  return &plugin;
}
