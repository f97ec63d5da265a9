#include "cnnengine/backends/device/device.hpp"

#include <stdexcept>

#include "cnnengine/backends/cpu/cpu_backend.hpp"
#include "cnnengine/backends/device/detail/cuda_plugin.hpp"
#include "cnnengine/base/error.hpp"

namespace cnn {

bool built_with_cuda() {
#if CNN_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

DeviceChoice select_device(const DeviceRequest& request) {
  if (request.device != "auto" && request.device != "cpu" && request.device != "cuda")
    throw ConfigError("unknown device '" + request.device + "': use auto, cpu or cuda");
  DeviceChoice choice;
  std::string why_not_cuda;
  if (request.device != "cpu" && (!built_with_cuda() || nvidia_driver_present(&why_not_cuda))) {
    if (const CudaPlugin* cuda = cuda_plugin(&why_not_cuda)) {
      const CudaProbe probe = cuda->probe();
      if (probe.available) {
        CudaOptions options;
        options.tf32 = request.tf32;
        options.fast_start = request.fast_start;
        choice.backend = cuda->make_backend(options);
        choice.reason = request.device + ": using CUDA device " + probe.device_name;
        return choice;
      }
      why_not_cuda = probe.reason;
    }
  }
  if (request.device == "cuda") throw DeviceError("--device cuda: " + why_not_cuda);
  choice.backend = std::make_unique<CpuBackend>(request.threads);
  choice.reason = request.device == "cpu" ? "cpu: as asked" : "auto: no usable GPU (" + why_not_cuda + "); using the CPU";
  return choice;
}

std::string environment_report() {
  std::string report = "cnnengine built with CUDA: ";
  report += built_with_cuda() ? "yes\n" : "no\n";
  report += "CPU backend: " + CpuBackend(0).description() + "\n";
  std::string why;
  if (const CudaPlugin* cuda = cuda_plugin(&why)) report += cuda->environment_report();
  else if (!built_with_cuda()) report += "CUDA: not compiled in; rebuild with the CUDA toolkit and cuDNN installed (CNN_CUDA=ON)\n";
  else report += "ERROR: " + why + "\n";
  return report;
}

}  // namespace cnn
