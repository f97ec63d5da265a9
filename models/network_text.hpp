#pragma once
// The plain-text network description. One layer per line, '#' starts a comment. A line is a
// layer's word, its arguments and its key=value options, as that layer's type reads them: every
// type is listed in layers/registry.cpp, and layer_usages() (layers/registry.hpp) gives one usage
// line per word ("conv OUT KERNEL [stride=S] [pad=P] [bias=0|1]", "add NAME", ...); an unknown
// word's error lists the known ones. Any line may also end with `as=NAME` (names its output) and
// `in=NAME` (reads NAME instead of the previous line; `input` is the network input). An unknown
// or repeated option, an empty or reused name is an error; every error names the file and line.
// A layer of one's own is read and written too once its type is given to register_layer_type.
// Below, the built-in networks (make_preset) and the choice between one and a file (make_network).
#include <filesystem>
#include <string>
#include <vector>

#include <cnnengine/engine/core/network.hpp>

namespace cnn {

// What a network text may ask for, so that a hostile file (a checkpoint's text included) is
// refused before anything is planned: layers, bytes of text, and the input's size.
inline constexpr int kMaxNetworkLayers = 100000;
inline constexpr std::size_t kMaxNetworkTextBytes = std::size_t{16} << 20;
inline constexpr int kMaxInputSide = 1 << 16;                  // channels, height or width
inline constexpr std::size_t kMaxInputElements = std::size_t{1} << 28;  // one sample: 1 GiB of floats

// `classes` must be the network's output count, or its output's channels where it gives a class
// score a pixel ([classes, H, W] at the input's H x W: a segmentation); a ShapeError otherwise; 0
// takes it as it is.
Network parse_network(const std::string& text, Shape input, int classes, const std::string& source = "<text>");
// Reads a regular file only (a FIFO or a device would block or never end).
Network load_network_file(const std::filesystem::path& path, Shape input, int classes);

// The text form of a network, such that parse_network(network_text(n), ...) builds the same
// layers, in the same order, on the same inputs (a saved file holds it). A layer of one's own
// whose type was not registered has none: a ConfigError naming it.
std::string network_text(const Network& network);

// ---- Built-in networks, and the choice between them and a network text file.

// small, small-bn, resnet (small residual network for 28x28..32x32), resnet18 (CIFAR-style),
// resnet34, resnet50, mobilenetv2, mobilenetv2-0.5, mobilenetv2-se, densenet (torchvision's
// blocks, sized from the input; [classes] out) and unet ([classes, H, W] out, for segmentation:
// models/presets.cpp). A name may carry options, `NAME:KEY=VALUE,...`: unet takes
// `unet:depth=D,width=W` (either key alone too; D halvings, by default as many as both sides
// divide by up to 4; W channels in the first stage, default 32). An unknown name or option, a
// value that is not a whole number in range, or options for a preset that takes none are a
// ConfigError naming it; an input the preset cannot take (a side too small, or for unet not a
// multiple of 2^D) a ShapeError naming the input.
Network make_preset(const std::string& name, Shape input, int classes);
// The names alone ("unet"), and one line per preset saying what it is, options included (for a --help).
std::vector<std::string> preset_names();
std::vector<std::string> preset_usages();

// A preset name (with its options) or a path to a text description. A file at that path is read
// unless the name is a preset's alone.
Network make_network(const std::string& model, Shape input, int classes);

}  // namespace cnn
