// network_text: the inverse of parse_network, for the file a checkpoint holds.
#include <charconv>
#include <set>
#include <sstream>

#include "base/error.hpp"
#include "layers/batchnorm2d.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/pool2d.hpp"
#include "models/network_text.hpp"

namespace cnn {
namespace {

// The shortest text that reads back as the same float.
std::string exact(float value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return std::string(text, end);
}

std::string name_of(int id) { return id == 0 ? "input" : "n" + std::to_string(id); }

// The layer's word and arguments, without as= and in=.
std::string layer_words(const Node& node) {
  const Layer& layer = *node.layer;
  switch (layer.kind()) {
    case LayerKind::conv2d: {
      const auto& conv = static_cast<const Conv2D&>(layer);
      const Conv2dDesc& d = conv.desc();
      std::string words = "conv " + std::to_string(d.out_channels) + " " + std::to_string(d.kernel_h);
      if (d.stride != 1) words += " stride=" + std::to_string(d.stride);
      if (d.padding != 0) words += " pad=" + std::to_string(d.padding);
      return words + (conv.has_bias() ? "" : " bias=0");
    }
    case LayerKind::dense: {
      const auto& dense = static_cast<const Dense&>(layer);
      return "dense " + std::to_string(dense.units()) + (dense.has_bias() ? "" : " bias=0");
    }
    case LayerKind::max_pool2d:
    case LayerKind::average_pool2d: {
      const Pool2dDesc& d = static_cast<const Pool2D&>(layer).desc();
      std::string words = std::string(d.mode == PoolMode::max ? "maxpool " : "avgpool ") + std::to_string(d.window_h);
      if (d.stride_h != d.window_h) words += " stride=" + std::to_string(d.stride_h);
      if (d.pad_h != 0) words += " pad=" + std::to_string(d.pad_h);
      return words;
    }
    case LayerKind::global_average_pool: return "globalavgpool";
    case LayerKind::batchnorm2d: {
      const auto& bn = static_cast<const BatchNorm2D&>(layer);
      std::string words = "batchnorm";
      if (bn.momentum() != 0.1f) words += " momentum=" + exact(bn.momentum());
      if (bn.epsilon() != 1e-5f) words += " eps=" + exact(bn.epsilon());
      return words;
    }
    case LayerKind::dropout: return "dropout " + exact(static_cast<const Dropout&>(layer).p());
    case LayerKind::relu: return "relu";
    case LayerKind::flatten: return "flatten";
    case LayerKind::add: return "add " + name_of(node.inputs[1]);
    case LayerKind::custom: break;
  }
  throw ConfigError("layer " + node.name + " (" + layer.describe() + ") has no text form: only the built-in layers can be saved");
}

}  // namespace

std::string network_text(const Network& network) {
  // Outputs read by another than the next line are named after their node.
  std::set<int> named;
  for (int id = 1; id < network.size(); ++id) {
    const Node& node = network.node(id);
    for (std::size_t k = 0; k < node.inputs.size(); ++k)
      if (node.inputs[k] != id - 1 || k > 0) named.insert(node.inputs[k]);
  }
  std::ostringstream text;
  for (int id = 1; id < network.size(); ++id) {
    const Node& node = network.node(id);
    text << layer_words(node);
    if (node.inputs[0] != id - 1) text << " in=" << name_of(node.inputs[0]);
    if (named.count(id)) text << " as=" << name_of(id);
    text << "\n";
  }
  return text.str();
}

}  // namespace cnn
