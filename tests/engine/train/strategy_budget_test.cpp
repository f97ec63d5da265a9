// At the smallest budget the planner accepts, every step-buffer strategy trains: the plan counts
// what the arena's and the pool's size classes, chunks and fragmentation need beyond the planned
// offsets (memory/detail/strategy_replay.hpp), and one byte less is refused before step 1.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/plan/batch_planner.hpp"
#include "engine/train/planning_options.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/memory/out_of_memory.hpp>
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;

namespace {

const Shape kImage{1, 12, 12};
constexpr int kClasses = 4;

TrainerOptions options(memory::Strategy strategy, std::size_t budget) {
  TrainerOptions o = testing::constant_sgd(16);
  o.memory_strategy = strategy;
  o.memory_budget = budget;
  return o;
}

bool accepted(const std::string& preset, Backend& backend, memory::Strategy strategy, std::size_t budget) {
  Network net = make_preset(preset, kImage, kClasses);
  return BatchPlanner(net, backend, planning_options(options(strategy, budget), net, backend)).choose() > 0;
}

// By bisection to the byte: the planner accepts it, and refuses one byte less.
std::size_t smallest_accepted(const std::string& preset, Backend& backend, memory::Strategy strategy) {
  std::size_t refused = 1, accepted_at = std::size_t{1} << 30;
  REQUIRE(accepted(preset, backend, strategy, accepted_at));
  while (accepted_at - refused > 1) {
    const std::size_t mid = refused + (accepted_at - refused) / 2;
    (accepted(preset, backend, strategy, mid) ? accepted_at : refused) = mid;
  }
  return accepted_at;
}

}  // namespace

TEST_CASE("every strategy trains at the smallest budget the plan accepts, and one byte less is refused",
          "[trainer][budget][memory]") {
  CpuBackend backend(1);
  const testing::SyntheticData data(64, kImage, kClasses, 7);
  for (const std::string preset : {"small", "resnet"})
    for (memory::Strategy strategy :
         {memory::Strategy::planned, memory::Strategy::arena, memory::Strategy::pool, memory::Strategy::direct}) {
      INFO(preset << " under the " << memory::to_string(strategy) << " strategy");
      const std::size_t budget = smallest_accepted(preset, backend, strategy);
      {
        Network net = make_preset(preset, kImage, kClasses);
        Trainer trainer(net, backend, memory::host_resource(), options(strategy, budget));
        std::vector<std::string> recoveries;
        trainer.on_recovery = [&](const std::string& what) { recoveries.push_back(what); };
        const int planned = trainer.micro_batch();
        for (int step = 0; step < 3; ++step) {
          const StepReport report = trainer.train_step(data.batch(16 * step, 16));
          CHECK(report.micro_batch == planned);
        }
        int served = 0;
        const EvalResult eval = trainer.evaluate([&]() -> std::optional<Batch> {
          if (served == 64) return std::nullopt;
          served += 16;
          return data.batch(served - 16, 16);
        });
        CHECK(eval.samples == 64);
        CHECK(trainer.train_step(data.batch(48, 16)).micro_batch == planned);
        CHECK(recoveries.empty());
      }
      Network net = make_preset(preset, kImage, kClasses);
      CHECK_THROWS_AS(Trainer(net, backend, memory::host_resource(), options(strategy, budget - 1)), BudgetTooSmall);
    }
}
