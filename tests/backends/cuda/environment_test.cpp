// The probe, the environment report, the backend's description and its memory resources.
#include <catch2/catch.hpp>

#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/device/cuda_api.hpp"
#include <cnnengine/base/error.hpp>
#include <cnnengine/memory/out_of_memory.hpp>
#include "support.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

TEST_CASE("cuda probe finds the device", "[cuda][environment]") {
  const CudaProbe probe = probe_cuda();
  CHECK(probe.available);
  CHECK(probe.reason.empty());
  CHECK_FALSE(probe.device_name.empty());
}

TEST_CASE("cuda probe of a GPU past those visible says how many there are", "[cuda][environment]") {
  int count = 0;
  CNN_CHECK(cudaGetDeviceCount(&count));
  const CudaProbe probe = probe_cuda(count);  // a data-parallel rank with no GPU of its own
  CHECK_FALSE(probe.available);
  CHECK(probe.reason.find("GPU " + std::to_string(count) + " was asked for") != std::string::npos);
  CHECK_FALSE(probe_cuda(-1).available);
}

TEST_CASE("cuda environment report names versions and the GPU without errors", "[cuda][environment]") {
  const std::string report = cuda_environment_report();
  INFO(report);
  CHECK(report.find("cuDNN") != std::string::npos);
  CHECK(report.find("cuBLAS") != std::string::npos);
  CHECK(report.find("GPU 0: " + probe_cuda().device_name) != std::string::npos);
  CHECK(report.find("ERROR:") == std::string::npos);
}

TEST_CASE("cuda backend describes itself and reserves its cuBLAS workspace", "[cuda][environment]") {
  CHECK(gpu().kind() == DeviceKind::cuda);
  CHECK(gpu().description().find("cuDNN") != std::string::npos);
  CHECK(gpu().library_reserved_bytes() > 0);
  CHECK(gpu().device_memory().is_device_memory());
  CHECK_FALSE(gpu().staging_memory().is_device_memory());
}

TEST_CASE("cuda device memory that does not exist is a typed OutOfMemory", "[cuda][environment]") {
  auto& memory = gpu().device_memory();
  const std::size_t absurd = std::size_t{1} << 50;  // 1 PiB
  try {
    memory.allocate(absurd, 256, memory::Category::activations);
    FAIL("a 1 PiB allocation succeeded");
  } catch (const memory::OutOfMemory& e) {
    CHECK(e.details().requested == absurd);
    CHECK(e.details().category == memory::Category::activations);
    CHECK(e.details().limit > 0);  // the device's total memory
  }
  // The failure leaves nothing behind: kernels still run.
  Twin t(gpu(), Shape{1000}, 111);
  cpu().fill(t.cpu(), 2.0f);
  gpu().fill(t.gpu(), 2.0f);
  CHECK(t.gpu_values() == t.cpu_values());
}

TEST_CASE("make_cuda_backend refuses a device that does not exist", "[cuda][environment]") {
  CudaOptions options;
  options.device = 1000;
  CHECK_THROWS_AS(make_cuda_backend(options), DeviceError);
}
