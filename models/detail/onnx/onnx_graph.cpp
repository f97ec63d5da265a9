#include "models/detail/onnx/onnx_graph.hpp"

#include <bit>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "layers/batchnorm2d.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/pool2d.hpp"
#include "models/onnx_export.hpp"

namespace cnn {
namespace {

// Initializers are written as raw_data, which ONNX defines as little-endian.
static_assert(std::endian::native == std::endian::little);

void set_ints(onnx::NodeProto& node, const char* name, std::initializer_list<int> values) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int v : values) a->add_ints(v);
}

void set_int(onnx::NodeProto& node, const char* name, int value) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void set_float(onnx::NodeProto& node, const char* name, float value) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

// A float tensor of `per_sample` shape with a symbolic batch dimension in front.
void describe_value(onnx::ValueInfoProto& value, const std::string& name, const Shape& per_sample) {
  value.set_name(name);
  auto* type = value.mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = type->mutable_shape();
  shape->add_dim()->set_dim_param("N");
  for (int i = 0; i < per_sample.rank; ++i) shape->add_dim()->set_dim_value(per_sample[i]);
}

Shape flattened(const Shape& per_sample) { return Shape{static_cast<int>(per_sample.elements())}; }

class GraphWriter {
 public:
  GraphWriter(onnx::GraphProto& graph, const Network& network, const ParameterStore& params)
      : graph_(graph), network_(network), params_(params), values_(static_cast<std::size_t>(network.size())) {}

  void write(bool probabilities) {
    check_exportable();
    describe_value(*graph_.add_input(), kOnnxInputName, network_.input_shape());
    values_[0] = kOnnxInputName;
    const int last = network_.last();
    for (int id = 1; id <= last; ++id)
      layer(id, id == last && network_.node(id).shape.rank == 1 ? kOnnxLogitsName : value_name(id));
    if (value(last) != kOnnxLogitsName) add_node("Flatten", "logits_flatten", {value(last)}, kOnnxLogitsName);
    const Shape classes{network_.num_classes()};
    describe_value(*graph_.add_output(), kOnnxLogitsName, classes);
    if (probabilities) {
      set_int(add_node("Softmax", "softmax", {kOnnxLogitsName}, kOnnxProbabilitiesName), "axis", 1);
      describe_value(*graph_.add_output(), kOnnxProbabilitiesName, classes);
    }
  }

 private:
  void check_exportable() const {
    if (network_.size() < 2) throw ConfigError("ONNX export: the network has no layers");
    for (int id = 1; id < network_.size(); ++id) {
      const Node& n = network_.node(id);
      if (n.layer->kind() == LayerKind::custom)
        throw ConfigError("ONNX export: layer " + n.name + " is a layer of one's own (" + n.layer->type_name() +
                          "): ONNX has no operator for it");
    }
  }

  // Writes node `id`'s nodes, its output into `output` (or, for a layer that passes its input
  // through, nothing: its value is its input's, unless `output` is the graph's output).
  void layer(int id, const std::string& output) {
    const Node& n = network_.node(id);
    const std::string name = value_name(id);
    const std::string& in = value(n.inputs.at(0));
    const Shape& in_shape = network_.node(n.inputs[0]).shape;
    switch (n.layer->kind()) {
      case LayerKind::conv2d: conv(id, output); break;
      case LayerKind::dense: dense(id, output); break;
      case LayerKind::relu: add_node("Relu", name, {in}, output, n.shape); break;
      case LayerKind::max_pool2d:
      case LayerKind::average_pool2d: pool(id, output); break;
      case LayerKind::global_average_pool: add_node("GlobalAveragePool", name, {in}, output, n.shape); break;
      case LayerKind::batchnorm2d: batchnorm(id, output); break;
      case LayerKind::add: add_node("Add", name, {in, value(n.inputs.at(1))}, output, n.shape); break;
      case LayerKind::dropout: pass_through(id, output); break;  // inference: the identity
      case LayerKind::flatten:
        if (in_shape.rank == 1) {
          pass_through(id, output);
        } else {
          set_int(add_node("Flatten", name, {in}, output, n.shape), "axis", 1);
        }
        break;
      case LayerKind::custom: throw std::logic_error("ONNX export: custom layers are refused before");
    }
    if (values_[static_cast<std::size_t>(id)].empty()) values_[static_cast<std::size_t>(id)] = output;
  }

  void pass_through(int id, const std::string& output) {
    const Node& n = network_.node(id);
    if (output == kOnnxLogitsName) {
      add_node("Identity", value_name(id), {value(n.inputs.at(0))}, output);
    } else {
      values_[static_cast<std::size_t>(id)] = value(n.inputs.at(0));
    }
  }

  void conv(int id, const std::string& output) {
    const Node& n = network_.node(id);
    const auto& layer = static_cast<const Conv2D&>(*n.layer);
    const Conv2dDesc& d = layer.desc();
    const std::string name = value_name(id);
    std::vector<std::string> inputs{value(n.inputs.at(0)), initializer(id, 0, name + "_weight")};
    if (layer.has_bias()) inputs.push_back(initializer(id, 1, name + "_bias"));
    auto& node = add_node("Conv", name, inputs, output, n.shape);
    set_ints(node, "kernel_shape", {d.kernel_h, d.kernel_w});
    set_ints(node, "strides", {d.stride, d.stride});
    set_ints(node, "pads", {d.padding, d.padding, d.padding, d.padding});
    set_ints(node, "dilations", {1, 1});
    set_int(node, "group", 1);
  }

  // y = x w^T + b over the flattened sample: Gemm with transB, after a Flatten where the input
  // is an image (a dense layer may read a convolution's output directly).
  void dense(int id, const std::string& output) {
    const Node& n = network_.node(id);
    const auto& layer = static_cast<const Dense&>(*n.layer);
    const std::string name = value_name(id);
    std::string in = value(n.inputs.at(0));
    const Shape& in_shape = network_.node(n.inputs[0]).shape;
    if (in_shape.rank != 1) {
      const std::string flat = name + "_flatten";
      set_int(add_node("Flatten", flat, {in}, flat, flattened(in_shape)), "axis", 1);
      in = flat;
    }
    std::vector<std::string> inputs{in, initializer(id, 0, name + "_weight")};
    if (layer.has_bias()) inputs.push_back(initializer(id, 1, name + "_bias"));
    set_int(add_node("Gemm", name, inputs, output, n.shape), "transB", 1);
  }

  // Ours floor the output size (ceil_mode 0) and average over the window's input elements
  // alone, padding left out of the count.
  void pool(int id, const std::string& output) {
    const Node& n = network_.node(id);
    const Pool2dDesc& d = static_cast<const Pool2D&>(*n.layer).desc();
    const bool max = d.mode == PoolMode::max;
    auto& node = add_node(max ? "MaxPool" : "AveragePool", value_name(id), {value(n.inputs.at(0))}, output, n.shape);
    set_ints(node, "kernel_shape", {d.window_h, d.window_w});
    set_ints(node, "strides", {d.stride_h, d.stride_w});
    set_ints(node, "pads", {d.pad_h, d.pad_w, d.pad_h, d.pad_w});
    set_int(node, "ceil_mode", 0);
    if (!max) set_int(node, "count_include_pad", 0);
  }

  // Inference form: normalised by the running statistics (parameters 3 and 4).
  void batchnorm(int id, const std::string& output) {
    const Node& n = network_.node(id);
    const auto& layer = static_cast<const BatchNorm2D&>(*n.layer);
    const std::string name = value_name(id);
    auto& node = add_node("BatchNormalization", name,
                          {value(n.inputs.at(0)), initializer(id, 0, name + "_gamma"), initializer(id, 1, name + "_beta"),
                           initializer(id, 2, name + "_running_mean"), initializer(id, 3, name + "_running_var")},
                          output, n.shape);
    set_float(node, "epsilon", layer.epsilon());
  }

  // A node; the shape of its output, when given, goes into value_info.
  onnx::NodeProto& add_node(const char* op, const std::string& name, const std::vector<std::string>& inputs,
                            const std::string& output, const Shape& shape = {}) {
    auto* node = graph_.add_node();
    node->set_op_type(op);
    node->set_name(name);
    for (const auto& in : inputs) node->add_input(in);
    node->add_output(output);
    if (shape.rank > 0 && output != kOnnxLogitsName) describe_value(*graph_.add_value_info(), output, shape);
    return *node;
  }

  // Parameter `index` of node `id` as an initializer named `name`; returns the name.
  std::string initializer(int id, std::size_t index, const std::string& name) {
    const Tensor& t = params_.params(id)[index];
    auto* init = graph_.add_initializer();
    init->set_name(name);
    init->set_data_type(onnx::TensorProto::FLOAT);
    for (int i = 0; i < t.shape.rank; ++i) init->add_dims(t.shape[i]);
    std::string* raw = init->mutable_raw_data();
    raw->resize(t.bytes());
    // trainable() begins at the parameter block's first float (trainable tensors come first,
    // the running statistics after them), so a tensor's offset in the block is its distance
    // from there; download works on every backend.
    const auto first = static_cast<std::size_t>(t.data - params_.trainable().data);
    params_.download(ParameterStore::Block::parameters, first, t.elements(), reinterpret_cast<float*>(raw->data()));
    return name;
  }

  // "conv2d_3": ONNX asks for names that are C identifiers.
  std::string value_name(int id) const { return to_string(network_.node(id).layer->kind()) + "_" + std::to_string(id); }
  const std::string& value(int id) const { return values_.at(static_cast<std::size_t>(id)); }

  onnx::GraphProto& graph_;
  const Network& network_;
  const ParameterStore& params_;
  std::vector<std::string> values_;  // the ONNX value that holds each node's output
};

}  // namespace

void write_onnx_graph(onnx::GraphProto& graph, const Network& network, const ParameterStore& params,
                      bool probabilities) {
  GraphWriter(graph, network, params).write(probabilities);
}

}  // namespace cnn
