#include "cnnengine/engine/layer.hpp"

namespace cnn {

std::string to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::conv2d: return "conv2d";
    case LayerKind::dense: return "dense";
    case LayerKind::relu: return "relu";
    case LayerKind::max_pool2d: return "maxpool2d";
    case LayerKind::average_pool2d: return "avgpool2d";
    case LayerKind::global_average_pool: return "global_avgpool";
    case LayerKind::batchnorm2d: return "batchnorm2d";
    case LayerKind::dropout: return "dropout";
    case LayerKind::add: return "add";
    case LayerKind::flatten: return "flatten";
    case LayerKind::custom: return "custom";
  }
  return "custom";
}

}  // namespace cnn
