#include "engine/device.hpp"

#include <stdexcept>

#include "engine/cpu/cpu_backend.hpp"
#if CNN_HAVE_CUDA
#include "engine/cuda/cuda_backend.hpp"
#endif

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
    throw std::invalid_argument("unknown device '" + request.device + "': use auto, cpu or cuda");
  DeviceChoice choice;
  std::string why_not_cuda = "this build has no CUDA backend (built without the CUDA toolkit and cuDNN)";
#if CNN_HAVE_CUDA
  if (request.device != "cpu") {
    const CudaProbe probe = probe_cuda();
    if (probe.available) {
      CudaOptions options;
      options.tf32 = request.tf32;
      options.fast_start = request.fast_start;
      choice.backend = make_cuda_backend(options);
      choice.reason = request.device + ": using CUDA device " + probe.device_name;
      return choice;
    }
    why_not_cuda = probe.reason;
  }
#endif
  if (request.device == "cuda") throw std::runtime_error("--device cuda: " + why_not_cuda);
  choice.backend = std::make_unique<CpuBackend>(request.threads);
  choice.reason = request.device == "cpu" ? "cpu: as asked" : "auto: no usable GPU (" + why_not_cuda + "); using the CPU";
  return choice;
}

std::string environment_report() {
  std::string report = "cnnengine built with CUDA: ";
  report += built_with_cuda() ? "yes\n" : "no\n";
  report += "CPU backend: " + CpuBackend(0).description() + "\n";
#if CNN_HAVE_CUDA
  report += cuda_environment_report();
#else
  report += "CUDA: not compiled in; rebuild with the CUDA toolkit and cuDNN installed (CNN_CUDA=ON)\n";
#endif
  return report;
}

}  // namespace cnn
