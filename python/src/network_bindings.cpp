// Network, its text form and presets, and the built-in layers' builders (cnnengine.layers), with
// the C++ names, arguments and defaults (layers/builtin_layers.hpp).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/layer.hpp>
#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/models/network_text.hpp>
#include "bindings.hpp"
#include "network_copy.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace cnn::python {
namespace {

// A layer made by a builder, until a network takes it (add moves it in: a layer is in one network).
struct LayerHolder {
  std::unique_ptr<Layer> layer;
  std::string describe;
};

// A Python float's value as the layers take it (the builders take doubles, so that help() shows
// the defaults as written: 0.1, not 0.10000000149011612).
float as_float(double value) { return static_cast<float>(value); }

LayerHolder hold(std::unique_ptr<Layer> layer) {
  std::string describe = layer->describe();
  return LayerHolder{std::move(layer), std::move(describe)};
}

std::vector<int> shape_list(const Shape& s) {
  std::vector<int> dims;
  for (int i = 0; i < s.rank; ++i) dims.push_back(s[i]);
  return dims;
}

void bind_layers(nb::module_& m) {
  nb::module_ l = m.def_submodule("layers", "The built-in layers, PyTorch's definitions.");
  nb::class_<LayerHolder>(l, "Layer", "A layer made by a builder of cnnengine.layers, until Network.add takes it.")
      .def("__repr__", [](const LayerHolder& h) {
        return "<cnnengine layer " + h.describe + (h.layer ? "" : " (added to a network)") + ">";
      });
  l.def("conv2d",
        [](int out_channels, int kernel, int stride, int padding, int dilation, int groups, bool bias) {
          return hold(layers::conv2d(out_channels, kernel,
                                     layers::ConvOptions{stride, padding, dilation, groups, bias}));
        },
        "out_channels"_a, "kernel"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "groups"_a = 1,
        "bias"_a = true,
        "2-D convolution of square kernels (PyTorch's Conv2d), the input zero-padded by `padding` on each side.");
  l.def("depthwise_conv2d",
        [](int kernel, int stride, int padding, int dilation, bool bias) {
          return hold(layers::depthwise_conv2d(kernel, stride, padding, dilation, bias));
        },
        "kernel"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "bias"_a = true,
        "One kernel x kernel filter per channel (groups = channels).");
  l.def("conv_transpose2d",
        [](int out_channels, int kernel, int stride, int padding, int output_padding, bool bias) {
          return hold(layers::conv_transpose2d(out_channels, kernel, stride, padding, output_padding, bias));
        },
        "out_channels"_a, "kernel"_a, "stride"_a = 1, "padding"_a = 0, "output_padding"_a = 0, "bias"_a = true,
        "Transposed convolution (PyTorch's ConvTranspose2d).");
  l.def("dense", [](int units, bool bias) { return hold(layers::dense(units, bias)); }, "units"_a, "bias"_a = true,
        "Fully connected over a flat input (Keras's Dense, PyTorch's Linear).");
  l.def("relu", [] { return hold(layers::relu()); }, "max(x, 0).");
  l.def("leaky_relu", [](double slope) { return hold(layers::leaky_relu(as_float(slope))); },
        "slope"_a = 0.01,
        "x where positive, slope x elsewhere.");
  l.def("relu6", [] { return hold(layers::relu6()); }, "min(max(x, 0), 6).");
  l.def("sigmoid", [] { return hold(layers::sigmoid()); }, "1 / (1 + exp(-x)).");
  l.def("tanh", [] { return hold(layers::tanh()); }, "tanh(x).");
  l.def("silu", [] { return hold(layers::silu()); }, "x sigmoid(x).");
  l.def("gelu", [] { return hold(layers::gelu()); }, "x Phi(x), the exact (erf) form.");
  l.def("hardswish", [] { return hold(layers::hardswish()); }, "x relu6(x + 3) / 6.");
  l.def("hardsigmoid", [] { return hold(layers::hardsigmoid()); }, "relu6(x + 3) / 6.");
  l.def("max_pool2d",
        [](int window, int stride, int padding, bool ceil_mode) {
          return hold(layers::max_pool2d(window, stride, padding, ceil_mode));
        },
        "window"_a, "stride"_a = 0, "padding"_a = 0, "ceil_mode"_a = false,
        "Max pooling over window x window (stride 0: the window).");
  l.def("avg_pool2d",
        [](int window, int stride, int padding, bool ceil_mode) {
          return hold(layers::avg_pool2d(window, stride, padding, ceil_mode));
        },
        "window"_a, "stride"_a = 0, "padding"_a = 0, "ceil_mode"_a = false,
        "Average pooling over window x window, padding left out of the count.");
  l.def("global_avg_pool2d", [] { return hold(layers::global_avg_pool2d()); }, "The mean of each channel.");
  l.def("global_max_pool2d", [] { return hold(layers::global_max_pool2d()); }, "The largest value of each channel.");
  l.def("upsample",
        [](int factor, const std::string& mode) {
          if (mode != "nearest" && mode != "bilinear")
            throw ConfigError("upsample: mode '" + mode + "' (nearest or bilinear)");
          return hold(layers::upsample(factor, mode == "nearest" ? UpsampleMode::nearest : UpsampleMode::bilinear));
        },
        "factor"_a, "mode"_a = "nearest", "Each pixel factor x factor times, or bilinear (align_corners=False).");
  l.def("pad",
        [](int left, int right, int top, int bottom, double value) {
          return hold(layers::pad(left, right, top, bottom, as_float(value)));
        },
        "left"_a, "right"_a, "top"_a, "bottom"_a, "value"_a = 0.0,
        "PyTorch's nn.ConstantPad2d((left, right, top, bottom), value).");
  l.def("batchnorm2d",
        [](double momentum, double epsilon) {
          return hold(layers::batchnorm2d(as_float(momentum), as_float(epsilon)));
        },
        "momentum"_a = 0.1, "epsilon"_a = 1e-5, "Batch normalisation of each channel (PyTorch's BatchNorm2d).");
  l.def("group_norm",
        [](int groups, double epsilon) { return hold(layers::group_norm(groups, as_float(epsilon))); },
        "groups"_a, "epsilon"_a = 1e-5, "Group normalisation (PyTorch's GroupNorm).");
  l.def("layer_norm", [](double epsilon) { return hold(layers::layer_norm(as_float(epsilon))); },
        "epsilon"_a = 1e-5,
        "Normalisation over C, H and W of each sample (PyTorch's LayerNorm([C, H, W])).");
  l.def("dropout", [](double p) { return hold(layers::dropout(as_float(p))); }, "p"_a,
        "Zeroes each element with probability p while training, scaling the rest by 1 / (1 - p).");
  l.def("flatten", [] { return hold(layers::flatten()); }, "C x H x W to C * H * W.");
  l.def("add", [] { return hold(layers::add()); }, "The element-wise sum of two inputs (a residual connection).");
  l.def("concat", [] { return hold(layers::concat()); }, "The channels of every input, in order.");
  l.def("multiply", [] { return hold(layers::multiply()); },
        "The element-wise product of two inputs; the second may be C x 1 x 1 (a gate).");
}

Shape input_shape_of(const std::vector<int>& dims) {
  if (dims.size() != 3)
    throw ShapeError("input_shape: " + std::to_string(dims.size()) + " numbers; give (channels, height, width)");
  return Shape{dims[0], dims[1], dims[2]};
}

}  // namespace

void bind_network(nb::module_& m) {
  bind_layers(m);
  nb::class_<Network>(m, "Network", "A graph of layers in the order they run; node 0 is the input.")
      .def("__init__", [](Network* n, const std::vector<int>& input_shape) {
             new (n) Network(checked_input(input_shape_of(input_shape)));
           },
           "input_shape"_a, "An empty network on samples of input_shape (channels, height, width).")
      .def_static("from_text",
                  [](const std::string& text, const std::vector<int>& input_shape, int classes) {
                    return parse_network(text, checked_input(input_shape_of(input_shape)), classes, "<text>");
                  },
                  "text"_a, "input_shape"_a, "classes"_a = 0,
                  "A network from its text form (one layer a line, as train_images --model FILE reads it).")
      .def_static("preset",
                  [](const std::string& name, const std::vector<int>& input_shape, int classes) {
                    return make_preset(name, checked_input(input_shape_of(input_shape)), classes);
                  },
                  "name"_a, "input_shape"_a, "classes"_a,
                  "A built-in network (preset_names(): small, resnet18, resnet50, mobilenetv2, unet, ...) for "
                  "samples of input_shape (channels, height, width) and `classes` outputs; a name may carry options "
                  "(\"unet:depth=3,width=16\").")
      .def(
          "add",
          [](Network& n, LayerHolder& layer, std::optional<std::vector<int>> inputs) {
            if (!layer.layer) throw ConfigError(layer.describe + ": this layer is in a network already; make another");
            const int id = n.add(std::move(layer.layer), inputs.value_or(std::vector<int>{}));
            return id;
          },
          "layer"_a, "inputs"_a = nb::none(),
          "Appends `layer` reading the nodes `inputs` (default: the last); returns the new node's number.")
      .def(
          "summary",
          [](const Network& n, nb::object print_fn) {
            std::string text = n.summary();
            while (!text.empty() && text.back() == '\n') text.pop_back();
            print_fn(text);
          },
          "print_fn"_a = nb::module_::import_("builtins").attr("print"),
          "Prints the network, Keras's way: a line a layer (its output shape and parameters), then the "
          "trainable parameters and the multiply-adds of a sample's forward pass.")
      .def("summary_text", &Network::summary, "The summary as a text.")
      .def("text", [](const Network& n) { return network_text(n); }, "The network's text form.")
      .def("freeze_through", &Network::freeze_through, "node"_a,
           "Freezes nodes 1 to `node` (0: none), as requires_grad=False and eval() on a backbone.")
      .def_prop_ro("frozen_through", &Network::frozen_through)
      .def_prop_ro("head", &Network::head, "The last node with parameters.")
      .def_prop_ro("input_shape", [](const Network& n) { return shape_list(n.input_shape()); })
      .def_prop_ro("output_shape", [](const Network& n) { return shape_list(n.output_shape()); })
      .def_prop_ro("num_classes", &Network::num_classes)
      .def_prop_ro("last", &Network::last, "The last node's number.")
      .def_prop_ro("forward_multiply_adds", &Network::forward_multiply_adds, "Of one sample's forward pass.")
      .def("__len__", &Network::size)
      .def(
          "node_shape",
          [](const Network& n, int id) {
            if (id < 0 || id >= n.size())
              throw ConfigError("node " + std::to_string(id) + ": the network's nodes are 0 to " +
                                std::to_string(n.last()));
            return shape_list(n.node(id).shape);
          },
          "node"_a, "The output shape of node `node` (0: the input).");
  m.def("preset_names", &preset_names);
  m.def("preset_usages", &preset_usages);
}

}  // namespace cnn::python
