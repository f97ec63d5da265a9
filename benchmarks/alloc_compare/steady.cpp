// steady: real training steps through the Trainer, its step buffers from the strategy.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/train/trainer.hpp>
#include "workloads.hpp"

namespace alloc_compare {

namespace mem = cnn::memory;
using Clock = std::chrono::steady_clock;

namespace {

// One batch of noise with random labels: what the memory does does not depend on the pixels.
struct SyntheticBatch {
  std::vector<float> images;
  std::vector<std::int32_t> labels;

  SyntheticBatch(const cnn::Network& network, int batch, std::uint64_t seed)
      : images(static_cast<std::size_t>(batch) * network.input_shape().elements()),
        labels(static_cast<std::size_t>(batch)) {
    for (std::size_t i = 0; i < images.size(); ++i) images[i] = cnn::uniform01(seed, i);
    for (std::size_t i = 0; i < labels.size(); ++i)
      labels[i] = static_cast<std::int32_t>(cnn::splitmix64(seed + i) % static_cast<std::uint64_t>(network.num_classes()));
  }
  cnn::Batch view() const { return {images.data(), labels.data(), static_cast<int>(labels.size())}; }
};

}  // namespace

RunResult run_steady(Workbench& bench, cnn::memory::Strategy strategy, const SteadySpec& spec) {
  const cnn::MemoryBreakdown sizes = bench.breakdown(spec.batch);
  const std::size_t fixed = sizes.persistent.total() + sizes.library;
  RunResult r = bench.start("steady", strategy, spec.budget, sizes.lower_bound + fixed);
  cnn::Network network = bench.fresh_network();
  std::optional<Rig> rig;
  std::unique_ptr<cnn::Trainer> trainer;
  try {
    const std::size_t persistent = sizes.persistent.total() + sizes.input_staging;
    rig.emplace(bench.base(), bench.backend().staging_memory(),
                rig_config(bench, strategy, spec.budget, persistent, sizes.arena_bytes));
    cnn::TrainerOptions options;
    options.batch = options.micro_batch = spec.batch;
    options.seed = bench.config().seed;
    options.total_steps = spec.steps;
    trainer = std::make_unique<cnn::Trainer>(network, bench.backend(), rig->stack(), options);
  } catch (const mem::OutOfMemory& e) {
    r.setup_failed = true;
    r.failure = e.what();
    r.peak_reserved = rig ? rig->peak_reserved() : 0;
    return r;
  }
  r.setup_reserved = rig->reserved();

  const SyntheticBatch data(network, spec.batch, bench.config().seed);
  for (int step = 0; step < spec.steps; ++step) {
    rig->begin_step();
    const auto start = Clock::now();
    try {
      // Under a budget the Trainer recovers from a refused request by halving the micro-batch
      // and replaying the step; the refusals still count.
      trainer->train_step(data.view());
    } catch (const mem::OutOfMemory& e) {
      r.failure = e.what();  // nothing left to halve
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    r.steps.push_back(rig->end_step(spec.batch, static_cast<std::uint64_t>(ns)));
    if (!r.failure.empty()) break;
  }
  r.peak_reserved = rig->peak_reserved();
  return r;
}

}  // namespace alloc_compare
