// Device selection: --device cpu touches no CUDA library, auto says what it chose and why, and
// the CUDA backend, where it was built, loads as a plugin (backends/device/detail/cuda_plugin.hpp).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "backends/device/detail/cuda_plugin.hpp"
#include <cnnengine/backends/device/device.hpp>

using namespace cnn;

namespace {
bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find(library) != std::string::npos;
}
}  // namespace

TEST_CASE("device cpu loads no CUDA library", "[device]") {
  const DeviceChoice choice = select_device(DeviceRequest{DeviceKind::cpu, 1});
  CHECK(choice.backend->kind() == DeviceKind::cpu);
  CHECK(choice.reason == "cpu: as asked");
  for (const char* library : {"libcudart", "libcublas", "libcudnn", "libcnnengine_cuda"}) {
    INFO(library);
    CHECK_FALSE(mapped(library));
  }
}

TEST_CASE("device auto says which device it chose and why", "[device]") {
  const DeviceChoice choice = select_device(DeviceRequest{std::nullopt, 1});
  INFO(choice.reason);
  if (choice.backend->kind() == DeviceKind::cpu) {
    CHECK(choice.reason.rfind("auto: no usable GPU (", 0) == 0);
    CHECK(choice.reason.find("; using the CPU") != std::string::npos);
    // Without a driver there is nothing to probe: the CUDA libraries stay unmapped.
    if (choice.reason.find("no NVIDIA driver") != std::string::npos) CHECK_FALSE(mapped("libcudnn"));
  } else {
    CHECK(choice.reason.rfind("auto: using CUDA device ", 0) == 0);
  }
  CHECK_THROWS_WITH(parse_device("tpu"), Catch::Contains("unknown device 'tpu'"));
  CHECK(parse_device("auto") == std::nullopt);
  CHECK(parse_device("cuda") == DeviceKind::cuda);
}

TEST_CASE("a CUDA build loads its backend as a plugin, a CPU build says it has none", "[device]") {
  std::string why;
  const CudaPlugin* plugin = cuda_plugin(&why);
  INFO(why);
  if (!built_with_cuda()) {
    CHECK(plugin == nullptr);
    CHECK(why.find("no CUDA backend") != std::string::npos);
    return;
  }
  REQUIRE(plugin != nullptr);  // the toolkit's libraries load here even without a GPU
  CHECK(plugin->abi == kCudaPluginAbi);
  const CudaProbe probe = plugin->probe(0);
  if (!probe.available) CHECK_FALSE(probe.reason.empty());
  CHECK(environment_report().find("cnnengine built with CUDA: yes") != std::string::npos);
}

TEST_CASE("a CUDA library the loader cannot find is named with what to install", "[device]") {
  CHECK(missing_library_hint("libcudnn.so.9: cannot open shared object file: No such file or directory")
            .find("pip install nvidia-cudnn-cu13") != std::string::npos);
  CHECK(missing_library_hint("libnccl.so.2: cannot open shared object file").find("NCCL") != std::string::npos);
  CHECK(missing_library_hint("libcublasLt.so.13: cannot open shared object file").find("cuBLAS") != std::string::npos);
  CHECK(missing_library_hint("undefined symbol: cnn_something").empty());
}
