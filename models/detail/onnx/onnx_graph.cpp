#include "models/detail/onnx/onnx_graph.hpp"

#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/layers/registry.hpp>
#include <cnnengine/models/onnx_export.hpp>

namespace cnn {
namespace {

// Initializers are written as raw_data, which ONNX defines as little-endian.
static_assert(std::endian::native == std::endian::little);

// A node of the graph, for a layer type to set attributes on.
class ProtoNode final : public OnnxNode {
 public:
  explicit ProtoNode(onnx::NodeProto& node) : node_(node) {}
  OnnxNode& set_int(const std::string& name, std::int64_t value) override {
    auto* a = node_.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
    return *this;
  }
  OnnxNode& set_ints(const std::string& name, const std::vector<std::int64_t>& values) override {
    auto* a = node_.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (std::int64_t v : values) a->add_ints(v);
    return *this;
  }
  OnnxNode& set_float(const std::string& name, float value) override {
    auto* a = node_.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(value);
    return *this;
  }
  OnnxNode& set_string(const std::string& name, const std::string& value) override {
    auto* a = node_.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
    return *this;
  }

 private:
  onnx::NodeProto& node_;
};

// A float tensor of `per_sample` shape with a symbolic batch dimension in front.
void describe_value(onnx::ValueInfoProto& value, const std::string& name, const Shape& per_sample) {
  value.set_name(name);
  auto* type = value.mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = type->mutable_shape();
  shape->add_dim()->set_dim_param("N");
  for (int i = 0; i < per_sample.rank; ++i) shape->add_dim()->set_dim_value(per_sample[i]);
}

class GraphWriter {
 public:
  GraphWriter(onnx::GraphProto& graph, const Network& network, const ParameterStore& params, OnnxOutputs outputs)
      : graph_(graph),
        network_(network),
        params_(params),
        outputs_(std::move(outputs)),
        values_(static_cast<std::size_t>(network.size())) {}

  void write() {
    const std::vector<const LayerType*> types = exportable_types();
    describe_value(*graph_.add_input(), kOnnxInputName, network_.input_shape());
    values_[0] = kOnnxInputName;
    const int last = network_.last();
    const bool last_is_output = network_.node(last).shape == outputs_.shape;
    for (int id = 1; id <= last; ++id) {
      const std::string output = id == last && last_is_output ? outputs_.name : value_name(id);
      LayerNodes nodes(*this, id, output);
      types[static_cast<std::size_t>(id)]->onnx(*network_.node(id).layer, nodes);
      if (values_[static_cast<std::size_t>(id)].empty()) values_[static_cast<std::size_t>(id)] = output;
    }
    if (value(last) != outputs_.name)
      ProtoNode(add_node("Flatten", outputs_.name + "_flatten", {value(last)}, outputs_.name)).set_int("axis", 1);
    describe_value(*graph_.add_output(), outputs_.name, outputs_.shape);
    if (!outputs_.probabilities.empty()) {
      onnx::NodeProto& node =
          add_node(outputs_.probabilities, "probabilities", {outputs_.name}, kOnnxProbabilitiesName);
      if (outputs_.probabilities == "Softmax") ProtoNode(node).set_int("axis", 1);
      describe_value(*graph_.add_output(), kOnnxProbabilitiesName, outputs_.shape);
    }
  }

 private:
  // The graph as the layer of node `id` writes itself into it, its output into `output` (or,
  // where it passes its input through, nothing: its value is its input's, unless `output` is the
  // graph's output).
  class LayerNodes final : public OnnxNodes {
   public:
    LayerNodes(GraphWriter& writer, int id, std::string output)
        : writer_(writer), node_(writer.network_.node(id)), id_(id), output_(std::move(output)) {}

    std::string name() const override { return writer_.value_name(id_); }
    std::string input(std::size_t index) const override { return writer_.value(node_.inputs.at(index)); }
    Shape input_shape(std::size_t index) const override { return writer_.network_.node(node_.inputs.at(index)).shape; }
    std::string parameter(std::size_t index, const std::string& suffix) override {
      return writer_.initializer(id_, index, name() + "_" + suffix);
    }
    OnnxNode& add_output_node(const std::string& op_type, const std::vector<std::string>& inputs) override {
      return last_node(writer_.add_node(op_type, name(), inputs, output_, node_.shape));
    }
    OnnxNode& add_inner_node(const std::string& op_type, const std::vector<std::string>& inputs,
                             const std::string& value, const Shape& shape) override {
      return last_node(writer_.add_node(op_type, value, inputs, value, shape));
    }
    std::string float_constant(const std::string& suffix, const std::vector<float>& values,
                               const std::vector<std::int64_t>& dims) override {
      auto& init = writer_.constant(name() + "_" + suffix, onnx::TensorProto::FLOAT, dims);
      init.mutable_raw_data()->assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
      return init.name();
    }
    std::string int_constant(const std::string& suffix, const std::vector<std::int64_t>& values,
                             const std::vector<std::int64_t>& dims) override {
      auto& init = writer_.constant(name() + "_" + suffix, onnx::TensorProto::INT64, dims);
      init.mutable_raw_data()->assign(reinterpret_cast<const char*>(values.data()),
                                      values.size() * sizeof(std::int64_t));
      return init.name();
    }
    void pass_through(std::size_t index) override {
      if (output_ == writer_.outputs_.name) {
        writer_.add_node("Identity", name(), {input(index)}, output_);
      } else {
        writer_.values_[static_cast<std::size_t>(id_)] = input(index);
      }
    }

   private:
    OnnxNode& last_node(onnx::NodeProto& node) {
      last_.emplace(node);
      return *last_;
    }
    GraphWriter& writer_;
    const Node& node_;
    int id_;
    std::string output_;
    std::optional<ProtoNode> last_;
  };

  // Each node's layer type, checked to have ONNX nodes before anything is written.
  std::vector<const LayerType*> exportable_types() const {
    if (network_.size() < 2) throw ConfigError("ONNX export: the network has no layers");
    std::vector<const LayerType*> types(static_cast<std::size_t>(network_.size()));
    for (int id = 1; id < network_.size(); ++id) {
      const Node& n = network_.node(id);
      const LayerType* type = layer_type_of(*n.layer);
      if (!type || !type->onnx)
        throw ConfigError("ONNX export: layer " + n.name + " is a layer of one's own (" + n.layer->type_name() +
                          "): ONNX has no operator for it");
      types[static_cast<std::size_t>(id)] = type;
    }
    return types;
  }

  // A node; the shape of its output, when given, goes into value_info.
  onnx::NodeProto& add_node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                            const std::string& output, const Shape& shape = {}) {
    auto* node = graph_.add_node();
    node->set_op_type(op);
    node->set_name(name);
    for (const auto& in : inputs) node->add_input(in);
    node->add_output(output);
    if (shape.rank > 0 && output != outputs_.name) describe_value(*graph_.add_value_info(), output, shape);
    return *node;
  }

  onnx::TensorProto& constant(const std::string& name, onnx::TensorProto::DataType type,
                              const std::vector<std::int64_t>& dims) {
    auto* init = graph_.add_initializer();
    init->set_name(name);
    init->set_data_type(type);
    for (std::int64_t d : dims) init->add_dims(d);
    return *init;
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
  std::string value_name(int id) const { return network_.node(id).layer->type_name() + "_" + std::to_string(id); }
  const std::string& value(int id) const { return values_.at(static_cast<std::size_t>(id)); }

  onnx::GraphProto& graph_;
  const Network& network_;
  const ParameterStore& params_;
  const OnnxOutputs outputs_;
  std::vector<std::string> values_;  // the ONNX value that holds each node's output
};

}  // namespace

void write_onnx_graph(onnx::GraphProto& graph, const Network& network, const ParameterStore& params,
                      const OnnxOutputs& outputs) {
  GraphWriter(graph, network, params, outputs).write();
}

}  // namespace cnn
