// probe_cuda and cuda_environment_report: what this build was compiled against, what the
// process loaded, which GPUs it sees, and every mismatch that will make the CUDA backend fail.
// Nothing here needs a GPU, and nothing here throws.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/detail/architectures.hpp"
#include "backends/device/cuda_api.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {
namespace {

// CUDA's 13000 -> "13.0"
std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }
// cuDNN's and cuBLAS's 91900 -> "9.19.0"
std::string library_version(std::size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::string error_text(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")";
}

std::string architectures_text() {
  std::string text;
  for (int a : cuda::compiled_architectures()) text += (text.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return text;
}

int loaded_cublas_version() {
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS) return 0;
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  return major * 10000 + minor * 100 + patch;
}

// Why the device cannot run our kernels, or "" when it can.
std::string kernel_problem(int device, const cudaDeviceProp& props) {
  if (cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return "cannot make it current";
  }
  cudaError_t status = cuda::kernel_image_status();
  if (status == cudaSuccess) return "";
  return "compute capability " + std::to_string(props.major) + "." + std::to_string(props.minor) +
         " cannot run this build's kernels (" + architectures_text() + "): " + error_text(status) +
         "; rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(props.major * 10 + props.minor);
}

}  // namespace

CudaProbe probe_cuda(int device) noexcept {
  CudaProbe probe;
  try {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    if (driver == 0) {
      probe.reason = "no NVIDIA driver found (libcuda.so.1 is not loadable)";
      return probe;
    }
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      cudaGetLastError();
      if (status == cudaErrorInsufficientDriver) {
        probe.reason = "the driver supports CUDA " + cuda_version(driver) + " but this build needs CUDA " +
                       cuda_version(runtime) + ": update the NVIDIA driver";
      } else if (status == cudaErrorNoDevice) {
        probe.reason = "no CUDA device visible (driver for CUDA " + cuda_version(driver) +
                       " present; check nvidia-smi and CUDA_VISIBLE_DEVICES)";
      } else {
        probe.reason = "cudaGetDeviceCount failed: " + error_text(status);
      }
      return probe;
    }
    if (count == 0) {
      probe.reason = "no CUDA device visible";
      return probe;
    }
    if (device < 0 || device >= count) {
      probe.reason = "GPU " + std::to_string(device) + " was asked for, and " + std::to_string(count) +
                     " are visible (a data-parallel run takes one GPU per rank: no more ranks on a machine than "
                     "its GPUs)";
      return probe;
    }
    cudaDeviceProp props{};
    if ((status = cudaGetDeviceProperties(&props, device)) != cudaSuccess) {
      cudaGetLastError();
      probe.reason = "cudaGetDeviceProperties failed: " + error_text(status);
      return probe;
    }
    probe.device_name = props.name;
    if (std::string problem = kernel_problem(device, props); !problem.empty()) {
      probe.reason = probe.device_name + ": " + problem;
      return probe;
    }
    if (cudnnGetVersion() / 10000 != CUDNN_MAJOR) {
      probe.reason = "cuDNN " + library_version(cudnnGetVersion()) + " is loaded but this build needs cuDNN " +
                     std::to_string(CUDNN_MAJOR) + ".x";
      return probe;
    }
    // Creating a handle loads cuDNN's sub-libraries (libcudnn_cnn, _ops, _engines_*): a missing one
    // fails here rather than in the first convolution.
    cudnnHandle_t handle = nullptr;
    cudnnStatus_t cudnn_status = cudnnCreate(&handle);
    if (cudnn_status != CUDNN_STATUS_SUCCESS) {
      char detail[512] = {};
      cudnnGetLastErrorString(detail, sizeof detail);
      probe.reason = std::string("cuDNN failed to initialise: ") + cudnnGetErrorString(cudnn_status) +
                     (detail[0] ? std::string(" (") + detail + ")" : std::string());
      return probe;
    }
    cudnnDestroy(handle);
    probe.available = true;
  } catch (const std::exception& e) {
    probe.available = false;
    probe.reason = e.what();
  } catch (...) {
    probe.available = false;
    probe.reason = "unknown failure while probing CUDA";
  }
  return probe;
}

std::string cuda_environment_report() {
  std::ostringstream out;
  try {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    const std::size_t cudnn_loaded = cudnnGetVersion();
    const std::size_t cudnn_cudart = cudnnGetCudartVersion();
    const int cublas_loaded = loaded_cublas_version();
    std::vector<std::string> errors, warnings;

    out << "CUDA backend (this report needs no GPU)\n";
    out << "  compiled against: CUDA runtime " << cuda_version(CUDART_VERSION) << ", cuDNN "
        << library_version(CUDNN_VERSION) << ", cuBLAS " << library_version(CUBLAS_VERSION)
        << "; kernels for " << architectures_text() << "\n";
    out << "  driver: " << (driver ? "supports CUDA " + cuda_version(driver) : std::string("none found")) << "\n";
    out << "  loaded: CUDA runtime " << cuda_version(runtime) << ", cuDNN " << library_version(cudnn_loaded)
        << " (built for CUDA runtime " << cuda_version(static_cast<int>(cudnn_cudart)) << "), cuBLAS "
        << (cublas_loaded ? library_version(static_cast<std::size_t>(cublas_loaded)) : std::string("unknown"))
        << "\n";

    if (driver == 0) {
      errors.push_back("no NVIDIA driver (libcuda.so.1 not found): install an NVIDIA driver that supports CUDA " +
                       cuda_version(runtime) + " or newer");
    } else if (driver / 1000 < runtime / 1000) {
      errors.push_back("the driver supports CUDA " + cuda_version(driver) + ", older than the runtime's CUDA " +
                       cuda_version(runtime) + ": install a driver for CUDA " + cuda_version(runtime) +
                       " or newer");
    } else if (driver < runtime) {
      warnings.push_back("the driver supports CUDA " + cuda_version(driver) + ", the runtime is CUDA " +
                         cuda_version(runtime) + ": this works through minor-version compatibility; update the "
                         "driver if kernels fail to load");
    }
    if (cudnn_loaded / 10000 != CUDNN_MAJOR) {
      errors.push_back("cuDNN " + library_version(cudnn_loaded) + " is loaded but this build was compiled against " +
                       library_version(CUDNN_VERSION) + ": install cuDNN " + std::to_string(CUDNN_MAJOR) +
                       ".x for CUDA " + std::to_string(CUDART_VERSION / 1000) + " (libcudnn.so." +
                       std::to_string(CUDNN_MAJOR) + ")");
    } else if (cudnn_loaded < CUDNN_VERSION) {
      warnings.push_back("cuDNN " + library_version(cudnn_loaded) + " is older than the " +
                         library_version(CUDNN_VERSION) + " this build was compiled against");
    }
    if (cudnn_cudart / 1000 != static_cast<std::size_t>(runtime / 1000)) {
      errors.push_back("cuDNN was built for CUDA " + cuda_version(static_cast<int>(cudnn_cudart)) +
                       " but the runtime is CUDA " + cuda_version(runtime) + ": install the cuDNN build for CUDA " +
                       std::to_string(runtime / 1000) + " (e.g. the nvidia-cudnn-cu" + std::to_string(runtime / 1000) +
                       " package)");
    }
    if (cublas_loaded / 10000 != CUBLAS_VER_MAJOR) {
      errors.push_back("cuBLAS " + library_version(static_cast<std::size_t>(cublas_loaded)) +
                       " is loaded but this build needs cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) +
                       ".x: install the cuBLAS of CUDA " + std::to_string(CUDART_VERSION / 1000));
    }

    int count = 0;
    cudaError_t status = driver ? cudaGetDeviceCount(&count) : cudaErrorNoDevice;
    if (status != cudaSuccess) cudaGetLastError();
    if (status != cudaSuccess || count == 0) {
      out << "  GPUs: none" << (driver && status != cudaSuccess ? " (" + error_text(status) + ")" : std::string())
          << "; the versions above come from the libraries alone\n";
      if (driver) errors.push_back("no CUDA device visible: check nvidia-smi and CUDA_VISIBLE_DEVICES");
    }
    for (int device = 0; device < count; ++device) {
      cudaDeviceProp props{};
      if ((status = cudaGetDeviceProperties(&props, device)) != cudaSuccess) {
        cudaGetLastError();
        out << "  GPU " << device << ": " << error_text(status) << "\n";
        continue;
      }
      std::size_t free = 0, total = 0;
      std::string problem = kernel_problem(device, props);
      const bool memory_known = cudaMemGetInfo(&free, &total) == cudaSuccess;
      if (!memory_known) cudaGetLastError();
      out << "  GPU " << device << ": " << props.name << ", compute capability " << props.major << "."
          << props.minor << ", " << props.multiProcessorCount << " multiprocessors, "
          << memory::format_bytes(memory_known ? total : props.totalGlobalMem) << " memory";
      if (memory_known) out << " (" << memory::format_bytes(free) << " free)";
      out << "\n";
      if (!problem.empty()) errors.push_back("GPU " + std::to_string(device) + " (" + props.name + "): " + problem);
    }
    for (const auto& w : warnings) out << "WARNING: " << w << "\n";
    for (const auto& e : errors) out << "ERROR: " << e << "\n";
    if (errors.empty()) out << "  no problems found\n";
  } catch (const std::exception& e) {
    out << "ERROR: the report failed: " << e.what() << "\n";
  } catch (...) {
    out << "ERROR: the report failed\n";
  }
  return out.str();
}

}  // namespace cnn
