// The CPU's recovery and budget checks (tests/engine/recovery_checks.hpp) on the GPU: 100
// injected allocation failures change nothing but the micro-batch, and a sweep of budgets
// either trains within its budget or is refused before step 1.
#include <catch2/catch.hpp>

#include "support.hpp"
#include "tests/engine/recovery_checks.hpp"

using namespace cnn;
using namespace cnn::testing;

TEST_CASE("on the GPU 100 injected allocation failures change nothing but the micro-batch", "[cuda][recovery]") {
  Backend& gpu = cuda_test::gpu();
  const int batch = 16, steps = 600;
  const InjectedRun clean = run_with_injected_failures(gpu, gpu.device_memory(), 0, batch, steps);
  const InjectedRun faulty = run_with_injected_failures(gpu, gpu.device_memory(), 100, batch, steps, clean.requests);
  CHECK(faulty.injected == 100);
  CHECK(faulty.recoveries >= 100);
  CHECK(clean.samples == static_cast<long>(batch) * steps);
  CHECK(faulty.samples == clean.samples);
  // cuDNN may pick another algorithm for the smaller micro-batch, so the sums are grouped
  // differently; a replay that drew other dropout masks or kept a failed attempt's gradients is
  // 1e-3 to 3e-2 away on the CPU.
  const double difference = cuda_test::relative_error(faulty.parameters, clean.parameters);
  INFO("relative parameter difference " << difference);
  CHECK(difference < 1e-4);
}

TEST_CASE("on the GPU a sweep of budgets: each run trains within its budget or is refused before step 1",
          "[cuda][budget]") {
  Backend& gpu = cuda_test::gpu();
  check_budget_sweep(gpu, gpu.device_memory(), std::size_t{256} << 20);
}
