// Training with 16-bit values (step_plan.cpp, Note [16-bit values]) through every kind of layer:
// each layer reads and writes float32 copies of its values, so one that read a value in backward
// without saying so (Layer::backward_needs_input, backward_needs_output) would fail here. A bf16
// run is reproducible, its first loss is fp32's within the rounding of the values, and it learns.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/core/forwarding_backend.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/stored_values_cpu.hpp"
#include "tests/engine/test_networks.hpp"

using namespace cnn;

namespace {

const Shape kImage{1, 28, 28};
constexpr int kClasses = 10, kBatch = 8, kSteps = 6;

Network load(const std::string& file) {
  const std::filesystem::path models = std::filesystem::path(CNN_TEST_DATA_DIR).parent_path() / "models";
  return load_network_file(models / file, kImage, kClasses);
}

struct Run {
  std::vector<float> losses;
  double test_loss = 0;
};

Run train(const std::string& file, Backend& backend) {
  Network net = load(file);
  TrainerOptions options = testing::constant_sgd(kBatch);
  options.optimizer.learning_rate = 0.05f;
  options.micro_batch = kBatch / 2;  // gradients accumulate over micro-batches
  options.seed = 3;
  options.narrow_values = NarrowValues::always;  // these networks are too small to gain from 16-bit values
  Trainer trainer(net, backend, memory::host_resource(), options);
  const testing::SyntheticData data((kSteps + 1) * kBatch, kImage, kClasses, 17);
  Run run;
  for (int s = 0; s < kSteps; ++s) run.losses.push_back(trainer.train_step(data.batch(s * kBatch, kBatch)).loss);
  bool given = false;
  run.test_loss = trainer
                      .evaluate([&]() -> std::optional<Batch> {
                        if (std::exchange(given, true)) return std::nullopt;
                        return data.batch(kSteps * kBatch, kBatch);
                      })
                      .loss;
  return run;
}

Run train(const std::string& file, Precision precision) {
  CpuBackend backend(2, precision);
  return train(file, backend);
}

}  // namespace

TEST_CASE("16-bit values train every kind of layer reproducibly, as fp32 within their rounding", "[value_format][bf16][train]") {
  for (const std::string file : {"every_onnx_layer.txt", "onnx_conv_layers.txt", "onnx_norm_layers.txt",
                                 "onnx_activation_layers.txt", "onnx_join_layers.txt"}) {
    INFO(file);
    const Run bf16 = train(file, Precision::bf16);
    const Run again = train(file, Precision::bf16);
    const Run fp32 = train(file, Precision::fp32);
    CHECK(bf16.losses == again.losses);
    CHECK(bf16.test_loss == again.test_loss);
    for (float loss : bf16.losses) CHECK(std::isfinite(loss));
    CHECK(std::isfinite(bf16.test_loss));
    // The same weights: the first loss differs by the values' and products' rounding alone (2^-8
    // relative each, over a dozen layers).
    CHECK(bf16.losses.front() == Approx(fp32.losses.front()).epsilon(0.03));
    CHECK(bf16.losses != fp32.losses);
  }
}

TEST_CASE("a backend that takes values as they are stored trains as one that is handed float copies",
          "[value_format][bf16][train]") {
  for (const std::string file : {"every_onnx_layer.txt", "onnx_conv_layers.txt", "onnx_join_layers.txt"}) {
    for (Precision precision : {Precision::bf16, Precision::fp16}) {
      INFO(file << ", " << to_string(precision));
      CpuBackend cpu(2, precision);
      const Run floats = train(file, cpu);
      testing::StoredValuesCpu stored(cpu, true), unwritten(cpu, false);
      const Run bits = train(file, stored);
      CHECK(stored.inputs_as_bits() > 0);
      CHECK(bits.losses == floats.losses);
      CHECK(bits.test_loss == floats.test_loss);
      // Outputs left unwritten hold whatever the arena held: the run diverges or learns otherwise.
      bool same_as_unwritten = false;
      try {
        same_as_unwritten = train(file, unwritten).losses == floats.losses;
      } catch (const TrainingDiverged&) {
      }
      CHECK_FALSE(same_as_unwritten);
    }
  }
}
