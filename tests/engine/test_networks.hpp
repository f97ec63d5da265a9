#pragma once
// Small helpers shared by the engine tests: random values, synthetic data and trainer settings.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/infer/predictor.hpp>
#include <cnnengine/engine/train/trainer.hpp>
#include "layers/add.hpp"
#include "layers/batchnorm2d.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/flatten.hpp"
#include "layers/pool2d.hpp"
#include "layers/relu.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>

namespace cnn::testing {

// The outputs of `trainer`'s network as it stands for `count` images: a predictor of the same
// network on the trainer's parameters and running statistics.
inline std::vector<float> trainer_outputs(Network& net, Backend& backend, Trainer& trainer, const float* images,
                                          int count) {
  Predictor predictor(net, backend);
  predictor.parameters().upload(trainer.parameters().download());
  std::vector<float> outputs(static_cast<std::size_t>(count) * net.output_shape().elements());
  predictor.logits(images, count, outputs.data());
  return outputs;
}

// n values in [-1, 1), the same for the same seed.
inline std::vector<float> random_vector(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 2.f * uniform01(seed, i) - 1.f;
  return v;
}

struct SyntheticData {
  std::vector<float> images;
  std::vector<std::int32_t> labels;
  int samples = 0;
  std::size_t sample_floats = 0;

  // Images whose class is visible in the pixel values, so a network can learn it.
  SyntheticData(int n, Shape shape, int classes, std::uint64_t seed) : samples(n), sample_floats(shape.elements()) {
    images.resize(static_cast<std::size_t>(n) * sample_floats);
    labels.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      const int label = static_cast<int>(splitmix64(seed + static_cast<std::uint64_t>(i)) % static_cast<std::uint64_t>(classes));
      labels[static_cast<std::size_t>(i)] = label;
      for (std::size_t k = 0; k < sample_floats; ++k) {
        const float noise = uniform01(seed * 7919 + static_cast<std::uint64_t>(i), k);
        const bool lit = (k * static_cast<std::size_t>(classes) / sample_floats) == static_cast<std::size_t>(label);
        images[static_cast<std::size_t>(i) * sample_floats + k] = 0.5f * noise + (lit ? 0.5f : 0.f);
      }
    }
  }
  Batch batch(int first, int size) const {
    return Batch{images.data() + static_cast<std::size_t>(first) * sample_floats, labels.data() + first, size};
  }
};

// Each step's loss as `options` trains a preset (10 classes) on `backend` for `steps` batches of
// SyntheticData drawn with `data_seed`.
inline std::vector<float> preset_losses(Backend& backend, const std::string& model, Shape image,
                                        const TrainerOptions& options, int steps, std::uint64_t data_seed) {
  Network net = make_preset(model, image, 10);
  Trainer trainer(net, backend, memory::host_resource(), options);
  const SyntheticData data(steps * options.batch, image, 10, data_seed);
  std::vector<float> out;
  for (int s = 0; s < steps; ++s) out.push_back(trainer.train_step(data.batch(s * options.batch, options.batch)).loss);
  return out;
}

// Sets every value of `name` ("weight", ...) of node `node` of the trainer's network to `value`.
inline void fill_parameter(Trainer& trainer, const Network& net, int node, const std::string& name, float value) {
  for (const ParameterStore::Place& p : ParameterStore::places(net))
    if (p.node == node && p.name == name) {
      const std::vector<float> values(p.shape.elements(), value);
      trainer.parameters().upload(ParameterStore::Block::parameters, p.offset, values.size(), values.data());
    }
}

// The network of the NaN tests: a sample at the float's largest value overflows in the
// convolution, whose weights of 1 (fill_parameter) add nine of them in a window whatever the
// initialisation drew (a NaN pixel is refused before the step: check_inputs); no ReLU, which
// would turn NaN into 0. The overflow reaches every logit through the BatchNorm's batch
// statistics as NaN, and the failed forward pass writes NaN into its running statistics.
inline constexpr const char* kOverflowingNetwork = "conv 4 3 pad=1\nbatchnorm\nmaxpool 2\nflatten\ndense 4\n";

// Plain SGD at lr 0.01 with a constant schedule, for tests that compare runs: with a large step,
// training amplifies the rounding differences of a differently grouped sum into a flipped ReLU
// or max-pooling tie (2e-2 apart after 100 steps at 0.05, between micro-batches 16 and 4, with
// no failure at all), and the comparison would measure that. At 0.01 runs stay 1e-7 apart.
// regrow_after_steps 1: after a recovery the trainer tries the larger micro-batch at once.
inline TrainerOptions constant_sgd(int batch, int regrow_after_steps = 1) {
  TrainerOptions o;
  o.batch = batch;
  o.optimizer.kind = OptimizerKind::sgd;
  o.optimizer.learning_rate = 0.01f;
  o.schedule.kind = ScheduleKind::constant;
  o.regrow_after_steps = regrow_after_steps;
  return o;
}

// `small` with dropout and no BatchNorm: a replay at a smaller micro-batch must draw the same
// dropout masks, and nothing else depends on the micro-batch but rounding.
inline Network small_with_dropout(Shape image, int classes) {
  return parse_network("conv 32 3 pad=1\nrelu\nmaxpool 2\nconv 64 3 pad=1\nrelu\nmaxpool 2\nflatten\n"
                       "dense 128\nrelu\ndropout 0.3\ndense " + std::to_string(classes) + "\n",
                       image, classes);
}

// The resnet18 preset with a dropout layer inside its first block (conv, BatchNorm, ReLU,
// dropout, conv, ...): every kind of layer the presets use, on a spatial activation.
inline Network resnet18_with_dropout(Shape image, int classes) {
  Network net(image);
  net.emplace<Conv2D>(64, 3, 1, 1, false);
  net.emplace<BatchNorm2D>();
  int x = net.emplace<ReLU>();
  bool dropout = true;
  const std::vector<int> widths{64, 128, 256, 512};
  for (std::size_t stage = 0; stage < widths.size(); ++stage)
    for (int block = 0; block < 2; ++block) {
      const int channels = widths[stage], stride = stage > 0 && block == 0 ? 2 : 1;
      const int in = x;
      net.add(std::make_unique<Conv2D>(channels, 3, stride, 1, false), {in});
      net.emplace<BatchNorm2D>();
      net.emplace<ReLU>();
      if (std::exchange(dropout, false)) net.emplace<Dropout>(0.2f);
      net.emplace<Conv2D>(channels, 3, 1, 1, false);
      const int branch = net.emplace<BatchNorm2D>();
      int shortcut = in;
      if (stride != 1 || net.node(in).shape[0] != channels) {
        net.add(std::make_unique<Conv2D>(channels, 1, stride, 0, false), {in});
        shortcut = net.emplace<BatchNorm2D>();
      }
      net.add(std::make_unique<Add>(), {branch, shortcut});
      x = net.emplace<ReLU>();
    }
  net.add(std::make_unique<Pool2D>(Pool2D::global_average()));
  net.emplace<Flatten>();
  net.emplace<Dense>(classes);
  return net;
}

}  // namespace cnn::testing
