// The built-in networks that --model names (make_preset), and the choice between a preset and a
// network text file (make_network). The larger presets follow torchvision's definitions and size
// themselves from the input: inputs larger than 64 pixels a side take the ImageNet stem, smaller
// ones a stride-1 3x3 stem and fewer halvings, so that 28x28 and 32x32 images keep a useful map.
// A preset name may carry options, `NAME:KEY=VALUE,...` (unet's depth and width).
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/models/network_text.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <optional>

#include <cnnengine/base/error.hpp>
#include "layers/add.hpp"
#include "layers/batchnorm2d.hpp"
#include <cnnengine/layers/builtin_layers.hpp>
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/flatten.hpp"
#include "layers/pool2d.hpp"
#include "layers/relu.hpp"

namespace cnn {
namespace {

// ---- Sizing from the input.

// Inputs larger than this a side take the ImageNet layout (a stem that quarters or halves the side).
constexpr int kLargestSmallImage = 64;

int smaller_side(const Shape& input) {
  if (input.rank != 3) throw ShapeError("a preset needs a CxHxW input, got " + input.str());
  return std::min(input[1], input[2]);
}

bool imagenet_layout(const Shape& input) { return smaller_side(input) > kLargestSmallImage; }

// A small-image layout that halves the map `halvings` times needs 2^halvings pixels a side to end
// on at least 1x1 from real halvings (the padded stride-2 layers would otherwise repeat a 1x1 map).
void require_side(const std::string& preset, const Shape& input, int halvings) {
  const int least = 1 << halvings;
  if (smaller_side(input) < least)
    throw ShapeError(preset + " needs an input of at least " + std::to_string(least) + "x" + std::to_string(least) +
                     " pixels (it halves the map " + std::to_string(halvings) + " times), got " + input.str());
}

// A bias-free convolution padded to keep the size (at stride 1), as every torchvision conv here.
int conv(Network& net, int in, int channels, int kernel, int stride = 1) {
  return net.add(layers::conv2d(channels, kernel, stride, kernel / 2, false), {in});
}

int conv_bn(Network& net, int in, int channels, int kernel, int stride = 1) {
  conv(net, in, channels, kernel, stride);
  return net.add(layers::batchnorm2d());
}

int conv_bn_relu(Network& net, int in, int channels, int kernel, int stride = 1) {
  conv_bn(net, in, channels, kernel, stride);
  return net.add(layers::relu());
}

// Global average pooling, flatten, [dropout], dense: the head of the torchvision-like presets.
void classifier(Network& net, int classes, float dropout = 0.f) {
  net.add(layers::global_avg_pool2d());
  net.add(layers::flatten());
  if (dropout > 0.f) net.add(layers::dropout(dropout));
  net.add(layers::dense(classes));
}

// ---- The first presets.

// Two conv-relu-maxpool stages (32 and 64 channels), dense 128, dense: two halvings.
Network small(const std::string& name, Shape input, int classes, bool batchnorm) {
  require_side(name, input, 2);
  Network net(input);
  for (int channels : {32, 64}) {
    net.emplace<Conv2D>(channels, 3, 1, 1, !batchnorm);
    if (batchnorm) net.emplace<BatchNorm2D>();
    net.emplace<ReLU>();
    net.emplace<Pool2D>(PoolMode::max, 2);
  }
  net.emplace<Flatten>();
  net.emplace<Dense>(128);
  net.emplace<ReLU>();
  if (batchnorm) net.emplace<Dropout>(0.3f);
  net.emplace<Dense>(classes);
  return net;
}

// ---- ResNets.

// conv-bn-relu, conv-bn, + shortcut (1x1 conv-bn when the shape changes), relu.
int basic_block(Network& net, int in, int channels, int stride) {
  const int in_channels = net.node(in).shape[0];
  net.add(std::make_unique<Conv2D>(channels, 3, stride, 1, false), {in});
  net.emplace<BatchNorm2D>();
  net.emplace<ReLU>();
  net.emplace<Conv2D>(channels, 3, 1, 1, false);
  const int branch = net.emplace<BatchNorm2D>();
  int shortcut = in;
  if (stride != 1 || in_channels != channels) {
    net.add(std::make_unique<Conv2D>(channels, 1, stride, 0, false), {in});
    shortcut = net.emplace<BatchNorm2D>();
  }
  net.add(std::make_unique<Add>(), {branch, shortcut});
  return net.emplace<ReLU>();
}

// torchvision's Bottleneck (ResNet v1.5: the stride on the 3x3): 1x1 conv to `width`, 3x3 conv,
// 1x1 conv to 4 x width, each with BN, + shortcut (1x1 conv-bn when the shape changes), relu.
int bottleneck_block(Network& net, int in, int width, int stride) {
  const int in_channels = net.node(in).shape[0], out_channels = 4 * width;
  conv_bn_relu(net, in, width, 1);
  conv_bn_relu(net, net.last(), width, 3, stride);
  const int branch = conv_bn(net, net.last(), out_channels, 1);
  int shortcut = in;
  if (stride != 1 || in_channels != out_channels) shortcut = conv_bn(net, in, out_channels, 1, stride);
  net.add(layers::add(), {branch, shortcut});
  return net.add(layers::relu());
}

// The small residual network for 28x28..32x32 images (resnet): a 3x3 stem and stages of basic
// blocks, whatever the input, which must hold a pixel per halving.
Network resnet(const std::string& name, Shape input, int classes, std::vector<int> widths, int blocks_per_stage) {
  require_side(name, input, static_cast<int>(widths.size()) - 1);
  Network net(input);
  net.emplace<Conv2D>(widths.front(), 3, 1, 1, false);
  net.emplace<BatchNorm2D>();
  int x = net.emplace<ReLU>();
  for (std::size_t stage = 0; stage < widths.size(); ++stage)
    for (int block = 0; block < blocks_per_stage; ++block)
      x = basic_block(net, x, widths[stage], stage > 0 && block == 0 ? 2 : 1);
  net.add(std::make_unique<Pool2D>(Pool2D::global_average()));
  net.emplace<Flatten>();
  net.emplace<Dense>(classes);
  return net;
}

// ResNet-18 and ResNet-34 (basic blocks) and ResNet-50 (bottlenecks), torchvision's: stages of
// 64..512 wide with `blocks` blocks each, the first block of stages 2..4 striding 2. Sizing: above 64 pixels a
// side the ImageNet stem (7x7 stride-2 conv-bn-relu, 3x3 stride-2 max pool: 224 ends on 7x7);
// up to 64 the CIFAR stem (3x3 stride-1 conv-bn-relu, no pool: 28 and 32 end on 4x4, 64 on 8x8),
// which needs 8x8 at least.
Network torchvision_resnet(const std::string& name, Shape input, int classes, std::array<int, 4> blocks,
                           bool bottleneck) {
  Network net(input);
  int x = 0;
  if (imagenet_layout(input)) {
    net.add(layers::conv2d(64, 7, 2, 3, false));
    net.add(layers::batchnorm2d());
    net.add(layers::relu());
    x = net.add(layers::max_pool2d(3, 2, 1));
  } else {
    require_side(name, input, 3);
    x = conv_bn_relu(net, 0, 64, 3);
  }
  for (int stage = 0; stage < 4; ++stage) {
    const int width = 64 << stage;
    for (int block = 0; block < blocks[stage]; ++block) {
      const int stride = stage > 0 && block == 0 ? 2 : 1;
      x = bottleneck ? bottleneck_block(net, x, width, stride) : basic_block(net, x, width, stride);
    }
  }
  classifier(net, classes);
  return net;
}

// ---- MobileNetV2.

// torchvision's _make_divisible: `v` rounded to the nearest multiple of `divisor` (at least
// `divisor`), never more than 10% below v.
int make_divisible(double v, int divisor = 8) {
  int rounded = std::max(divisor, static_cast<int>(v + divisor / 2.0) / divisor * divisor);
  if (rounded < 0.9 * v) rounded += divisor;
  return rounded;
}

// MobileNetV3's squeeze-and-excitation on `in` (C channels): global average, 1x1 conv to
// make_divisible(C / 4), relu, 1x1 conv back to C, hardsigmoid, times `in`.
int squeeze_excitation(Network& net, int in) {
  const int channels = net.node(in).shape[0];
  net.add(layers::global_avg_pool2d(), {in});
  net.add(layers::conv2d(make_divisible(channels / 4), 1));
  net.add(layers::relu());
  net.add(layers::conv2d(channels, 1));
  const int gate = net.add(layers::hardsigmoid());
  return net.add(layers::multiply(), {in, gate});
}

// torchvision's InvertedResidual: [1x1 expand conv-bn-relu6], 3x3 depthwise conv-bn-relu6,
// [squeeze-and-excitation], 1x1 project conv-bn, + the input when the stride is 1 and the
// channels stay.
int inverted_residual(Network& net, int in, int out_channels, int stride, int expansion, bool se) {
  const int in_channels = net.node(in).shape[0], hidden = in_channels * expansion;
  int x = in;
  if (expansion != 1) {
    conv_bn(net, x, hidden, 1);
    x = net.add(layers::relu6());
  }
  net.add(layers::depthwise_conv2d(3, stride, 1, 1, false), {x});
  net.add(layers::batchnorm2d());
  x = net.add(layers::relu6());
  if (se) x = squeeze_excitation(net, x);
  const int projected = conv_bn(net, x, out_channels, 1);
  if (stride != 1 || in_channels != out_channels) return projected;
  return net.add(layers::add(), {projected, in});
}

// MobileNetV2 (torchvision's), its channels scaled by `width` and rounded to multiples of 8, the
// last 1x1 conv 1280 x max(1, width) wide; dropout 0.2 before the dense layer. Sizing: above 64
// pixels a side torchvision's strides (a stride-2 stem, five halvings: 224 ends on 7x7); up to 64
// a stride-1 stem and the 24-channel stage at stride 1 too, three halvings (28 and 32 end on 4x4,
// 64 on 8x8), which needs 8x8 at least.
Network mobilenet_v2(const std::string& name, Shape input, int classes, double width, bool se) {
  struct Stage {
    int expansion, channels, blocks, stride;
  };
  const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  const bool large = imagenet_layout(input);
  if (!large) require_side(name, input, 3);
  Network net(input);
  conv_bn(net, 0, make_divisible(32 * width), 3, large ? 2 : 1);
  int x = net.add(layers::relu6());
  for (const Stage& s : stages) {
    const int stride = !large && s.channels == 24 ? 1 : s.stride;
    for (int block = 0; block < s.blocks; ++block)
      x = inverted_residual(net, x, make_divisible(s.channels * width), block == 0 ? stride : 1, s.expansion, se);
  }
  conv_bn(net, x, make_divisible(1280 * std::max(1.0, width)), 1);
  net.add(layers::relu6());
  classifier(net, classes, 0.2f);
  return net;
}

// ---- DenseNet-BC.

// A small DenseNet-BC (torchvision's layer order): growth rate 12, dense blocks of 6, 12, 24 and
// 16 bottleneck layers (BN-relu-conv1x1 to 48, BN-relu-conv3x3 to 12, concatenated after the
// layer's input), transitions BN-relu-conv1x1 to half the channels and 2x2 average pooling,
// then BN-relu and the head. DenseNet-121's depth at growth 12 instead of 32, 24 stem channels
// instead of 64: 0.43 G multiply-adds at 224x224 against its 2.9 G, 95 M at 28x28 (mobilenetv2
// 73 M), so that it trains on 28x28 images on two CPU cores about as fast as mobilenetv2.
// Sizing: above 64 pixels a side the ImageNet stem (7x7 stride-2 conv to 24 channels,
// BN-relu, 3x3 stride-2 max pool: 224 ends on 7x7); up to 64 the CIFAR stem (3x3 stride-1 conv
// to 24 channels) and the three transitions' halvings alone (28 ends on 3x3, 32 on 4x4, 64 on
// 8x8), which need 8x8 at least.
Network densenet(const std::string& name, Shape input, int classes) {
  constexpr int kGrowth = 12, kBottleneck = 4 * kGrowth;
  const int blocks[] = {6, 12, 24, 16};
  Network net(input);
  int x = 0;
  if (imagenet_layout(input)) {
    conv_bn_relu(net, 0, 2 * kGrowth, 7, 2);
    x = net.add(layers::max_pool2d(3, 2, 1));
  } else {
    require_side(name, input, 3);
    x = conv(net, 0, 2 * kGrowth, 3);
  }
  for (int b = 0; b < 4; ++b) {
    for (int layer = 0; layer < blocks[b]; ++layer) {
      net.add(layers::batchnorm2d(), {x});
      net.add(layers::relu());
      conv(net, net.last(), kBottleneck, 1);
      net.add(layers::batchnorm2d());
      net.add(layers::relu());
      const int grown = conv(net, net.last(), kGrowth, 3);
      x = net.add(layers::concat(), {x, grown});
    }
    if (b < 3) {
      const int channels = net.node(x).shape[0];
      net.add(layers::batchnorm2d(), {x});
      net.add(layers::relu());
      conv(net, net.last(), channels / 2, 1);
      x = net.add(layers::avg_pool2d(2));
    }
  }
  net.add(layers::batchnorm2d(), {x});
  net.add(layers::relu());
  classifier(net, classes);
  return net;
}

// ---- U-Net.

struct UnetOptions {
  std::optional<int> depth;  // none: as the input allows (unet_depth)
  int width = 32;
};

constexpr int kUnetDefaultDepth = 4, kUnetMaxDepth = 16;  // 2^16: the largest side an input may have

// min(4, the most halvings both sides divide by), at least 1 (which an odd side then refuses).
int unet_depth(const Shape& input) {
  int depth = 0;
  while (depth < kUnetDefaultDepth && input[1] % (2 << depth) == 0 && input[2] % (2 << depth) == 0) ++depth;
  return std::max(depth, 1);
}

// Ronneberger's double convolution as U-Nets are written today: twice a padded 3x3
// conv-bn-relu, so that the map keeps its size.
int double_conv(Network& net, int in, int channels) {
  conv_bn_relu(net, in, channels, 3);
  return conv_bn_relu(net, net.last(), channels, 3);
}

// A U-Net (Ronneberger et al. 2015, in the common form of milesial's Pytorch-UNet with
// bilinear=False): `depth` stages down, each a double convolution and a 2x2 max pooling, the
// channels doubling from `width`; a double convolution at the bottom; `depth` stages up, each a
// 2x2 stride-2 transposed convolution (with bias) to half the channels, concatenated after the
// skip of its level, and a double convolution; a 1x1 convolution (with bias) to `classes`. The
// output is [classes, H, W] at the input's H x W, which 2^depth must divide.
Network unet(const std::string& name, Shape input, int classes, const UnetOptions& o) {
  smaller_side(input);  // a CxHxW input
  const int depth = o.depth.value_or(unet_depth(input));
  const int scale = 1 << depth;
  if (input[1] % scale != 0 || input[2] % scale != 0)
    throw ShapeError(name + " halves the map " + std::to_string(depth) + " times: its input's height and width must " +
                     "be multiples of " + std::to_string(scale) + ", got " + input.str() +
                     (o.depth ? " (choose another depth=)" : ""));
  if ((std::int64_t{o.width} << depth) > kMaxInputSide)
    throw ConfigError(name + ": width " + std::to_string(o.width) + " doubled at each of " + std::to_string(depth) +
                      " halvings is " + std::to_string(std::int64_t{o.width} << depth) + " channels, over " +
                      std::to_string(kMaxInputSide));
  Network net(input);
  std::vector<int> skips;
  int x = 0;
  for (int level = 0; level < depth; ++level) {
    skips.push_back(double_conv(net, x, o.width << level));
    x = net.add(layers::max_pool2d(2));
  }
  x = double_conv(net, x, o.width << depth);
  for (int level = depth - 1; level >= 0; --level) {
    const int up = net.add(layers::conv_transpose2d(o.width << level, 2, 2), {x});
    net.add(layers::concat(), {skips[static_cast<std::size_t>(level)], up});
    x = double_conv(net, net.last(), o.width << level);
  }
  net.add(layers::conv2d(classes, 1), {x});
  return net;
}

// ---- Names and their options.

// "NAME" or "NAME:KEY=VALUE,...": the name, and the options' text (none without a colon).
struct PresetName {
  std::string name;
  std::optional<std::string> options;
};

PresetName split_preset_name(const std::string& model) {
  const std::size_t colon = model.find(':');
  if (colon == std::string::npos) return {model, std::nullopt};
  return {model.substr(0, colon), model.substr(colon + 1)};
}

bool known_preset(const std::string& name) {
  const std::vector<std::string> names = preset_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// One option's value: a whole number from `least` to `most`.
int option_number(const std::string& model, const std::string& key, const std::string& value, int least, int most) {
  int n = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), n);
  const bool whole = error != std::errc::invalid_argument && end == value.data() + value.size();
  if (value.empty() || !whole)
    throw ConfigError("model " + model + ": " + key + "='" + value + "' is not a whole number");
  if (error == std::errc::result_out_of_range || n < least || n > most)
    throw ConfigError("model " + model + ": " + key + "=" + value + " is out of range (" + std::to_string(least) +
                      " to " + std::to_string(most) + ")");
  return n;
}

UnetOptions parse_unet_options(const std::string& model, const std::string& text) {
  UnetOptions o;
  if (text.empty()) throw ConfigError("model " + model + ": no options after the ':' (unet:depth=D,width=W)");
  bool width_given = false;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, comma - begin);
    const std::size_t equals = item.find('=');
    const std::string key = item.substr(0, equals);
    if (equals == std::string::npos)
      throw ConfigError("model " + model + ": the option '" + item + "' is not KEY=VALUE (unet:depth=D,width=W)");
    const std::string value = item.substr(equals + 1);
    if (key == "depth") {
      if (o.depth) throw ConfigError("model " + model + ": depth is given twice");
      o.depth = option_number(model, key, value, 1, kUnetMaxDepth);
    } else if (key == "width") {
      if (width_given) throw ConfigError("model " + model + ": width is given twice");
      o.width = option_number(model, key, value, 1, kMaxInputSide);
      width_given = true;
    } else {
      throw ConfigError("model " + model + ": unknown option '" + key + "' (unet takes depth=D and width=W)");
    }
    begin = comma + 1;
  }
  return o;
}

[[noreturn]] void unknown_model(const std::string& model) {
  std::string names;
  for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw ConfigError("unknown model '" + model + "': use a preset (" + names + ") or a network file");
}

}  // namespace

std::vector<std::string> preset_names() {
  return {"small",       "small-bn",        "resnet",         "resnet18", "resnet34", "resnet50",
          "mobilenetv2", "mobilenetv2-0.5", "mobilenetv2-se", "densenet", "unet"};
}

std::vector<std::string> preset_usages() {
  return {
      "small: two conv-relu-maxpool stages and dense 128",
      "small-bn: small with BatchNorm and dropout",
      "resnet: a small residual network for 28x28 to 32x32 images",
      "resnet18, resnet34, resnet50: torchvision's ResNets, sized from the input",
      "mobilenetv2, mobilenetv2-0.5, mobilenetv2-se: torchvision's MobileNetV2 (at half width; with "
      "squeeze-and-excitation), sized from the input",
      "densenet: a small DenseNet-BC (growth 12)",
      "unet[:depth=D,width=W]: a U-Net for segmentation, [classes, H, W] out; D halvings (default: as many as the "
      "input's sides divide by, up to 4), W channels in the first stage (default 32), doubling at each",
  };
}

Network make_preset(const std::string& model, Shape input, int classes) {
  const auto [name, options] = split_preset_name(model);
  if (!known_preset(name)) unknown_model(model);
  if (name == "unet") return unet(model, input, classes, options ? parse_unet_options(model, *options) : UnetOptions{});
  if (options) throw ConfigError("model " + model + ": the preset " + name + " takes no options");
  if (name == "small") return small(name, input, classes, false);
  if (name == "small-bn") return small(name, input, classes, true);
  if (name == "resnet") return resnet(name, input, classes, {16, 32, 64}, 2);
  if (name == "resnet18") return torchvision_resnet(name, input, classes, {2, 2, 2, 2}, false);
  if (name == "resnet34") return torchvision_resnet(name, input, classes, {3, 4, 6, 3}, false);
  if (name == "resnet50") return torchvision_resnet(name, input, classes, {3, 4, 6, 3}, true);
  if (name == "mobilenetv2") return mobilenet_v2(name, input, classes, 1.0, false);
  if (name == "mobilenetv2-0.5") return mobilenet_v2(name, input, classes, 0.5, false);
  if (name == "mobilenetv2-se") return mobilenet_v2(name, input, classes, 1.0, true);
  return densenet(name, input, classes);
}

Network make_network(const std::string& model, Shape input, int classes) {
  for (const auto& name : preset_names())
    if (model == name) return make_preset(model, input, classes);
  // Anything at that path, a broken link or a loop of links included, is read as a file, whose
  // reading says what is wrong with it.
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool something_there = fs::symlink_status(model, ec).type() != fs::file_type::not_found;
  if ((something_there && !ec) || model.find('/') != std::string::npos) return load_network_file(model, input, classes);
  return make_preset(model, input, classes);  // a preset with options, or an error listing the presets
}

}  // namespace cnn
