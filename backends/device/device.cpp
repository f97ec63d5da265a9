#include <cnnengine/backends/device/device.hpp>

#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/device/detail/cuda_plugin.hpp"
#include <cnnengine/base/error.hpp>

namespace cnn {

DeviceChoice::DeviceChoice() = default;
DeviceChoice::DeviceChoice(DeviceChoice&&) noexcept = default;
DeviceChoice& DeviceChoice::operator=(DeviceChoice&&) noexcept = default;
DeviceChoice::~DeviceChoice() = default;

bool built_with_cuda() {
#if CNN_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::optional<DeviceKind> parse_device(std::string_view word) {
  if (word == "auto") return std::nullopt;
  if (word == "cpu") return DeviceKind::cpu;
  if (word == "cuda") return DeviceKind::cuda;
  throw ConfigError("unknown device '" + std::string(word) + "': use auto, cpu or cuda");
}

DeviceChoice select_device(const DeviceRequest& request) {
  const std::string asked = request.device ? to_string(*request.device) : "auto";
  DeviceChoice choice;
  std::string why_not_cuda;
  if (request.device != DeviceKind::cpu && (!built_with_cuda() || nvidia_driver_present(&why_not_cuda))) {
    if (const CudaPlugin* cuda = cuda_plugin(&why_not_cuda)) {
      const CudaProbe probe = cuda->probe(request.cuda_device);
      if (probe.available) {
        CudaOptions options;
        options.precision = request.precision;
        options.fast_start = request.fast_start;
        options.deterministic = request.deterministic;
        options.algorithm_cache = request.algorithm_cache;
        options.channels_last = request.channels_last;
        options.device = request.cuda_device;
        choice.backend = cuda->make_backend(options);
        choice.reason = asked + ": using CUDA device " + std::to_string(request.cuda_device) + ", " + probe.device_name;
        return choice;
      }
      why_not_cuda = probe.reason;
    }
  }
  if (request.device == DeviceKind::cuda) throw DeviceError("CUDA was asked for and cannot be used: " + why_not_cuda);
  choice.backend = std::make_unique<CpuBackend>(request.threads, request.precision);
  choice.reason = request.device ? "cpu: as asked" : "auto: no usable GPU (" + why_not_cuda + "); using the CPU";
  return choice;
}

std::unique_ptr<Communicator> make_device_communicator(Backend& backend, Communicator& host) {
  if (backend.kind() == host.memory_kind()) return nullptr;
  std::string why;
  const CudaPlugin* cuda = backend.kind() == DeviceKind::cuda ? cuda_plugin(&why) : nullptr;
  if (!cuda) throw ConfigError("no communicator reaches the memory of " + backend.description() + ": " + why);
  if (!cuda->make_nccl_communicator)
    throw ConfigError("this build's CUDA backend has no NCCL (nccl.h and libnccl were not found beside the CUDA "
                      "toolkit when it was configured): it cannot train over several GPUs");
  return cuda->make_nccl_communicator(backend, host);
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
