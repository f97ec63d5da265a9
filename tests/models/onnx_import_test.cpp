// ONNX import: our own exports read back (every layer the export writes, each task's metadata)
// compute what the original computes on the CPU; where a checkpoint is accepted an ONNX model is;
// hostile and foreign files (truncated, not ONNX, a tensor larger than its bytes, external data,
// an opset out of range, too many nodes, nodes out of order, a NaN weight) are refused naming
// what is wrong. Other engines' files, one per operator and attribute, are
// onnx_import_matches_onnxruntime (onnx_import_check.sh).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/checkpoint.hpp>
#include <cnnengine/models/model.hpp>
#include <cnnengine/models/network_text.hpp>
#include <cnnengine/models/onnx_export.hpp>
#include <cnnengine/models/onnx_import.hpp>
#include "tests/data/data_test_files.hpp"
#include "tests/error_of.hpp"

#ifdef CNN_TEST_HAVE_ONNX
#include <onnx/onnx_pb.h>

#include "models/detail/onnx/onnx_tensors.hpp"
#endif

using namespace cnn;
using cnn::testing::error_of;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

#ifndef CNN_TEST_HAVE_ONNX

TEST_CASE("without ONNX, import_onnx says this build reads none and which packages to install", "[onnx]") {
  data::test::TempFolder scratch;
  std::ofstream(scratch / "m.onnx") << "not read";
  CHECK_FALSE(onnx_import_available());
  CHECK_THAT(error_of<ConfigError>([&] { import_onnx(scratch / "m.onnx"); }),
             Contains("reads no ONNX") && Contains("libonnx-dev"));
}

#else

namespace {

// Deterministic values of every size: parameters and running statistics (variances positive).
std::vector<float> pattern(std::size_t n, float scale, float offset = 0) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 0.1));
  return v;
}

// `net` with patterned parameters (running variances in [0.5, 1.5]) saved as a checkpoint and
// exported to ONNX; each read back as a Model computes the same logits.
struct RoundTrip {
  data::test::TempFolder scratch;
  CpuBackend backend{1};
  fs::path checkpoint = scratch / "model.ckpt", onnx = scratch / "model.onnx";

  RoundTrip(const Network& net, const ModelDescription& description) {
    ParameterStore params(net, backend, memory::host_resource(), 0, 1);
    std::vector<float> values = pattern(params.total_floats(), 0.3f);
    for (const ParameterStore::Place& place : ParameterStore::places(net))
      if (place.name == "running_var")
        for (std::size_t i = 0; i < place.shape.elements(); ++i) values[place.offset + i] = 1.f + 0.5f * values[place.offset + i];
    params.upload(values);
    save_checkpoint(checkpoint, net, params, description);
    export_onnx(onnx, net, params, description);
  }

  // The largest difference between the two models' logits on a patterned batch of 3, relative
  // to the largest logit.
  float relative_difference() {
    Model original(checkpoint, backend), imported(onnx, backend);
    REQUIRE(original.network().output_shape().elements() == imported.network().output_shape().elements());
    const std::vector<float> images = pattern(3 * original.network().input_shape().elements(), 1.f, 0.5f);
    const std::vector<float> a = original.logits(images.data(), 3), b = imported.logits(images.data(), 3);
    float largest = 0, difference = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      largest = std::max(largest, std::abs(a[i]));
      difference = std::max(difference, std::abs(a[i] - b[i]));
    }
    return difference / std::max(largest, 1e-6f);
  }
};

std::string network_file(const std::string& name) { return std::string(CNN_TEST_DATA_DIR) + "/../models/" + name; }

// A model of one Relu over a [N, 1, 4, 4] input, to be broken by each test.
onnx::ModelProto relu_model(int opset = 13) {
  onnx::ModelProto model;
  model.set_ir_version(7);
  auto* o = model.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  auto* g = model.mutable_graph();
  g->set_name("g");
  auto* in = g->add_input();
  in->set_name("x");
  auto* type = in->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  type->mutable_shape()->add_dim()->set_dim_param("N");
  for (int d : {1, 4, 4}) type->mutable_shape()->add_dim()->set_dim_value(d);
  auto* node = g->add_node();
  node->set_op_type("Relu");
  node->set_name("the_relu");
  node->add_input("x");
  node->add_output("y");
  g->add_output()->set_name("y");
  return model;
}

void write(const onnx::ModelProto& model, const fs::path& file) {
  std::ofstream out(file, std::ios::binary);
  REQUIRE(model.SerializeToOstream(&out));
}

std::string import_error(const onnx::ModelProto& model, const fs::path& file) {
  write(model, file);
  return error_of<ConfigError>([&] { import_onnx(file); });
}

}  // namespace

TEST_CASE("ONNX import reads back every layer our export writes, computing the same outputs", "[onnx]") {
  const Shape image{1, 28, 28};
  for (const char* file : {"every_onnx_layer.txt", "onnx_conv_layers.txt", "onnx_activation_layers.txt",
                           "onnx_join_layers.txt", "onnx_norm_layers.txt"}) {
    INFO(file);
    const Network net = make_network(network_file(file), image, 10);
    RoundTrip trip(net, describe_model(net));
    CHECK(trip.relative_difference() <= 1e-5f);
  }
  for (const char* preset : {"small-bn", "resnet", "mobilenetv2"}) {
    INFO(preset);
    const Network net = make_preset(preset, Shape{3, 32, 32}, 10);
    RoundTrip trip(net, describe_model(net));
    CHECK(trip.relative_difference() <= 1e-5f);
  }
}

TEST_CASE("ONNX import takes back our export's metadata: the task, class names and preprocessing", "[onnx]") {
  Network net = make_preset("unet:depth=2,width=8", Shape{1, 16, 16}, 3);
  LossOptions segment;
  segment.task = Task::segment;
  net.set_loss(segment);
  ModelDescription description = describe_model(net);
  description.class_names = {"sky", "road", "car"};
  description.preprocessing.normalization = {{0.25f}, {0.5f}};
  description.preprocessing.resize_shorter_side = 20;
  RoundTrip trip(net, description);
  const ImportedModel imported = import_onnx(trip.onnx);
  CHECK(imported.description.loss.task == Task::segment);
  CHECK(imported.description.class_names == description.class_names);
  CHECK(imported.description.preprocessing.normalization.mean == std::vector<float>{0.25f});
  CHECK(imported.description.preprocessing.normalization.stddev == std::vector<float>{0.5f});
  CHECK(imported.description.preprocessing.resize_shorter_side == 20);
  CHECK(imported.network.output_shape() == Shape{3, 16, 16});
  CHECK(trip.relative_difference() <= 1e-5f);
}

TEST_CASE("where a checkpoint is read, an ONNX model is imported", "[onnx]") {
  const Network net = make_preset("small-bn", Shape{1, 28, 28}, 10);
  RoundTrip trip(net, describe_model(net));
  CHECK(is_onnx_file(trip.onnx));
  CHECK_FALSE(is_onnx_file(trip.checkpoint));

  const CheckpointInfo info = read_checkpoint(trip.onnx);
  CHECK(info.model.input == Shape{1, 28, 28});
  CHECK_FALSE(info.training.has_value());
  const Network rebuilt = checkpoint_network(info, trip.onnx);
  CHECK(info.parameter_floats == ParameterStore::planned_parameter_floats(rebuilt));

  CpuBackend backend(1);
  ParameterStore params(rebuilt, backend, memory::host_resource(), 2, 1);
  CHECK_THAT(error_of<CheckpointError>([&] { load_parameters(trip.onnx, rebuilt, params, true); }),
             Contains("no optimizer state"));
  load_parameters(trip.onnx, rebuilt, params);

  // Another head: the layers before it take the file's weights.
  const Network other = make_preset("small-bn", Shape{1, 28, 28}, 4);
  ParameterStore other_params(other, backend, memory::host_resource(), 0, 1);
  const WeightTransfer transfer = load_matching_weights(trip.onnx, other, other_params);
  CHECK(transfer.kept.size() == 1);
  CHECK(transfer.loaded.size() > 3);

  // A checkpoint named .onnx is a checkpoint.
  fs::copy_file(trip.checkpoint, trip.scratch / "really_a_checkpoint.onnx");
  CHECK_FALSE(is_onnx_file(trip.scratch / "really_a_checkpoint.onnx"));
  CHECK(read_checkpoint(trip.scratch / "really_a_checkpoint.onnx").model.network ==
        read_checkpoint(trip.checkpoint).model.network);
}

TEST_CASE("a file that is not a whole ONNX model is refused, naming it", "[onnx]") {
  data::test::TempFolder scratch;
  const fs::path file = scratch / "m.onnx";
  std::string bytes;
  REQUIRE(relu_model().SerializeToString(&bytes));
  write(relu_model(), file);
  CHECK(import_onnx(file).network.node(1).layer->type_name() == "relu");

  std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  CHECK_THAT(error_of<ConfigError>([&] { import_onnx(file); }), Contains(file.string()) && Contains("not an ONNX model"));
  std::ofstream(file, std::ios::binary | std::ios::trunc) << "a text file, renamed";
  CHECK_THAT(error_of<ConfigError>([&] { import_onnx(file); }), Contains("not an ONNX model"));
  CHECK_THAT(error_of<Error>([&] { import_onnx(scratch / "missing.onnx"); }), Contains("does not exist"));
  CHECK_THAT(error_of<Error>([&] { import_onnx(scratch.path()); }), Contains("folder"));
}

TEST_CASE("ONNX import checks every tensor's size against its bytes before allocating", "[onnx]") {
  data::test::TempFolder scratch;
  onnx::ModelProto model = relu_model();
  auto* w = model.mutable_graph()->add_initializer();
  w->set_name("huge");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(1 << 20);
  w->add_dims(1 << 21);
  w->set_raw_data(std::string(4, '\0'));
  CHECK_THAT(import_error(model, scratch / "m.onnx"), Contains("huge") && Contains("2^40"));
  w->set_dims(1, 1 << 10);
  CHECK_THAT(import_error(model, scratch / "m.onnx"), Contains("huge") && Contains("4 bytes"));
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  CHECK_THAT(import_error(model, scratch / "m.onnx"), Contains("huge") && Contains("external file"));
  w->set_data_location(onnx::TensorProto::DEFAULT);
  w->set_data_type(onnx::TensorProto::STRING);
  CHECK_THAT(import_error(model, scratch / "m.onnx"), Contains("huge") && Contains("type"));
}

TEST_CASE("ONNX import refuses opsets it does not read, too many nodes, and graphs out of order", "[onnx]") {
  data::test::TempFolder scratch;
  const fs::path file = scratch / "m.onnx";
  CHECK_THAT(import_error(relu_model(9), file), Contains("opset is 9") && Contains("11 to 21"));
  CHECK_THAT(import_error(relu_model(22), file), Contains("opset is 22"));

  onnx::ModelProto many = relu_model();
  for (int i = 0; i < kMaxOnnxNodes; ++i) {
    auto* n = many.mutable_graph()->add_node();
    n->set_op_type("Identity");
    n->add_input(i == 0 ? "y" : "v" + std::to_string(i - 1));
    n->add_output("v" + std::to_string(i));
  }
  CHECK_THAT(import_error(many, file), Contains("nodes, over the limit"));

  onnx::ModelProto reversed = relu_model();
  auto* g = reversed.mutable_graph();
  g->mutable_node(0)->set_input(0, "z");
  auto* first = g->add_node();
  first->set_op_type("Relu");
  first->set_name("second_relu");
  first->add_input("x");
  first->add_output("z");
  CHECK_THAT(import_error(reversed, file), Contains("the_relu") && Contains("before it"));

  onnx::ModelProto twice = relu_model();
  auto* again = twice.mutable_graph()->add_node();
  again->set_op_type("Relu");
  again->set_name("again");
  again->add_input("x");
  again->add_output("y");
  CHECK_THAT(import_error(twice, file), Contains("again") && Contains("one producer"));
}

TEST_CASE("a Reshape the import cannot read is refused with the shape it asks for", "[onnx]") {
  data::test::TempFolder scratch;
  onnx::ModelProto model = relu_model();
  auto* g = model.mutable_graph();
  auto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(2);
  shape->add_int64_data(2);
  shape->add_int64_data(-1);
  auto* reshape = g->add_node();
  reshape->set_op_type("Reshape");
  reshape->set_name("the_reshape");
  reshape->add_input("y");
  reshape->add_input("shape");
  reshape->add_output("z");
  g->mutable_output(0)->set_name("z");
  CHECK_THAT(import_error(model, scratch / "m.onnx"),
             Contains("the_reshape") && Contains("[2, -1]") && Contains("does not keep the batch first"));
}

TEST_CASE("ONNX import refuses a weight that is not finite and an input it cannot hold", "[onnx]") {
  data::test::TempFolder scratch;
  const fs::path file = scratch / "m.onnx";
  onnx::ModelProto model = relu_model();
  auto* g = model.mutable_graph();
  g->mutable_node(0)->set_op_type("Conv");
  g->mutable_node(0)->add_input("w");
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int d : {2, 1, 3, 3}) w->add_dims(d);
  for (int i = 0; i < 18; ++i) w->add_float_data(i == 7 ? std::numeric_limits<float>::quiet_NaN() : 0.1f);
  CHECK_THAT(import_error(model, file), Contains("the_relu") && Contains("not finite"));
  w->set_float_data(7, 0.1f);
  CHECK(import_onnx((write(model, file), file)).network.output_shape() == Shape{2, 2, 2});

  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_value(1 << 20);
  CHECK_THAT(import_error(model, file), Contains("dimension 2 is 1048576"));
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_param("H");
  CHECK_THAT(import_error(model, file), Contains("symbolic") && Contains("'H'") && Contains("--image-size"));
  // Given the size, the symbolic height takes it; the fixed width must be the one given.
  CHECK(import_onnx(file, OnnxImportOptions{4, 4}).network.input_shape() == Shape{1, 4, 4});
  CHECK(import_onnx(file, OnnxImportOptions{8, 4}).network.output_shape() == Shape{2, 6, 2});
  CHECK_THAT(error_of<ConfigError>([&] { import_onnx(file, OnnxImportOptions{6, 6}); }),
             Contains("dimension 3 is 4, not the 6 asked for"));
  CHECK_THAT(error_of<ConfigError>([&] { import_onnx(file, OnnxImportOptions{6, 0}); }),
             Contains("is not a height and a width"));
}

namespace {

// relu_model's node made `op` with integer-list attributes: over a [N, 1, 4, 4] input.
onnx::ModelProto one_node(const std::string& op, const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& ints) {
  onnx::ModelProto model = relu_model();
  auto* node = model.mutable_graph()->mutable_node(0);
  node->set_op_type(op);
  for (const auto& [name, values] : ints) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (std::int64_t v : values) a->add_ints(v);
  }
  return model;
}

// The imported model's outputs for one 4x4 image, x(r, c) = r - 4c - 20 (every value negative:
// a zero of padding would show in a maximum).
std::vector<float> outputs(const fs::path& file) {
  CpuBackend backend(1);
  Model model(file, backend);
  std::vector<float> image(16);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) image[static_cast<std::size_t>(r * 4 + c)] = static_cast<float>(r - 4 * c - 20);
  return model.logits(image.data(), 1);
}

}  // namespace

TEST_CASE("uneven pads become a pad layer in front: zeros for a convolution, -inf for a maximum", "[onnx]") {
  data::test::TempFolder scratch;
  const fs::path file = scratch / "m.onnx";
  // TensorFlow's SAME at stride 2: nothing at the top and left, one row and column at the end.
  onnx::ModelProto conv = one_node("Conv", {{"pads", {0, 0, 1, 1}}, {"strides", {2, 2}}, {"kernel_shape", {3, 3}}});
  conv.mutable_graph()->mutable_node(0)->add_input("w");
  auto* w = conv.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int d : {1, 1, 3, 3}) w->add_dims(d);
  for (int i = 0; i < 9; ++i) w->add_float_data(1.0f);
  write(conv, file);
  const ImportedModel imported = import_onnx(file);
  REQUIRE(imported.network.size() == 3);
  CHECK(imported.network.node(1).layer->describe() == "pad 0, 1, 0, 1");
  CHECK_THAT(imported.network.node(2).layer->describe(), Contains("pad 0"));
  // Each output sums a 3x3 window from (2i, 2j), the row and column past the end zeros.
  const auto x = [](int r, int c) { return r < 4 && c < 4 ? static_cast<float>(r - 4 * c - 20) : 0.0f; };
  std::vector<float> expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      float sum = 0;
      for (int r = 2 * i; r < 2 * i + 3; ++r)
        for (int c = 2 * j; c < 2 * j + 3; ++c) sum += x(r, c);
      expected.push_back(sum);
    }
  CHECK(outputs(file) == expected);

  // A maximum padded one row at the top and one column on the right: -inf, never chosen.
  write(one_node("MaxPool", {{"pads", {1, 0, 0, 1}}, {"strides", {2, 2}}, {"kernel_shape", {3, 3}}}), file);
  const ImportedModel pooled = import_onnx(file);
  CHECK(pooled.network.node(1).layer->describe() == "pad 0, 1, 1, 0 value -inf");
  // Windows of rows 2i - 1 .. 2i + 1 and columns 2j .. 2j + 2 inside the image: the largest value
  // is at the lowest row and leftmost column.
  CHECK(outputs(file) == std::vector<float>{1 - 20, 1 - 8 - 20, 3 - 20, 3 - 8 - 20});

  // Padding as wide as the window would leave windows of padding alone (-inf out).
  CHECK_THAT(import_error(one_node("MaxPool", {{"pads", {2, 0, 0, 0}}, {"kernel_shape", {2, 2}}}), file),
             Contains("a window would hold padding alone"));
  // An average that leaves its uneven padding out cannot be a pad in front.
  CHECK_THAT(import_error(one_node("AveragePool", {{"pads", {0, 0, 1, 1}}, {"kernel_shape", {3, 3}}}), file),
             Contains("the_relu") && Contains("leaves the padding out of its averages"));
}

TEST_CASE("ONNX's Pad in constant mode is a pad layer, and other modes, channels and crops are refused", "[onnx]") {
  data::test::TempFolder scratch;
  const fs::path file = scratch / "m.onnx";
  const auto pad_model = [](std::vector<std::int64_t> pads, const std::string& mode, float value) {
    onnx::ModelProto model = relu_model();
    auto* g = model.mutable_graph();
    auto* node = g->mutable_node(0);
    node->set_op_type("Pad");
    node->add_input("pads");
    node->add_input("value");
    if (!mode.empty()) {
      auto* a = node->add_attribute();
      a->set_name("mode");
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(mode);
    }
    auto* p = g->add_initializer();
    p->set_name("pads");
    p->set_data_type(onnx::TensorProto::INT64);
    p->add_dims(static_cast<std::int64_t>(pads.size()));
    for (std::int64_t v : pads) p->add_int64_data(v);
    auto* v = g->add_initializer();
    v->set_name("value");
    v->set_data_type(onnx::TensorProto::FLOAT);
    v->add_float_data(value);
    return model;
  };
  write(pad_model({0, 0, 1, 2, 0, 0, 0, 3}, "", 0.5f), file);
  const ImportedModel imported = import_onnx(file);
  CHECK(imported.network.node(1).layer->describe() == "pad 2, 3, 1, 0 value 0.5");
  CHECK(imported.network.output_shape() == Shape{1, 5, 9});
  const std::vector<float> y = outputs(file);
  CHECK(y[0] == 0.5f);                          // the row on top
  CHECK(y[9 + 2] == static_cast<float>(-20));  // x(0, 0), two columns in
  CHECK(y[9 + 8] == 0.5f);                      // the last of the three columns on the right

  CHECK_THAT(import_error(pad_model({0, 0, 1, 1, 0, 0, 1, 1}, "reflect", 0), file),
             Contains("the_relu") && Contains("Pad") && Contains("mode is reflect"));
  CHECK_THAT(import_error(pad_model({0, 1, 0, 0, 0, 0, 0, 0}, "", 0), file), Contains("pads the batch or the channels"));
  CHECK_THAT(import_error(pad_model({0, 0, -1, 0, 0, 0, 0, 0}, "", 0), file), Contains("crop (a negative pad)"));
  CHECK_THAT(import_error(pad_model({0, 0, 1 << 20, 0, 0, 0, 0, 0}, "", 0), file),
             Contains("the_relu") && Contains("from 0 to 65536"));
  CHECK_THAT(import_error(pad_model({0, 0, 1, 1}, "", 0), file), Contains("are not two integers an axis"));
  CHECK_THAT(import_error(pad_model({0, 0, 1, 0, 0, 0, 0, 0}, "", NAN), file), Contains("the_relu") && Contains("NaN"));
  // A hostile list of a million values is named in a line, not whole.
  const std::string long_list = onnx_import::ints_text(std::vector<std::int64_t>(1000000, 7));
  CHECK(long_list.size() < 100);
  CHECK_THAT(long_list, Contains("(1000000 values)"));
}


TEST_CASE("an activation and a constant of one value a channel: a scale and shift", "[onnx]") {
  data::test::TempFolder scratch;
  const fs::path file = scratch / "m.onnx";
  // relu_model's node made `op` of x and a constant `dims` of `values` (first: the constant first).
  const auto with_constant = [](const std::string& op, std::vector<std::int64_t> dims, std::vector<float> values,
                                bool first) {
    onnx::ModelProto model = relu_model();
    auto* g = model.mutable_graph();
    auto* node = g->mutable_node(0);
    node->set_op_type(op);
    node->clear_input();
    node->add_input(first ? "c" : "x");
    node->add_input(first ? "x" : "c");
    auto* c = g->add_initializer();
    c->set_name("c");
    c->set_data_type(onnx::TensorProto::FLOAT);
    for (std::int64_t d : dims) c->add_dims(d);
    for (float v : values) c->add_float_data(v);
    return model;
  };
  // The depthwise 1x1 convolution's weight and bias, as the import gives them.
  const auto scale_and_shift = [](const ImportedModel& m) {
    REQUIRE(m.network.size() == 2);
    CHECK_THAT(m.network.node(1).layer->describe(), Contains("depthwise"));
    std::vector<float> values;
    for (const ParameterStore::Place& place : ParameterStore::places(m.network))
      values.push_back(m.parameters[place.offset]);
    return values;
  };
  write(with_constant("Sub", {}, {2.0f}, true), file);  // 2 - x
  CHECK(scale_and_shift(import_onnx(file)) == std::vector<float>{-1.0f, 2.0f});
  write(with_constant("Div", {1, 1, 1, 1}, {4.0f}, false), file);  // x / 4
  CHECK(scale_and_shift(import_onnx(file)) == std::vector<float>{0.25f, 0.0f});
  write(with_constant("Add", {1}, {3.0f}, false), file);  // x + 3
  CHECK(scale_and_shift(import_onnx(file)) == std::vector<float>{1.0f, 3.0f});

  CHECK_THAT(import_error(with_constant("Mul", {4}, {1, 2, 3, 4}, false), file),
             Contains("the_relu") && Contains("constant [4]") && Contains("one a channel"));
  CHECK_THAT(import_error(with_constant("Div", {1}, {0.0f}, false), file), Contains("not a finite non-zero number"));
  CHECK_THAT(import_error(with_constant("Div", {1}, {2.0f}, true), file), Contains("divides a constant by an activation"));
}

#endif
