// The CUDA tests' own runner: without a usable GPU it says why and exits 77, which ctest reports
// as skipped (SKIP_RETURN_CODE in tests/CMakeLists.txt).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "backends/device/cuda_api.hpp"

int main(int argc, char** argv) {
  const cnn::CudaProbe probe = cnn::probe_cuda();
  if (!probe.available) {
    std::printf("no CUDA device: %s — skipping the cuda tests\n", probe.reason.c_str());
    return 77;
  }
  std::printf("CUDA device: %s\n", probe.device_name.c_str());
  return Catch::Session().run(argc, argv);
}
