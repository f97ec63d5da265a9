// A layer of one's own whose registered type writes ONNX nodes is exported with them; one whose
// type writes none is refused, as an unregistered one is.
#include <catch2/catch.hpp>

#include <cnnengine/models/onnx_export.hpp>

#ifdef CNN_TEST_HAVE_ONNX
#include <onnx/onnx_pb.h>

#include <fstream>

#include "backends/cpu/cpu_backend.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/flatten.hpp"
#include <cnnengine/layers/registry.hpp>
#include "memory/host_resource.hpp"
#include "tests/data/data_test_files.hpp"

using namespace cnn;
namespace fs = std::filesystem;

namespace {

// The identity, which ONNX is given as the negation of the negation: two nodes, one inner value.
class DoubleNegation final : public Layer {
 public:
  std::string type_name() const override { return "double_negation"; }
  std::string describe() const override { return "double negation"; }
  Shape output_shape(const std::vector<Shape>& inputs) override { return inputs.at(0); }
  void forward(const LayerContext& c) override { c.backend->copy_or_add(c.inputs[0], c.output, false); }
  void backward(const LayerContext& c) override {
    if (wants_gradient(c, 0)) c.backend->copy_or_add(c.grad_output, c.grad_inputs[0], c.accumulate[0]);
  }
};

// The same with no ONNX form.
class Untranslatable final : public Layer {
 public:
  std::string type_name() const override { return "untranslatable"; }
  std::string describe() const override { return "untranslatable"; }
  Shape output_shape(const std::vector<Shape>& inputs) override { return inputs.at(0); }
  void forward(const LayerContext& c) override { c.backend->copy_or_add(c.inputs[0], c.output, false); }
  void backward(const LayerContext&) override {}
};

void register_test_types() {
  if (layer_type_for_word("double_negation")) return;  // once per test process
  LayerType negation;
  negation.type_name = "double_negation";
  negation.layer_class = &typeid(DoubleNegation);
  negation.word = "double_negation";
  negation.parse = [](LayerLine& line) {
    line.expect_arguments(0);
    return std::make_unique<DoubleNegation>();
  };
  negation.onnx = [](const Layer&, OnnxNodes& graph) {
    const std::string negated = graph.name() + "_negated";
    graph.add_inner_node("Neg", {graph.input(0)}, negated, graph.input_shape(0));
    graph.add_output_node("Neg", {negated});
  };
  register_layer_type(std::move(negation));

  LayerType untranslatable;
  untranslatable.type_name = "untranslatable";
  untranslatable.layer_class = &typeid(Untranslatable);
  untranslatable.word = "untranslatable";
  untranslatable.parse = [](LayerLine&) { return std::make_unique<Untranslatable>(); };
  register_layer_type(std::move(untranslatable));
}

Network network_with(std::unique_ptr<Layer> own) {
  Network net(Shape{1, 8, 8});
  net.emplace<Conv2D>(4, 3);
  net.add(std::move(own));
  net.emplace<Flatten>();
  net.emplace<Dense>(3);
  return net;
}

}  // namespace

TEST_CASE("ONNX export writes a registered layer of one's own with the nodes its type gives", "[onnx]") {
  REQUIRE(onnx_export_available());
  register_test_types();
  data::test::TempFolder scratch;
  const fs::path file = scratch / "model.onnx";
  CpuBackend backend(1);
  const Network net = network_with(std::make_unique<DoubleNegation>());
  ParameterStore params(net, backend, memory::host_resource(), 0, 1);
  export_onnx(file, net, params, ModelDescription{});  // checked by onnx's checker and shape inference

  std::ifstream in(file, std::ios::binary);
  onnx::ModelProto model;
  REQUIRE(model.ParseFromIstream(&in));
  const onnx::GraphProto& g = model.graph();
  std::vector<std::string> ops, names;
  for (const auto& node : g.node()) {
    ops.push_back(node.op_type());
    names.push_back(node.name());
  }
  CHECK(ops == std::vector<std::string>{"Conv", "Neg", "Neg", "Flatten", "Gemm", "Softmax"});
  CHECK(names[1] == "double_negation_2_negated");
  CHECK(names[2] == "double_negation_2");
  CHECK(g.node(2).input(0) == "double_negation_2_negated");
  CHECK(g.node(3).input(0) == "double_negation_2");
  bool inner_declared = false;
  for (const auto& value : g.value_info())
    inner_declared = inner_declared || (value.name() == "double_negation_2_negated" &&
                                        value.type().tensor_type().shape().dim_size() == 4);
  CHECK(inner_declared);
}

TEST_CASE("ONNX export refuses a registered layer whose type writes no ONNX nodes", "[onnx]") {
  REQUIRE(onnx_export_available());
  register_test_types();
  data::test::TempFolder scratch;
  CpuBackend backend(1);
  const Network net = network_with(std::make_unique<Untranslatable>());
  ParameterStore params(net, backend, memory::host_resource(), 0, 1);
  CHECK_THROWS_WITH(export_onnx(scratch / "model.onnx", net, params, ModelDescription{}),
                    Catch::Contains("layer 2:untranslatable is a layer of one's own") &&
                        Catch::Contains("ONNX has no operator"));
  CHECK_FALSE(fs::exists(scratch / "model.onnx"));
}

#endif
