#include "backends/device/detail/cuda_plugin.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include <cnnengine/backends/device/device.hpp>

namespace cnn {
namespace {

constexpr const char* kPluginFile = "libcnnengine_cuda.so.0";

// Beside this library first (the build folder, or the install's lib/), then wherever the
// dynamic loader looks (LD_LIBRARY_PATH, the program's run path).
void* open_plugin(std::string* error) {
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&cuda_plugin), &self) && self.dli_fname) {
    const auto beside = std::filesystem::path(self.dli_fname).parent_path() / kPluginFile;
    if (std::filesystem::exists(beside)) {
      if (void* handle = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
      *error = dlerror();
      return nullptr;
    }
  }
  if (void* handle = dlopen(kPluginFile, RTLD_NOW | RTLD_LOCAL)) return handle;
  *error = dlerror();
  return nullptr;
}

struct Loaded {
  const CudaPlugin* plugin = nullptr;
  std::string why;
};

Loaded load() {
  Loaded loaded;
  if (!built_with_cuda()) {
    loaded.why = "this build has no CUDA backend (built without the CUDA toolkit and cuDNN)";
    return loaded;
  }
  std::string error;
  void* handle = open_plugin(&error);
  if (!handle) {
    loaded.why = "the CUDA backend (" + std::string(kPluginFile) + ") cannot be loaded: " + error;
    if (const std::string hint = missing_library_hint(error); !hint.empty()) loaded.why += " (" + hint + ")";
    return loaded;
  }
  using Entry = const CudaPlugin* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaPluginEntry));
  const CudaPlugin* plugin = entry ? entry() : nullptr;
  if (!plugin || plugin->abi != kCudaPluginAbi) {
    loaded.why = std::string(kPluginFile) + " is from another build of cnnengine: rebuild and reinstall both";
    return loaded;  // the handle stays open: unloading code that may have run is never safe
  }
  loaded.plugin = plugin;
  return loaded;
}

}  // namespace

std::string missing_library_hint(const std::string& loader_error) {
  struct Library {
    const char* file;
    const char* what;
  };
  // The wheels PyTorch installs hold them, and the CUDA toolkit's prefix; either must be where
  // the loader looks (the build's run path, LD_LIBRARY_PATH, ldconfig).
  static const Library kLibraries[] = {
      {"libcudnn", "cuDNN 9: pip install nvidia-cudnn-cu13, or NVIDIA's cuDNN package"},
      {"libcublas", "cuBLAS: pip install nvidia-cublas, or the CUDA toolkit"},
      {"libnccl", "NCCL: pip install nvidia-nccl-cu13, or NVIDIA's NCCL package"},
      {"libcudart", "the CUDA runtime: pip install nvidia-cuda-runtime, or the CUDA toolkit"},
  };
  for (const Library& library : kLibraries)
    if (loader_error.find(library.file) != std::string::npos)
      return std::string("missing ") + library.what + "; then rebuild, or put its folder on LD_LIBRARY_PATH";
  return {};
}

bool nvidia_driver_present(std::string* why) {
  static const bool present = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr;  // kept open
  if (!present && why) *why = "no NVIDIA driver found (libcuda.so.1 is not loadable)";
  return present;
}

const CudaPlugin* cuda_plugin(std::string* why) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.plugin && why) *why = loaded.why;
  return loaded.plugin;
}

}  // namespace cnn
