// ONNX export: the written file read back with protobuf's API (its opset, input and outputs,
// nodes and attributes, initializers, declared shapes and metadata), each task's outputs, and the
// refusals. That onnxruntime computes our outputs from the file is onnx_export_matches_onnxruntime
// (onnx_runtime_check.sh).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/flatten.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/checkpoint.hpp>
#include <cnnengine/models/model.hpp>
#include <cnnengine/models/network_text.hpp>
#include <cnnengine/models/onnx_export.hpp>
#include "tests/data/data_test_files.hpp"
#include "tests/error_of.hpp"

#ifdef CNN_TEST_HAVE_ONNX
#include <onnx/onnx_pb.h>

#include "models/detail/onnx/onnx_float16.hpp"
#endif

using namespace cnn;
using cnn::testing::error_of;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

#ifndef CNN_TEST_HAVE_ONNX

TEST_CASE("without ONNX, export_onnx says this build has none and which packages to install", "[onnx]") {
  data::test::TempFolder scratch;
  CpuBackend backend(1);
  Network net = make_preset("small", Shape{1, 28, 28}, 10);
  ParameterStore params(net, backend, memory::host_resource(), 0, 1);
  CHECK_FALSE(onnx_export_available());
  const std::string error = error_of<ConfigError>([&] { export_onnx(scratch / "m.onnx", net, params, describe_model(net)); });
  CHECK_THAT(error, Contains("has no ONNX export") && Contains("libonnx-dev") && Contains("libprotobuf-dev"));
  CHECK_FALSE(fs::exists(scratch / "m.onnx"));
  WARN("this build has no ONNX export (ONNX and protobuf were not found): the exported files are not checked");
}

#else

namespace {

// A layer of one's own: ONNX cannot know it.
class Mish final : public Layer {
 public:
  std::string type_name() const override { return "mish"; }
  std::string describe() const override { return "mish"; }
  Shape output_shape(const std::vector<Shape>& inputs) override { return inputs.at(0); }
  void forward(const LayerContext&) override {}
  void backward(const LayerContext&) override {}
};

onnx::ModelProto read_model(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  onnx::ModelProto model;
  REQUIRE(model.ParseFromIstream(&in));
  return model;
}

// A model exported from `net` with every parameter set to a value of its place, then read back.
struct Exported {
  data::test::TempFolder scratch;
  CpuBackend backend{1};
  ParameterStore params;
  std::vector<float> values;
  onnx::ModelProto model;

  Exported(const Network& net, const ModelDescription& description, OnnxExportOptions options = {})
      : params(net, backend, memory::host_resource(), 0, 1) {
    values.resize(params.total_floats());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.5f + static_cast<float>(i % 97) * 0.01f;
    params.upload(values);
    export_onnx(scratch / "model.onnx", net, params, description, options);
    model = read_model(scratch / "model.onnx");
  }
  const onnx::GraphProto& graph() const { return model.graph(); }

  // What parameter `index` of node `id` holds.
  std::vector<float> parameter(int id, std::size_t index) const {
    const Tensor& t = params.params(id)[index];
    const auto first = static_cast<std::size_t>(t.data - params.trainable().data);
    return {values.begin() + static_cast<std::ptrdiff_t>(first),
            values.begin() + static_cast<std::ptrdiff_t>(first + t.elements())};
  }
};

std::vector<std::string> op_types(const onnx::GraphProto& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.node()) ops.push_back(n.op_type());
  return ops;
}

std::vector<const onnx::NodeProto*> nodes_of(const onnx::GraphProto& g, const std::string& op) {
  std::vector<const onnx::NodeProto*> found;
  for (const auto& n : g.node())
    if (n.op_type() == op) found.push_back(&n);
  return found;
}

std::vector<std::string> inputs_of(const onnx::NodeProto& node) { return {node.input().begin(), node.input().end()}; }

const onnx::AttributeProto& attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return a;
  FAIL("node " << node.name() << " has no attribute " << name);
  throw std::logic_error("unreachable");
}

std::vector<long> ints(const onnx::NodeProto& node, const std::string& name) {
  const auto& a = attribute(node, name);
  return {a.ints().begin(), a.ints().end()};
}

const onnx::TensorProto& initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return t;
  FAIL("no initializer " << name);
  throw std::logic_error("unreachable");
}

std::vector<long> dims(const onnx::TensorProto& t) { return {t.dims().begin(), t.dims().end()}; }

std::vector<float> floats(const onnx::TensorProto& t) {
  REQUIRE(t.data_type() == onnx::TensorProto::FLOAT);
  std::vector<float> v(t.raw_data().size() / sizeof(float));
  std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(float));
  return v;
}

// A value's declared shape, the symbolic batch dimension as its name: {"N", "1", "28", "28"}.
std::vector<std::string> shape_of(const onnx::ValueInfoProto& v) {
  std::vector<std::string> s;
  for (const auto& d : v.type().tensor_type().shape().dim())
    s.push_back(d.has_dim_param() ? d.dim_param() : std::to_string(d.dim_value()));
  return s;
}

std::vector<std::string> declared_shape(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& v : *list)
      if (v.name() == name) return shape_of(v);
  FAIL("no shape declared for " << name);
  return {};
}

std::string metadata(const onnx::ModelProto& m, const std::string& key) {
  for (const auto& p : m.metadata_props())
    if (p.key() == key) return p.value();
  FAIL("no metadata " << key);
  return "";
}

// Every node reads only the graph's input, initializers and earlier nodes' outputs ("" is an
// optional input left out).
void check_topological(const onnx::GraphProto& g) {
  std::set<std::string> known{g.input(0).name(), ""};
  for (const auto& t : g.initializer()) known.insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) CHECK(known.count(in) == 1);
    for (const auto& out : n.output()) CHECK(known.insert(out).second);
  }
}

Network parse(const std::string& text) { return parse_network(text, Shape{1, 28, 28}, 10); }

}  // namespace

TEST_CASE("ONNX export of small-bn: opset, input and outputs, nodes, initializers and metadata", "[onnx]") {
  REQUIRE(onnx_export_available());
  Network net = make_preset("small-bn", Shape{1, 28, 28}, 10);
  ModelDescription description = describe_model(net);
  description.class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                             "Sandal", "Shirt", "Sneaker", "Bag", "say \"boot\""};
  description.preprocessing.normalization.mean = {0.5f};
  description.preprocessing.normalization.stddev = {0.25f};
  Exported e(net, description);
  const auto& g = e.graph();

  CHECK(e.model.ir_version() == 7);
  REQUIRE(e.model.opset_import_size() == 1);
  CHECK(e.model.opset_import(0).domain().empty());
  CHECK(e.model.opset_import(0).version() == kOnnxOpset);
  CHECK(kOnnxOpset >= 13);
  CHECK(e.model.producer_name() == "cnnengine");

  REQUIRE(g.input_size() == 1);
  CHECK(g.input(0).name() == "images");
  CHECK(shape_of(g.input(0)) == std::vector<std::string>{"N", "1", "28", "28"});
  REQUIRE(g.output_size() == 2);
  CHECK(g.output(0).name() == "logits");
  CHECK(shape_of(g.output(0)) == std::vector<std::string>{"N", "10"});
  CHECK(g.output(1).name() == "probabilities");
  CHECK(shape_of(g.output(1)) == std::vector<std::string>{"N", "10"});

  // Dropout is gone: the last dense layer reads the ReLU before it.
  CHECK(op_types(g) == std::vector<std::string>{"Conv", "BatchNormalization", "Relu", "MaxPool", "Conv",
                                                "BatchNormalization", "Relu", "MaxPool", "Flatten", "Gemm", "Relu",
                                                "Gemm", "Softmax"});
  check_topological(g);
  const auto convs = nodes_of(g, "Conv");
  CHECK(inputs_of(*convs[0]) == std::vector<std::string>{"images", "conv2d_1_weight"});  // no bias
  CHECK(ints(*convs[1], "kernel_shape") == std::vector<long>{3, 3});
  CHECK(ints(*convs[1], "strides") == std::vector<long>{1, 1});
  CHECK(ints(*convs[1], "pads") == std::vector<long>{1, 1, 1, 1});
  CHECK(dims(initializer(g, "conv2d_5_weight")) == std::vector<long>{64, 32, 3, 3});
  CHECK(floats(initializer(g, "conv2d_5_weight")) == e.parameter(5, 0));

  const auto norms = nodes_of(g, "BatchNormalization");
  CHECK(inputs_of(*norms[0]) == std::vector<std::string>{"conv2d_1", "batchnorm2d_2_gamma", "batchnorm2d_2_beta",
                                                          "batchnorm2d_2_running_mean", "batchnorm2d_2_running_var"});
  CHECK(attribute(*norms[0], "epsilon").f() == Approx(1e-5f));
  for (std::size_t k = 0; k < 4; ++k) {
    const auto& t = g.initializer(static_cast<int>(k) + 1);
    CHECK(dims(t) == std::vector<long>{32});
    CHECK(floats(t) == e.parameter(2, k));  // the running statistics too
  }
  const auto pools = nodes_of(g, "MaxPool");
  CHECK(ints(*pools[0], "kernel_shape") == std::vector<long>{2, 2});
  CHECK(ints(*pools[0], "strides") == std::vector<long>{2, 2});
  CHECK(attribute(*pools[0], "ceil_mode").i() == 0);
  CHECK(declared_shape(g, pools[0]->output(0)) == std::vector<std::string>{"N", "32", "14", "14"});

  const auto gemms = nodes_of(g, "Gemm");
  CHECK(attribute(*gemms[0], "transB").i() == 1);
  CHECK(dims(initializer(g, "dense_10_weight")) == std::vector<long>{128, 3136});
  CHECK(dims(initializer(g, "dense_10_bias")) == std::vector<long>{128});
  CHECK(floats(initializer(g, "dense_10_bias")) == e.parameter(10, 1));
  CHECK(inputs_of(*gemms[1])[0] == nodes_of(g, "Relu")[2]->output(0));
  CHECK(gemms[1]->output(0) == "logits");
  CHECK(dims(initializer(g, "dense_13_weight")) == std::vector<long>{10, 128});
  CHECK(attribute(*nodes_of(g, "Softmax")[0], "axis").i() == 1);

  CHECK_THAT(metadata(e.model, "class_names"), Contains(R"(["T-shirt/top","Trouser",)") &&
                                                   Contains(R"("Bag","say \"boot\""])"));
  CHECK(metadata(e.model, "normalization_mean") == "[0.5]");
  CHECK(metadata(e.model, "normalization_std") == "[0.25]");
  CHECK(metadata(e.model, "pixel_scale") == "1/255");
  CHECK(metadata(e.model, "input_shape") == "1x28x28");
  CHECK(metadata(e.model, "cnnengine_network") == network_text(net));
}

TEST_CASE("ONNX export of small: bias inputs, without probabilities one output, no normalisation", "[onnx]") {
  REQUIRE(onnx_export_available());
  Network net = make_preset("small", Shape{3, 16, 16}, 4);
  Exported e(net, describe_model(net), OnnxExportOptions{.probabilities = false});
  const auto& g = e.graph();
  CHECK(op_types(g) == std::vector<std::string>{"Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool", "Flatten", "Gemm",
                                                "Relu", "Gemm"});
  REQUIRE(g.output_size() == 1);
  CHECK(g.output(0).name() == "logits");
  const auto convs = nodes_of(g, "Conv");
  CHECK(inputs_of(*convs[0]) == std::vector<std::string>{"images", "conv2d_1_weight", "conv2d_1_bias"});
  CHECK(dims(initializer(g, "conv2d_1_weight")) == std::vector<long>{32, 3, 3, 3});
  CHECK(floats(initializer(g, "conv2d_1_bias")) == e.parameter(1, 1));
  CHECK(inputs_of(*nodes_of(g, "Gemm")[1]).size() == 3);
  CHECK(metadata(e.model, "class_names") == R"(["0","1","2","3"])");
  CHECK(metadata(e.model, "normalization_mean") == "[0.0,0.0,0.0]");
  CHECK(metadata(e.model, "normalization_std") == "[1.0,1.0,1.0]");
}

TEST_CASE("ONNX export of resnet: residual adds, strided shortcuts, global average pooling", "[onnx]") {
  REQUIRE(onnx_export_available());
  Network net = make_preset("resnet", Shape{1, 28, 28}, 10);
  Exported e(net, describe_model(net));
  const auto& g = e.graph();
  check_topological(g);
  CHECK(nodes_of(g, "Conv").size() == 15);
  CHECK(nodes_of(g, "BatchNormalization").size() == 15);
  CHECK(nodes_of(g, "Relu").size() == 13);
  CHECK(nodes_of(g, "Add").size() == 6);
  int shortcuts = 0;
  for (const auto* conv : nodes_of(g, "Conv"))
    if (ints(*conv, "kernel_shape") == std::vector<long>{1, 1}) {
      ++shortcuts;
      CHECK(ints(*conv, "strides") == std::vector<long>{2, 2});
      CHECK(ints(*conv, "pads") == std::vector<long>{0, 0, 0, 0});
    }
  CHECK(shortcuts == 2);
  const auto global = nodes_of(g, "GlobalAveragePool");
  REQUIRE(global.size() == 1);
  CHECK(declared_shape(g, global[0]->output(0)) == std::vector<std::string>{"N", "64", "1", "1"});
  CHECK(op_types(g).back() == "Softmax");
  CHECK(nodes_of(g, "Gemm")[0]->output(0) == "logits");
  CHECK(g.initializer_size() == 15 + 15 * 4 + 2);
}

TEST_CASE("ONNX export: padded pooling that floors, a Pad, a dense layer on an image, no bias, dropout gone", "[onnx]") {
  REQUIRE(onnx_export_available());
  const fs::path file = fs::path(CNN_TEST_DATA_DIR).parent_path() / "models" / "every_onnx_layer.txt";
  Network net = load_network_file(file, Shape{1, 28, 28}, 10);
  Exported e(net, describe_model(net));
  const auto& g = e.graph();
  check_topological(g);
  CHECK(op_types(g) == std::vector<std::string>{"Conv", "BatchNormalization", "Relu", "Conv", "Add", "Relu",
                                                "AveragePool", "Pad", "MaxPool", "Flatten", "Gemm", "BatchNormalization",
                                                "Relu", "Gemm", "Softmax"});
  const auto convs = nodes_of(g, "Conv");
  CHECK(inputs_of(*convs[0]).size() == 2);  // bias=0
  CHECK(inputs_of(*convs[1]).size() == 3);
  CHECK(inputs_of(*nodes_of(g, "Add")[0]) == std::vector<std::string>{"conv2d_4", "relu_3"});
  CHECK(attribute(*nodes_of(g, "BatchNormalization")[0], "epsilon").f() == Approx(1e-3f));

  const auto& average = *nodes_of(g, "AveragePool")[0];
  CHECK(ints(average, "kernel_shape") == std::vector<long>{3, 3});
  CHECK(ints(average, "strides") == std::vector<long>{2, 2});
  CHECK(ints(average, "pads") == std::vector<long>{1, 1, 1, 1});
  CHECK(attribute(average, "count_include_pad").i() == 0);
  CHECK(attribute(average, "ceil_mode").i() == 0);
  CHECK(declared_shape(g, average.output(0)) == std::vector<std::string>{"N", "8", "14", "14"});
  // pad 0 1 0 1 value=-inf: [N, C, top, left] before, [N, C, bottom, right] after.
  const auto& pad = *nodes_of(g, "Pad")[0];
  REQUIRE(inputs_of(pad).size() == 3);
  CHECK(inputs_of(pad)[0] == average.output(0));
  CHECK(attribute(pad, "mode").s() == "constant");
  const auto& pads = initializer(g, inputs_of(pad)[1]);
  REQUIRE(dims(pads) == std::vector<long>{8});
  REQUIRE(pads.raw_data().size() == 8 * sizeof(std::int64_t));
  std::vector<std::int64_t> pad_values(8);
  std::memcpy(pad_values.data(), pads.raw_data().data(), pads.raw_data().size());
  CHECK(pad_values == std::vector<std::int64_t>{0, 0, 0, 0, 0, 0, 1, 1});
  const auto& value = initializer(g, inputs_of(pad)[2]);
  CHECK(dims(value).empty());  // a scalar, as Pad's constant_value is
  float pad_value = 0;
  REQUIRE(value.raw_data().size() == sizeof pad_value);
  std::memcpy(&pad_value, value.raw_data().data(), sizeof pad_value);
  CHECK(pad_value == -INFINITY);
  CHECK(declared_shape(g, pad.output(0)) == std::vector<std::string>{"N", "8", "15", "15"});
  const auto& max = *nodes_of(g, "MaxPool")[0];
  CHECK(ints(max, "pads") == std::vector<long>{1, 1, 1, 1});
  CHECK(declared_shape(g, max.output(0)) == std::vector<std::string>{"N", "8", "8", "8"});

  // The dense layer reads the pooling's (dropout's) output through a Flatten of its own.
  const auto& flatten = *nodes_of(g, "Flatten")[0];
  CHECK(inputs_of(flatten) == std::vector<std::string>{max.output(0)});
  CHECK(attribute(flatten, "axis").i() == 1);
  CHECK(declared_shape(g, flatten.output(0)) == std::vector<std::string>{"N", "512"});
  const auto gemms = nodes_of(g, "Gemm");
  CHECK(inputs_of(*gemms[0])[0] == flatten.output(0));
  CHECK(dims(initializer(g, "dense_11_weight")) == std::vector<long>{32, 512});
  CHECK(inputs_of(*gemms[1]) == std::vector<std::string>{"relu_13", "dense_15_weight"});  // bias=0
  CHECK(gemms[1]->output(0) == "logits");
  CHECK(declared_shape(g, "batchnorm2d_12") == std::vector<std::string>{"N", "32"});
}

TEST_CASE("ONNX export: a network that ends in an image or a pass-through layer gives logits [N, classes]", "[onnx]") {
  REQUIRE(onnx_export_available());
  struct Case {
    const char* text;
    std::vector<std::string> ops;
  };
  const std::vector<Case> cases{
      {"conv 10 3\nglobalavgpool\n", {"Conv", "GlobalAveragePool", "Flatten", "Softmax"}},
      {"conv 10 28\nflatten\n", {"Conv", "Flatten", "Softmax"}},
      {"dense 10\ndropout 0.5\n", {"Flatten", "Gemm", "Identity", "Softmax"}},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    Network net = parse(c.text);
    Exported e(net, describe_model(net));
    const auto& g = e.graph();
    CHECK(op_types(g) == c.ops);
    CHECK(g.node(g.node_size() - 2).output(0) == "logits");
    CHECK(shape_of(g.output(0)) == std::vector<std::string>{"N", "10"});
  }
}

TEST_CASE("ONNX export refuses what it cannot write, naming it, and leaves the file as it was", "[onnx]") {
  REQUIRE(onnx_export_available());
  data::test::TempFolder scratch;
  const fs::path file = scratch / "model.onnx";
  {
    std::ofstream(file) << "an older model";
  }
  CpuBackend backend(1);

  Network custom(Shape{1, 8, 8});
  custom.emplace<Conv2D>(4, 3);
  custom.add(std::make_unique<Mish>());
  custom.emplace<Flatten>();
  custom.emplace<Dense>(3);
  ParameterStore custom_params(custom, backend, memory::host_resource(), 0, 1);
  CHECK_THAT(error_of<ConfigError>([&] { export_onnx(file, custom, custom_params, ModelDescription{}); }),
             Contains("layer 2:mish") && Contains("ONNX has no operator"));

  Network net = make_preset("small-bn", Shape{1, 28, 28}, 10);
  Network other = make_preset("small", Shape{1, 28, 28}, 10);
  ParameterStore params(net, backend, memory::host_resource(), 0, 1);
  ParameterStore other_params(other, backend, memory::host_resource(), 0, 1);
  CHECK_THAT(error_of<ConfigError>([&] { export_onnx(file, net, other_params, describe_model(net)); }),
             Contains("not this network's"));

  ModelDescription three_names = describe_model(net);
  three_names.class_names = {"a", "b", "c"};
  CHECK_THAT(error_of<ConfigError>([&] { export_onnx(file, net, params, three_names); }),
             Contains("3 class names for a network of 10 classes"));
  ModelDescription two_means = describe_model(net);
  two_means.preprocessing.normalization.mean = {0.1f, 0.2f};
  CHECK_THAT(error_of<ConfigError>([&] { export_onnx(file, net, params, two_means); }),
             Contains("mean has 2 values for an input of 1 channels"));
  ModelDescription zero_std = describe_model(net);
  zero_std.preprocessing.normalization.stddev = {0.f};
  CHECK_THAT(error_of<ConfigError>([&] { export_onnx(file, net, params, zero_std); }), Contains("is not positive"));

  CHECK_THAT(error_of<Error>([&] { export_onnx(scratch / "missing" / "m.onnx", net, params, describe_model(net)); }),
             Contains("missing"));

  std::ifstream in(file);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "an older model");
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(scratch.path())) ++files;
  CHECK(files == 1);  // no temporary left behind

  export_onnx(file, net, params, describe_model(net));  // replaces it
  CHECK(read_model(file).graph().output(0).name() == "logits");
}

TEST_CASE("ONNX export of a BatchNorm network from a checkpoint, as a model or a trainer holds it", "[onnx]") {
  // A predictor's store holds the running statistics once, a trainer's may hold a second copy
  // (recovery), a bare store its optimizer's state: each is this network's.
  REQUIRE(onnx_export_available());
  data::test::TempFolder scratch;
  CpuBackend backend(1);
  Network net = make_preset("small-bn", Shape{1, 28, 28}, 10);
  ParameterStore params(net, backend, memory::host_resource(), 2, 1, 2);
  save_checkpoint(scratch / "bn.ckpt", net, params, describe_model(net));
  export_onnx(scratch / "onnx", net, params, describe_model(net));
  Model model(scratch / "bn.ckpt", backend);
  export_onnx(scratch / "model.onnx", model.network(), model.parameters(), model.description());
  CHECK(read_model(scratch / "model.onnx").graph().initializer_size() ==
        read_model(scratch / "onnx").graph().initializer_size());
}

namespace {

ModelDescription described_for(const Network& net, Task task) {
  ModelDescription d = describe_model(net);
  d.loss.task = task;
  return d;
}

}  // namespace

TEST_CASE("ONNX export of a segmentation U-Net: logits and their softmax over the classes, per pixel", "[onnx]") {
  REQUIRE(onnx_export_available());
  Network net = make_preset("unet:depth=2,width=8", Shape{1, 28, 28}, 3);
  ModelDescription description = described_for(net, Task::segment);
  description.class_names = {"background", "shirt", "shoe"};
  Exported e(net, description);
  const auto& g = e.graph();
  check_topological(g);
  REQUIRE(g.output_size() == 2);
  CHECK(g.output(0).name() == "logits");
  CHECK(shape_of(g.output(0)) == std::vector<std::string>{"N", "3", "28", "28"});
  CHECK(g.output(1).name() == "probabilities");
  CHECK(shape_of(g.output(1)) == std::vector<std::string>{"N", "3", "28", "28"});
  CHECK(nodes_of(g, "Flatten").empty());
  CHECK(op_types(g).back() == "Softmax");
  CHECK(attribute(*nodes_of(g, "Softmax")[0], "axis").i() == 1);
  CHECK(nodes_of(g, "Conv").back()->output(0) == "logits");  // the 1x1 head

  const auto ups = nodes_of(g, "ConvTranspose");
  REQUIRE(ups.size() == 2);
  CHECK(ints(*ups[0], "kernel_shape") == std::vector<long>{2, 2});
  CHECK(ints(*ups[0], "strides") == std::vector<long>{2, 2});
  CHECK(inputs_of(*ups[0]).size() == 3);  // with bias
  CHECK(declared_shape(g, ups[0]->output(0)) == std::vector<std::string>{"N", "16", "14", "14"});
  const auto joins = nodes_of(g, "Concat");
  REQUIRE(joins.size() == 2);
  CHECK(inputs_of(*joins[0])[1] == ups[0]->output(0));  // the skip first
  CHECK(declared_shape(g, joins[1]->output(0)) == std::vector<std::string>{"N", "16", "28", "28"});

  CHECK(metadata(e.model, "task") == "segment");
  CHECK(metadata(e.model, "class_names") == R"(["background","shirt","shoe"])");
  CHECK(metadata(e.model, "cnnengine_network") == network_text(net));

  Exported plain(net, described_for(net, Task::segment), OnnxExportOptions{.probabilities = false});
  REQUIRE(plain.graph().output_size() == 1);
  CHECK(plain.graph().output(0).name() == "logits");
  CHECK(metadata(plain.model, "class_names") == R"(["0","1","2"])");  // one per output channel
}

TEST_CASE("ONNX export of a multilabel network: each label's sigmoid, and the threshold", "[onnx]") {
  REQUIRE(onnx_export_available());
  Network net = parse_network("conv 4 3 stride=2\nrelu\nflatten\ndense 5\n", Shape{1, 28, 28}, 5);
  ModelDescription description = described_for(net, Task::multilabel);
  description.loss.threshold = 0.3f;
  Exported e(net, description);
  const auto& g = e.graph();
  CHECK(op_types(g) == std::vector<std::string>{"Conv", "Relu", "Flatten", "Gemm", "Sigmoid"});
  REQUIRE(g.output_size() == 2);
  CHECK(g.output(0).name() == "logits");
  CHECK(shape_of(g.output(0)) == std::vector<std::string>{"N", "5"});
  CHECK(g.output(1).name() == "probabilities");
  CHECK(shape_of(g.output(1)) == std::vector<std::string>{"N", "5"});
  CHECK(inputs_of(*nodes_of(g, "Sigmoid")[0]) == std::vector<std::string>{"logits"});
  CHECK(metadata(e.model, "task") == "multilabel");
  CHECK(metadata(e.model, "threshold") == "0.3");
  CHECK(metadata(e.model, "class_names") == R"(["0","1","2","3","4"])");
}

TEST_CASE("ONNX export of a regression: one output, values, with the targets' names", "[onnx]") {
  REQUIRE(onnx_export_available());
  for (const bool probabilities : {true, false}) {
    Network net = parse_network("conv 4 3\nglobalavgpool\n", Shape{3, 16, 16}, 4);  // ends in 4 x 1 x 1
    ModelDescription description = described_for(net, Task::regress);
    description.class_names = {"x", "y", "width", "height"};
    Exported e(net, description, OnnxExportOptions{.probabilities = probabilities});
    const auto& g = e.graph();
    CHECK(op_types(g) == std::vector<std::string>{"Conv", "GlobalAveragePool", "Flatten"});
    REQUIRE(g.output_size() == 1);
    CHECK(g.output(0).name() == std::string(kOnnxValuesName));
    CHECK(g.output(0).name() == "values");
    CHECK(shape_of(g.output(0)) == std::vector<std::string>{"N", "4"});
    CHECK(nodes_of(g, "Flatten")[0]->output(0) == "values");
    CHECK(metadata(e.model, "task") == "regress");
    CHECK(metadata(e.model, "class_names") == R"(["x","y","width","height"])");
  }
  // A classification's metadata says its task too, and has no threshold.
  Network net = make_preset("small", Shape{1, 8, 8}, 3);
  Exported e(net, describe_model(net));
  CHECK(metadata(e.model, "task") == "classify");
  for (const auto& p : e.model.metadata_props()) CHECK(p.key() != "threshold");
}

TEST_CASE("ONNX export for a task refuses an output or names that do not suit it", "[onnx]") {
  REQUIRE(onnx_export_available());
  data::test::TempFolder scratch;
  CpuBackend backend(1);
  auto export_error = [&](const Network& net, const ModelDescription& description) {
    ParameterStore params(net, backend, memory::host_resource(), 0, 1);
    return error_of<ConfigError>([&] { export_onnx(scratch / "m.onnx", net, params, description); });
  };
  const Network classifier = make_preset("small", Shape{1, 8, 8}, 3);
  CHECK_THAT(export_error(classifier, described_for(classifier, Task::segment)),
             Contains("a segmentation network's output must be [classes, 8, 8]") && Contains("10:dense gives [3]"));
  const Network half = parse_network("conv 3 3 stride=2 pad=1\n", Shape{1, 8, 8}, 0);
  CHECK_THAT(export_error(half, described_for(half, Task::segment)), Contains("1:conv2d gives [3x4x4]"));

  const Network unet = make_preset("unet:depth=1,width=4", Shape{1, 8, 8}, 3);
  ModelDescription two = described_for(unet, Task::segment);
  two.class_names = {"a", "b"};
  CHECK_THAT(export_error(unet, two),
             Contains("2 class names for a segment network of 3 classes (its output's channels)"));
  ModelDescription targets = described_for(classifier, Task::regress);
  targets.class_names = {"x"};
  CHECK_THAT(export_error(classifier, targets), Contains("1 class names for a regress network of 3 targets"));
  CHECK_FALSE(fs::exists(scratch / "m.onnx"));
}

TEST_CASE("to_float16 rounds to nearest with ties to even, keeps subnormals, saturates beyond 65504", "[onnx]") {
  CHECK(to_float16(1.0f) == 0x3C00);
  CHECK(to_float16(-2.0f) == 0xC000);
  CHECK(to_float16(65504.0f) == 0x7BFF);
  CHECK(to_float16(1e6f) == 0x7BFF);     // saturates: a weight that large stays finite
  CHECK(to_float16(-1e6f) == 0xFBFF);
  CHECK(to_float16(1.0f + 1.0f / 2048) == 0x3C00);  // a tie, to the even below
  CHECK(to_float16(1.0f + 3.0f / 2048) == 0x3C02);  // a tie, to the even above
  CHECK(to_float16(65519.0f) == 0x7BFF);  // rounds past the largest half: saturates
  CHECK(to_float16(std::ldexp(1.0f, -24)) == 0x0001);  // the smallest subnormal
  CHECK(to_float16(std::ldexp(1.0f, -25)) == 0x0000);  // half of it, a tie to even: zero
  CHECK(to_float16(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(to_float16(std::ldexp(1023.0f, -24) + std::ldexp(1.0f, -25)) == 0x0400);  // rounds up to the smallest normal
  CHECK(to_float16(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK((to_float16(std::numeric_limits<float>::quiet_NaN()) & 0x7C00) == 0x7C00);
  CHECK((to_float16(std::numeric_limits<float>::quiet_NaN()) & 0x03FF) != 0);
#if defined(__FLT16_MAX__) && defined(__GNUC__) && !defined(__clang__)
  // Against the compiler's own conversion, within the finite range.
  for (std::uint32_t i = 0; i < 200000; ++i) {
    const float x = (2.f * uniform01(41, i) - 1.f) * std::ldexp(1.0f, static_cast<int>(i % 40) - 26);
    const _Float16 h = static_cast<_Float16>(x);
    std::uint16_t bits;
    std::memcpy(&bits, &h, sizeof bits);
    REQUIRE(to_float16(x) == bits);
  }
#endif
}

TEST_CASE("ONNX export in fp16: float16 weights and values, the input and outputs float32 through Casts", "[onnx]") {
  REQUIRE(onnx_export_available());
  // Every operator whose inputs' types matter: BatchNorm's statistics, Clip's bounds (relu6), GELU's
  // constants, InstanceNormalization (groupnorm), Resize's scales (which stay float).
  Network net = parse("conv 8 3 pad=1\nbatchnorm\nrelu6\nupsample 2\nconv 8 3 pad=1\ngroupnorm 2\ngelu\n"
                      "maxpool 2\nflatten\ndense 10");
  OnnxExportOptions half;
  half.fp16 = true;
  Exported fp16(net, describe_model(net), half), fp32(net, describe_model(net));
  const auto& g = fp16.graph();
  check_topological(g);
  CHECK(metadata(fp16.model, "precision") == "fp16");
  CHECK(metadata(fp32.model, "precision") == "fp32");
  // The same nodes between a Cast in and a Cast out of each output.
  std::vector<std::string> ops = op_types(fp32.graph());
  ops.insert(ops.begin(), "Cast");
  ops.insert(ops.end(), {"Cast", "Cast"});
  CHECK(op_types(g) == ops);
  CHECK(g.input(0).type().tensor_type().elem_type() == onnx::TensorProto::FLOAT);
  for (const auto& out : g.output()) CHECK(out.type().tensor_type().elem_type() == onnx::TensorProto::FLOAT);
  for (const auto& v : g.value_info()) CHECK(v.type().tensor_type().elem_type() == onnx::TensorProto::FLOAT16);
  CHECK(inputs_of(g.node(1)) [0] == "images_float16");
  CHECK(g.node(g.node_size() - 1).output(0) == "probabilities");
  // Every float initializer in float16 but Resize's scales; the weights are the fp32 export's, rounded.
  const std::string scales = nodes_of(g, "Resize")[0]->input(2);
  std::size_t bytes16 = 0, bytes32 = 0;
  for (int i = 0; i < g.initializer_size(); ++i) {
    const onnx::TensorProto& t = g.initializer(i);
    const onnx::TensorProto& same = fp32.graph().initializer(i);
    REQUIRE(t.name() == same.name());
    bytes16 += t.raw_data().size();
    bytes32 += same.raw_data().size();
    if (t.name() == scales || same.data_type() != onnx::TensorProto::FLOAT) {  // and shapes, int64
      CHECK(t.data_type() == same.data_type());
      continue;
    }
    CHECK(t.data_type() == onnx::TensorProto::FLOAT16);
    const std::vector<float> want = floats(same);
    REQUIRE(t.raw_data().size() == want.size() * 2);
    for (std::size_t k = 0; k < want.size(); ++k) {
      std::uint16_t h;
      std::memcpy(&h, t.raw_data().data() + 2 * k, 2);
      CHECK(h == to_float16(want[k]));
    }
  }
  CHECK(bytes16 < bytes32 / 2 + 64);
}

TEST_CASE("ONNX export in fp16 reports the weights beyond half's range it saturates", "[onnx]") {
  REQUIRE(onnx_export_available());
  data::test::TempFolder scratch;
  CpuBackend backend(1);
  Network net = parse("conv 4 3 pad=1\nflatten\ndense 10");
  ParameterStore params(net, backend, memory::host_resource(), 0, 1);
  std::vector<float> values(params.total_floats(), 0.25f);
  values[3] = 1e5f;
  values[7] = -70000.f;
  params.upload(values);
  OnnxExportOptions half;
  half.fp16 = true;
  const OnnxExportReport report = export_onnx(scratch / "half.onnx", net, params, describe_model(net), half);
  CHECK(report.saturated == 2);
  CHECK(report.largest == 1e5f);
  CHECK(report.where == "conv2d_1_weight");
  CHECK(export_onnx(scratch / "full.onnx", net, params, describe_model(net)).saturated == 0);
}

#endif
