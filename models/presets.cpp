#include "models/network_text.hpp"

#include <filesystem>

#include "base/error.hpp"
#include "layers/add.hpp"
#include "layers/batchnorm2d.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/flatten.hpp"
#include "layers/pool2d.hpp"
#include "layers/relu.hpp"

namespace cnn {
namespace {

Network small(Shape input, int classes, bool batchnorm) {
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

Network resnet(Shape input, int classes, std::vector<int> widths, int blocks_per_stage) {
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

}  // namespace

std::vector<std::string> preset_names() { return {"small", "small-bn", "resnet", "resnet18"}; }

Network make_preset(const std::string& name, Shape input, int classes) {
  if (name == "small") return small(input, classes, false);
  if (name == "small-bn") return small(input, classes, true);
  if (name == "resnet") return resnet(input, classes, {16, 32, 64}, 2);
  if (name == "resnet18") return resnet(input, classes, {64, 128, 256, 512}, 2);
  std::string names;
  for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw ConfigError("unknown model '" + name + "': use a preset (" + names + ") or a network file");
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
  return make_preset(model, input, classes);  // throws with the list of presets
}

}  // namespace cnn
