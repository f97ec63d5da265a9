#pragma once
// Built-in networks and the plain-text network description.
//
// Text format: one layer per line, '#' starts a comment. Words:
//   conv OUT KERNEL [stride=S] [pad=P] [bias=0]     relu        flatten
//   maxpool WINDOW [stride=S] [pad=P]               avgpool WINDOW [stride=S] [pad=P]
//   globalavgpool     batchnorm     dropout P       dense UNITS
//   add NAME                                        (adds the named output to the previous one)
// Any line may end with `as=NAME` (names its output) and `in=NAME` (reads NAME instead of the
// previous line; `input` is the network input). Errors name the file and line.
#include <filesystem>
#include <string>
#include <vector>

#include "engine/network.hpp"

namespace cnn {

// small, small-bn, resnet (small residual network for 28x28..32x32), resnet18 (CIFAR-style).
Network make_preset(const std::string& name, Shape input, int classes);
std::vector<std::string> preset_names();

Network parse_network(const std::string& text, Shape input, int classes, const std::string& source = "<text>");
Network load_network_file(const std::filesystem::path& path, Shape input, int classes);

// A preset name or a path to a text description.
Network make_network(const std::string& model, Shape input, int classes);

}  // namespace cnn
