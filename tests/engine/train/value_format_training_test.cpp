// Training with 16-bit values (step_plan.cpp, Note [16-bit values]) through every kind of layer:
// each layer reads and writes float32 copies of its values, so one that read a value in backward
// without saying so (Layer::backward_needs_input, backward_needs_output) would fail here. A bf16
// run is reproducible, its first loss is fp32's within the rounding of the values, and it learns.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/core/forwarding_backend.hpp"
#include "engine/train/trainer.hpp"
#include "memory/host_resource.hpp"
#include "models/network_text.hpp"
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

// A convolution's output reaches conv2d_forward with the step's 16-bit storage of it
// (Tensor::packed16, Layer::writes_packed_output). This backend hides that storage from the
// convolution and either rounds the output into it afterwards, as the step did before
// convolutions stored their own outputs, or leaves it unwritten, as a backend that ignored it would.
class HidingPackedOutputs : public ForwardingBackend {
 public:
  HidingPackedOutputs(Backend& inner, bool round_after) : ForwardingBackend(inner), round_after_(round_after) {}
  void conv2d_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                      bool accumulate, Workspace ws) override {
    Tensor wide = y;
    wide.packed16 = nullptr;
    ForwardingBackend::conv2d_forward(d, x, w, bias, wide, accumulate, ws);
    if (y.packed16 && round_after_) to_16bit(wide, y.packed16, value_format(precision()));
  }

 private:
  bool round_after_;
};

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

TEST_CASE("a convolution that stores its own 16-bit output trains as the step rounding it would",
          "[value_format][bf16][train]") {
  for (Precision precision : {Precision::bf16, Precision::fp16}) {
    INFO(to_string(precision));
    CpuBackend cpu(2, precision);
    const Run stored_by_conv = train("onnx_conv_layers.txt", cpu);
    HidingPackedOutputs rounding(cpu, true), ignoring(cpu, false);
    const Run stored_by_step = train("onnx_conv_layers.txt", rounding);
    CHECK(stored_by_conv.losses == stored_by_step.losses);
    CHECK(stored_by_conv.test_loss == stored_by_step.test_loss);
    // Unwritten storage holds whatever the arena held: the run diverges or learns otherwise.
    bool same_as_unwritten = false;
    try {
      same_as_unwritten = train("onnx_conv_layers.txt", ignoring).losses == stored_by_conv.losses;
    } catch (const TrainingDiverged&) {
    }
    CHECK_FALSE(same_as_unwritten);
  }
}

TEST_CASE("a 16-bit output is refused by an fp32 backend's convolution", "[value_format][conv]") {
  CpuBackend cpu(1, Precision::fp32);
  Conv2dDesc d;
  d.in_channels = d.out_channels = 1;
  d.kernel_h = d.kernel_w = 1;
  std::vector<float> x(4, 1.0f), w(1, 2.0f), y(4);
  std::vector<std::uint16_t> packed(4);
  Tensor out{y.data(), Shape{1, 1, 2, 2}};
  out.packed16 = packed.data();
  CHECK_THROWS_WITH(cpu.conv2d_forward(d, Tensor{x.data(), Shape{1, 1, 2, 2}}, Tensor{w.data(), Shape{1, 1, 1, 1}},
                                       Tensor{}, out, false, Workspace{}),
                    Catch::Contains("conv2d_forward") && Catch::Contains("16-bit"));
}
