#pragma once
// The CUDA backend lives in its own library, libcnnengine_cuda, loaded on first use. A CPU run
// of a CUDA build then maps none of the CUDA runtime, cuBLAS and cuDNN (about 150 MiB of
// resident memory), and a machine without them, or with versions that do not load, still runs
// on the CPU and is told why CUDA is not there, instead of the program failing to start.
#include <memory>
#include <string>

#include "backends/device/cuda_api.hpp"
#include <cnnengine/engine/core/communicator.hpp>

namespace cnn {

// What the plugin gives: backends/cuda/plugin.cpp fills it. `abi` guards against a plugin from
// another build of cnnengine.
struct CudaPlugin {
  int abi = 0;
  CudaProbe (*probe)(int device) noexcept = nullptr;
  std::unique_ptr<Backend> (*make_backend)(const CudaOptions&) = nullptr;
  std::string (*environment_report)() = nullptr;
  // NCCL over the ranks `host` joins, for a backend make_backend made; null in a build without NCCL.
  std::unique_ptr<Communicator> (*make_nccl_communicator)(Backend&, Communicator& host) = nullptr;
};
inline constexpr int kCudaPluginAbi = 5;
inline constexpr const char* kCudaPluginEntry = "cnn_cuda_plugin";  // extern "C" const CudaPlugin* ()

// The loaded plugin, or null with `why` saying what is missing (not built, not found beside
// libcnnengine, or a CUDA library it needs cannot be loaded: dlerror's words).
const CudaPlugin* cuda_plugin(std::string* why);

// What to install when the dynamic loader's error names a CUDA library it could not find
// ("cuDNN 9: pip install nvidia-cudnn-cu13, ..."); empty when it names none of them.
std::string missing_library_hint(const std::string& loader_error);

// Whether an NVIDIA driver can be loaded (libcuda.so.1), checked without loading the plugin:
// where there is none, --device auto need not map the CUDA libraries only to learn that.
bool nvidia_driver_present(std::string* why);

}  // namespace cnn
