#include "models/detail/onnx/onnx_float16.hpp"

#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace cnn {

std::uint16_t to_float16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);  // NaN
  if (magnitude == 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // infinity
  // Halves have 10 fraction bits and exponents -14..15 (bias 15); floats 23 and bias 127.
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent > 15) return static_cast<std::uint16_t>(sign | 0x7BFFu);
  if (exponent < -25) return sign;  // below half the smallest subnormal: zero
  // The significand with its leading one, shifted so that 10 fraction bits remain (more shift for
  // a subnormal half), rounded to nearest with ties to even on the bits shifted out.
  const std::uint32_t significand = (magnitude & 0x007FFFFFu) | 0x00800000u;
  const int shift = exponent < -14 ? 13 + (-14 - exponent) : 13;
  std::uint32_t half = significand >> shift;
  const std::uint32_t rest = significand & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;  // may carry into the exponent: right
  if (exponent >= -14) half = (static_cast<std::uint32_t>(exponent + 15) << 10) + (half - 0x400u);
  if (half >= 0x7C00u) return static_cast<std::uint16_t>(sign | 0x7BFFu);  // rounded past the largest half
  return static_cast<std::uint16_t>(sign | half);
}

namespace {

constexpr float kLargestHalf = 65504.0f;

void convert_initializer(onnx::TensorProto& tensor, OnnxExportReport& report) {
  if (!tensor.has_raw_data() || tensor.float_data_size() > 0)
    throw std::logic_error("ONNX export: initializer " + tensor.name() + " is not raw float data");
  const std::string& raw = tensor.raw_data();
  std::vector<float> values(raw.size() / sizeof(float));
  std::memcpy(values.data(), raw.data(), values.size() * sizeof(float));
  std::string halves(values.size() * sizeof(std::uint16_t), '\0');
  for (std::size_t i = 0; i < values.size(); ++i) {
    // An infinity (a max pooling's padding) is float16's infinity, not saturated.
    if (const float magnitude = std::fabs(values[i]); magnitude > kLargestHalf && std::isfinite(magnitude)) {
      ++report.saturated;
      if (magnitude > report.largest) {
        report.largest = magnitude;
        report.where = tensor.name();
      }
    }
    const std::uint16_t h = to_float16(values[i]);
    std::memcpy(&halves[i * sizeof h], &h, sizeof h);  // little-endian, as raw_data is defined
  }
  tensor.set_raw_data(halves);
  tensor.set_data_type(onnx::TensorProto::FLOAT16);
}

void to_float16_type(onnx::ValueInfoProto& value) {
  auto* type = value.mutable_type()->mutable_tensor_type();
  if (type->elem_type() == onnx::TensorProto::FLOAT) type->set_elem_type(onnx::TensorProto::FLOAT16);
}

onnx::NodeProto cast(const std::string& from, const std::string& to, onnx::TensorProto::DataType type) {
  onnx::NodeProto node;
  node.set_op_type("Cast");
  node.set_name(to + "_cast");
  node.add_input(from);
  node.add_output(to);
  auto* a = node.add_attribute();
  a->set_name("to");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(type);
  return node;
}

void rename_uses(onnx::GraphProto& graph, const std::string& from, const std::string& to) {
  for (auto& node : *graph.mutable_node()) {
    for (auto& in : *node.mutable_input())
      if (in == from) in = to;
    for (auto& out : *node.mutable_output())
      if (out == from) out = to;
  }
}

}  // namespace

OnnxExportReport convert_to_float16(onnx::ModelProto& model) {
  OnnxExportReport report;
  onnx::GraphProto& graph = *model.mutable_graph();
  std::set<std::string> kept_float;  // Resize's roi (input 1) and scales (input 2)
  for (const auto& node : graph.node()) {
    if (node.op_type() == "Constant") throw std::logic_error("ONNX export: a Constant node, which float16 misses");
    if (node.op_type() == "Resize")
      for (int i = 1; i < node.input_size() && i <= 2; ++i) kept_float.insert(node.input(i));
  }
  for (auto& init : *graph.mutable_initializer())
    if (init.data_type() == onnx::TensorProto::FLOAT && !kept_float.count(init.name()))
      convert_initializer(init, report);
  for (auto& value : *graph.mutable_value_info()) to_float16_type(value);

  // The input: float32 in, a Cast to float16 before the first layer.
  std::vector<onnx::NodeProto> nodes;
  for (const auto& input : graph.input()) {
    const std::string half = input.name() + "_float16";
    rename_uses(graph, input.name(), half);
    nodes.push_back(cast(input.name(), half, onnx::TensorProto::FLOAT16));
  }
  // Each output: computed in float16 under another name, then a Cast to float32.
  std::vector<onnx::NodeProto> casts_out;
  for (const auto& output : graph.output()) {
    const std::string half = output.name() + "_float16";
    rename_uses(graph, output.name(), half);
    casts_out.push_back(cast(half, output.name(), onnx::TensorProto::FLOAT));
  }
  nodes.insert(nodes.end(), graph.node().begin(), graph.node().end());
  nodes.insert(nodes.end(), casts_out.begin(), casts_out.end());
  graph.clear_node();
  for (auto& node : nodes) *graph.add_node() = std::move(node);
  return report;
}

}  // namespace cnn
