// The built-in classification networks (models/presets.cpp): each builds for grey 28x28 up to RGB
// 224x224 with the layout its sizing rule gives, has torchvision's parameter count and
// multiply-adds at ImageNet size, refuses an input too small, trains on the CPU, and is planned
// by the batch planner. The U-Net: unet_preset_test.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/base/error.hpp>
#include <cnnengine/layers/builtin_layers.hpp>
#include "engine/train/planning_options.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/budget_adaptor.hpp"
#include "memory/host_resource.hpp"
#include "memory/statistics_adaptor.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;
using cnn::testing::SyntheticData;

namespace {

// The presets that size themselves from the input (all but small, small-bn, resnet and unet).
const std::vector<std::string> kSizedPresets = {"resnet18",        "resnet34",       "resnet50", "mobilenetv2",
                                                "mobilenetv2-0.5", "mobilenetv2-se", "densenet"};
// Every preset but unet, which gives a map rather than one value per class.
std::vector<std::string> classification_presets() {
  std::vector<std::string> names;
  for (const std::string& name : preset_names())
    if (name != "unet") names.push_back(name);
  return names;
}
const std::vector<Shape> kInputs = {Shape{1, 28, 28}, Shape{3, 32, 32}, Shape{3, 64, 64}, Shape{3, 224, 224}};

std::size_t trainable_parameters(const Network& net) {
  std::size_t n = 0;
  for (int id = 1; id < net.size(); ++id)
    for (const ParamSpec& p : net.node(id).layer->parameters())
      if (p.trainable) n += p.shape.elements();
  return n;
}

int count_of(const Network& net, const std::string& type) {
  int n = 0;
  for (int id = 1; id < net.size(); ++id) n += net.node(id).layer->type_name() == type;
  return n;
}

// The side of the map the head's global average pooling reads (the last such pooling: the
// squeeze-and-excitation blocks have their own).
int final_map_side(const Network& net) {
  for (int id = net.last(); id > 0; --id)
    if (net.node(id).layer->type_name() == "global_avgpool") {
      const Shape& s = net.node(net.node(id).inputs.at(0)).shape;
      CHECK(s[1] == s[2]);
      return s[1];
    }
  FAIL("no global average pooling");
  return 0;
}

int last_conv_channels(const Network& net) {
  for (int id = net.last(); id > 0; --id)
    if (net.node(id).layer->type_name() == "conv2d") return net.node(id).shape[0];
  return 0;
}

}  // namespace

TEST_CASE("every preset builds for 28x28 grey to 224x224 RGB and gives one value per class", "[presets]") {
  CHECK(classification_presets().size() + 1 == preset_names().size());
  for (const std::string& name : classification_presets())
    for (const Shape& input : kInputs) {
      INFO(name << " on " << input.str());
      const Network net = make_preset(name, input, 7);
      CHECK(net.output_shape() == Shape{7});
      CHECK(net.input_shape() == input);
    }
}

TEST_CASE("the presets size themselves from the input: the map the head pools", "[presets]") {
  // Up to 64 pixels a side a stride-1 stem and three halvings; above, the ImageNet stem and five.
  const std::vector<int> halved = {4, 4, 8, 7};
  for (const std::string& name : kSizedPresets)
    for (std::size_t i = 0; i < kInputs.size(); ++i) {
      INFO(name << " on " << kInputs[i].str());
      const int expected = name == "densenet" && i == 0 ? 3 : halved[i];  // 28 / 2 / 2 = 7, 7 / 2 = 3 (average pooling)
      CHECK(final_map_side(make_preset(name, kInputs[i], 10)) == expected);
    }
}

TEST_CASE("at 3x224x224 and 1000 classes the presets have torchvision's parameter counts", "[presets]") {
  const Shape imagenet{3, 224, 224};
  // torchvision 0.14's resnet18(), resnet34(), resnet50(), mobilenet_v2() and
  // mobilenet_v2(width_mult=0.5); the SE variant and the DenseNet as
  // benchmarks/peers/torch_presets_cpu.py --count-parameters builds them in PyTorch.
  CHECK(trainable_parameters(make_preset("resnet18", imagenet, 1000)) == 11'689'512);
  CHECK(trainable_parameters(make_preset("resnet34", imagenet, 1000)) == 21'797'672);
  CHECK(trainable_parameters(make_preset("resnet50", imagenet, 1000)) == 25'557'032);
  CHECK(trainable_parameters(make_preset("mobilenetv2", imagenet, 1000)) == 3'504'872);
  CHECK(trainable_parameters(make_preset("mobilenetv2-0.5", imagenet, 1000)) == 1'968'680);
  CHECK(trainable_parameters(make_preset("mobilenetv2-se", imagenet, 1000)) == 5'772'232);
  CHECK(trainable_parameters(make_preset("densenet", imagenet, 1000)) == 1'384'696);
  // The sizing changes the stem only: at 28x28 grey, resnet50 has 64 x 1 x 3 x 3 stem weights
  // where ImageNet's has 64 x 3 x 7 x 7; and 10 classes instead of 1000.
  CHECK(trainable_parameters(make_preset("resnet50", Shape{1, 28, 28}, 10)) ==
        25'557'032 - 64 * 3 * 49 + 64 * 9 - 990 * 2049);
  CHECK(trainable_parameters(make_preset("resnet18", Shape{1, 28, 28}, 10)) ==
        11'689'512 - 64 * 3 * 49 + 64 * 9 - 990 * 513);
}

TEST_CASE("at 3x224x224 and 1000 classes the presets have torchvision's multiply-adds", "[presets]") {
  const Shape imagenet{3, 224, 224};
  // The "GFLOPS" of torchvision's model tables (its weights' _ops: the multiply-adds of the
  // convolutions and linear layers), to the three decimals it gives.
  const auto giga = [&](const std::string& name) {
    return std::round(make_preset(name, imagenet, 1000).forward_multiply_adds() * 1e-6) / 1e3;
  };
  CHECK(giga("resnet18") == 1.814);
  CHECK(giga("resnet34") == 3.664);
  CHECK(giga("resnet50") == 4.089);
  CHECK(giga("mobilenetv2") == 0.301);
  // Exact: a 1x1 convolution's multiply-adds are its outputs times its input channels; a
  // depthwise 3x3's, its outputs times 9; a dense layer's, its inputs times its outputs.
  Network net(Shape{8, 10, 10});
  net.add(layers::conv2d(16, 1));
  net.add(layers::depthwise_conv2d(3, 2, 1));
  net.add(layers::flatten());
  net.add(layers::dense(5));
  CHECK(net.forward_multiply_adds() == 16.0 * 100 * 8 + 16.0 * 25 * 9 + 400.0 * 5);
  CHECK_THAT(net.summary(), Catch::Matchers::Contains("forward pass a sample: 0.018 M multiply-adds"));
}

TEST_CASE("the blocks are torchvision's: residual additions, squeeze-and-excitation, dense concatenations",
          "[presets]") {
  const Shape image{1, 28, 28};
  CHECK(count_of(make_preset("resnet34", image, 10), "add") == 16);
  CHECK(count_of(make_preset("resnet50", image, 10), "add") == 16);
  const Network mobilenet = make_preset("mobilenetv2", image, 10);
  CHECK(count_of(mobilenet, "add") == 10);  // stride 1 and the same channels in and out
  CHECK(count_of(mobilenet, "multiply") == 0);
  CHECK(count_of(make_preset("mobilenetv2-se", image, 10), "multiply") == 17);
  CHECK(count_of(make_preset("densenet", image, 10), "concat") == 6 + 12 + 24 + 16);
  // Width 0.5: channels halved and rounded to multiples of 8 (32 -> 16 in the stem), the last
  // conv still 1280 wide.
  const Network narrow = make_preset("mobilenetv2-0.5", image, 10);
  CHECK(narrow.node(1).shape[0] == 16);
  CHECK(last_conv_channels(narrow) == 1280);
}

TEST_CASE("an input too small for a preset's halvings is refused, naming the preset", "[presets]") {
  for (const std::string& name : classification_presets()) {
    // small, small-bn and resnet halve the map twice, the others three times.
    const int least = name == "small" || name == "small-bn" || name == "resnet" ? 4 : 8;
    INFO(name);
    CHECK(make_preset(name, Shape{1, least, least}, 10).output_shape() == Shape{10});
    const Shape too_small{1, least - 1, least + 1};
    CHECK_THROWS_AS(make_preset(name, too_small, 10), ShapeError);
    CHECK_THROWS_WITH(make_preset(name, too_small, 10),
                      Catch::Contains(name + " needs an input of at least " + std::to_string(least) + "x" +
                                      std::to_string(least) + " pixels") &&
                          Catch::Contains(too_small.str()));
  }
  for (const std::string& name : kSizedPresets) CHECK(final_map_side(make_preset(name, Shape{1, 8, 8}, 10)) == 1);
  CHECK_THROWS_WITH(make_preset("resnet50", Shape{784}, 10), Catch::Contains("CxHxW"));
}

TEST_CASE("every preset trains on the CPU with a finite, falling loss", "[presets][train]") {
  CpuBackend backend(2);
  for (const std::string& name : kSizedPresets) {
    INFO(name);
    const Shape image = name.rfind("resnet", 0) == 0 ? Shape{1, 16, 16} : Shape{3, 28, 28};
    Network net = make_preset(name, image, 4);
    TrainerOptions o;
    o.batch = 4;
    Trainer trainer(net, backend, memory::host_resource(), o);
    SyntheticData data(4, image, 4, 3);
    std::vector<double> losses;
    for (int step = 0; step < 3; ++step) {
      const StepReport r = trainer.train_step(data.batch(0, 4));
      CHECK(r.samples == 4);
      losses.push_back(r.loss);
    }
    for (double loss : losses) CHECK(std::isfinite(loss));
    CHECK(losses.back() < losses.front());
  }
}

TEST_CASE("the planner finds mobilenetv2's largest micro-batch at 28x28 in a small budget", "[presets][planner]") {
  CpuBackend backend(2);
  const Shape image{1, 28, 28};
  Network net = make_preset("mobilenetv2", image, 10);
  TrainerOptions o;
  o.batch = 32;
  const BatchPlanner probe(net, backend, planning_options(o, net, backend));
  o.memory_budget = probe.breakdown(12).total() + 1000;  // holds 12, not 13
  const BatchPlanner planner(net, backend, planning_options(o, net, backend));
  const int b = planner.largest_fitting(o.batch);
  INFO("largest micro-batch " << b);
  REQUIRE(b >= 12);
  REQUIRE(b < 16);
  CHECK(planner.breakdown(b + 1).total() > o.memory_budget);
  const int passes = (o.batch + b - 1) / b, even = (o.batch + passes - 1) / passes;
  CHECK(planner.choose() == even);

  memory::StatisticsAdaptor stats(memory::host_resource());
  memory::BudgetAdaptor capped(stats, o.memory_budget);
  Trainer trainer(net, backend, capped, o);
  CHECK(trainer.micro_batch() == even);
  CHECK(stats.statistics().current_bytes == planner.breakdown(even).total());
  SyntheticData data(o.batch, image, 10, 4);
  const StepReport r = trainer.train_step(data.batch(0, o.batch));
  CHECK(r.micro_batches == passes);
  CHECK(std::isfinite(r.loss));
  CHECK(stats.statistics().peak_bytes == planner.breakdown(even).total());
  CHECK(stats.statistics().peak_bytes <= o.memory_budget);
}
