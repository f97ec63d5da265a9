#pragma once
// Built-in networks, and the choice between them and a network text file (network_text.hpp).
#include <string>
#include <vector>

#include "engine/core/network.hpp"
#include "models/network_text.hpp"

namespace cnn {

// small, small-bn, resnet (small residual network for 28x28..32x32), resnet18 (CIFAR-style).
Network make_preset(const std::string& name, Shape input, int classes);
std::vector<std::string> preset_names();

// A preset name or a path to a text description.
Network make_network(const std::string& model, Shape input, int classes);

}  // namespace cnn
