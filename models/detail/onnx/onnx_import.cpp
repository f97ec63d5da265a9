// import_onnx where ONNX and protobuf were found (onnx_unavailable.cpp otherwise): the file read
// within its bounds, the model's opset and input checked, the graph read (onnx_graph_import.hpp),
// our export's metadata taken back, and the parameters laid out as a ParameterStore holds them.
#include <cnnengine/models/onnx_import.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>

#include "base/regular_file.hpp"
#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/parameter_store.hpp>
#include <cnnengine/models/network_text.hpp>
#include "models/detail/onnx/onnx_graph_import.hpp"

namespace cnn {
namespace {

onnx::ModelProto read_model(const std::filesystem::path& path) {
  if (const std::string problem = regular_file_problem(path); !problem.empty())
    throw Error("cannot read the ONNX model " + path.string() + ": it " + problem);
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw Error("cannot read the ONNX model " + path.string() + ": " + ec.message());
  if (size > kMaxOnnxFileBytes)
    throw ConfigError(path.string() + ": " + std::to_string(size) + " bytes, over the " +
                      std::to_string(kMaxOnnxFileBytes) + " an ONNX model may hold (protobuf's limit)");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open the ONNX model " + path.string());
  onnx::ModelProto model;
  bool parsed = false;
  {
    google::protobuf::io::FileInputStream file(fd);
    google::protobuf::io::CodedInputStream in(&file);
    in.SetTotalBytesLimit(static_cast<int>(size));
    parsed = model.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
  }
  ::close(fd);
  if (!parsed || !model.has_graph())
    throw ConfigError(path.string() + " is not an ONNX model (it does not parse as one: truncated, or another kind "
                      "of file)");
  return model;
}

// The default domain's opset, checked in the range the import reads.
int opset_of(const onnx::ModelProto& model) {
  int opset = 0;
  for (const onnx::OperatorSetIdProto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
  if (opset < kOnnxImportOpsetLow || opset > kOnnxImportOpsetHigh)
    throw ConfigError("its opset is " + std::to_string(opset) + ", where the import reads opsets " +
                      std::to_string(kOnnxImportOpsetLow) + " to " + std::to_string(kOnnxImportOpsetHigh) +
                      " (export it again with opset_version in that range)");
  return opset;
}

struct ImageInput {
  std::string name;
  Shape shape;
  bool batch_is_one = false;
};

// The one graph input that is not an initializer: float [N, C, H, W], C fixed, H and W fixed or
// given by `options`.
ImageInput image_input(const onnx::GraphProto& graph, const OnnxImportOptions& options) {
  std::set<std::string> initializers;
  for (const onnx::TensorProto& t : graph.initializer()) initializers.insert(t.name());
  std::vector<const onnx::ValueInfoProto*> inputs;
  for (const onnx::ValueInfoProto& v : graph.input())
    if (!initializers.count(v.name())) inputs.push_back(&v);
  if (inputs.size() != 1) {
    std::string names;
    for (const onnx::ValueInfoProto* v : inputs) names += (names.empty() ? "'" : ", '") + v->name() + "'";
    throw ConfigError("it has " + std::to_string(inputs.size()) + " inputs besides its weights (" + names +
                      "), where the import reads a network of one image input");
  }
  const onnx::ValueInfoProto& v = *inputs[0];
  const std::string what = "its input '" + v.name() + "'";
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape())
    throw ConfigError(what + " is not a tensor of known rank");
  const auto& type = v.type().tensor_type();
  if (type.elem_type() != onnx::TensorProto::FLOAT && type.elem_type() != onnx::TensorProto::FLOAT16)
    throw ConfigError(what + " is of ONNX type " + std::to_string(type.elem_type()) + ", where images are floats");
  const auto& dims = type.shape().dim();
  if (dims.size() != 4) throw ConfigError(what + " has " + std::to_string(dims.size()) + " dimensions, where images are [N, C, H, W]");
  ImageInput input{v.name(), Shape{}, dims[0].has_dim_value() && dims[0].dim_value() == 1};
  if ((options.height > 0) != (options.width > 0) || options.height < 0 || options.width < 0)
    throw ConfigError("the image size to import it at, " + std::to_string(options.height) + "x" +
                      std::to_string(options.width) + ", is not a height and a width of at least 1");
  const int given[3] = {0, options.height, options.width};
  int sides[3];
  for (int i = 1; i < 4; ++i) {
    if (!dims[i].has_dim_value() && given[i - 1] == 0)
      throw ConfigError(what + "'s dimension " + std::to_string(i) + " is symbolic ('" + dims[i].dim_param() + "'): " +
                        (i == 1 ? "export the model with a fixed channel count"
                                : "give the image size to import it at (OnnxImportOptions; train_images converts "
                                  "it so: --load FILE --image-size N --save FILE.ckpt), or export the model with a "
                                  "fixed one"));
    if (dims[i].has_dim_value() && given[i - 1] > 0 && dims[i].dim_value() != given[i - 1])
      throw ConfigError(what + "'s dimension " + std::to_string(i) + " is " + std::to_string(dims[i].dim_value()) +
                        ", not the " + std::to_string(given[i - 1]) + " asked for: its image size is fixed");
    const std::int64_t d = dims[i].has_dim_value() ? dims[i].dim_value() : given[i - 1];
    if (d < 1 || d > kMaxInputSide)
      throw ConfigError(what + "'s dimension " + std::to_string(i) + " is " + std::to_string(d) + ", outside 1 to " +
                        std::to_string(kMaxInputSide));
    sides[i - 1] = static_cast<int>(d);
  }
  input.shape = Shape{sides[0], sides[1], sides[2]};
  if (input.shape.elements() > kMaxInputElements)
    throw ConfigError(what + " holds " + std::to_string(input.shape.elements()) + " values a sample, over the limit of " +
                      std::to_string(kMaxInputElements));
  return input;
}

std::vector<float> json_floats(const std::string& text, const std::string& key) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  std::vector<float> values;
  if (!j.is_array()) throw ConfigError("its metadata " + key + " is not a JSON array");
  for (const auto& v : j) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) throw ConfigError("its metadata " + key + " holds a value that is not a finite number");
    values.push_back(v.get<float>());
  }
  return values;
}

// What our own export wrote about the model (models/onnx_export.hpp); a file of another producer
// has none of it and keeps the defaults.
void read_metadata(const onnx::ModelProto& model, ModelDescription& d, int classes) {
  std::map<std::string, std::string> props;
  for (const auto& p : model.metadata_props()) props[p.key()] = p.value();
  if (props.count("task")) {
    try {
      d.loss.task = parse_task(props["task"]);
    } catch (const Error&) {
      throw ConfigError("its metadata task '" + props["task"] + "' is not one of cnnengine's tasks");
    }
  }
  if (props.count("class_names")) {
    const nlohmann::json j = nlohmann::json::parse(props["class_names"], nullptr, false);
    if (!j.is_array() || j.size() != static_cast<std::size_t>(classes))
      throw ConfigError("its metadata class_names is not a JSON array of " + std::to_string(classes) + " names");
    d.class_names.clear();
    for (const auto& name : j) {
      if (!name.is_string()) throw ConfigError("its metadata class_names holds a value that is not a string");
      d.class_names.push_back(name.get<std::string>());
    }
  }
  if (props.count("normalization_mean") && props.count("normalization_std")) {
    d.preprocessing.normalization.mean = json_floats(props["normalization_mean"], "normalization_mean");
    d.preprocessing.normalization.stddev = json_floats(props["normalization_std"], "normalization_std");
    try {
      data::check_normalization(d.preprocessing.normalization, d.input[0]);
    } catch (const Error& e) {
      throw ConfigError(std::string("its metadata normalisation: ") + e.what());
    }
    bool identity = true;
    for (float m : d.preprocessing.normalization.mean) identity = identity && m == 0;
    for (float s : d.preprocessing.normalization.stddev) identity = identity && s == 1;
    if (identity) d.preprocessing.normalization = {};
  }
  if (props.count("resize_shorter_side")) {
    const auto side = json_floats("[" + props["resize_shorter_side"] + "]", "resize_shorter_side");
    const data::SampleShape shape{d.input[0], d.input[1], d.input[2]};
    if (!(side[0] >= 1 && side[0] <= data::kMaxResizeShorterSide && side[0] == std::floor(side[0])))
      throw ConfigError("its metadata resize_shorter_side is not a whole number of pixels");
    d.preprocessing.resize_shorter_side = static_cast<int>(side[0]);
    try {
      data::check_framing(shape, d.preprocessing.resize_shorter_side);
    } catch (const Error& e) {
      throw ConfigError(std::string("its metadata resize_shorter_side: ") + e.what());
    }
  }
  if (props.count("threshold")) {
    const auto t = json_floats("[" + props["threshold"] + "]", "threshold");
    if (!(t[0] > 0 && t[0] < 1)) throw ConfigError("its metadata threshold is not between 0 and 1");
    d.loss.threshold = t[0];
  }
}

// A classification unless the file says otherwise, or its output is a map of the input's size
// (a score per class and pixel: a segmentation).
Task default_task(const Network& network) {
  const Shape& out = network.output_shape();
  const Shape& in = network.input_shape();
  return out.rank == 3 && out[1] == in[1] && out[2] == in[2] ? Task::segment : Task::classify;
}

std::vector<float> parameter_block(const Network& network, std::vector<onnx_import::LayerParameters>& params) {
  std::vector<float> block(ParameterStore::planned_parameter_floats(network), 0.f);
  for (const ParameterStore::Place& place : ParameterStore::places(network)) {
    for (auto& [name, values] : params[static_cast<std::size_t>(place.node)])
      if (name == place.name) {
        std::copy(values.begin(), values.end(), block.begin() + static_cast<std::ptrdiff_t>(place.offset));
        std::vector<float>().swap(values);
      }
  }
  return block;
}

}  // namespace

bool onnx_import_available() { return true; }

ImportedModel import_onnx(const std::filesystem::path& path, const OnnxImportOptions& options) {
  onnx::ModelProto model = read_model(path);
  try {
    const int opset = opset_of(model);
    onnx::GraphProto& graph = *model.mutable_graph();
    if (graph.node_size() > kMaxOnnxNodes)
      throw ConfigError("it has " + std::to_string(graph.node_size()) + " nodes, over the limit of " +
                        std::to_string(kMaxOnnxNodes));
    if (graph.output_size() < 1) throw ConfigError("its graph has no output");
    const ImageInput input = image_input(graph, options);
    onnx_import::GraphResult read =
        onnx_import::GraphImport(graph, opset, input.name, input.shape, input.batch_is_one).run();
    LossOptions loss;
    loss.task = default_task(read.network);
    read.network.set_loss(loss);
    ModelDescription description = describe_model(read.network);
    read_metadata(model, description, read.network.num_classes());
    read.network.set_loss(description.loss);
    std::vector<float> parameters = parameter_block(read.network, read.parameters);
    return ImportedModel{std::move(read.network), std::move(description), std::move(parameters), std::move(read.notes)};
  } catch (const ConfigError& e) {
    throw ConfigError("ONNX import of " + path.string() + ": " + e.what());
  }
}

}  // namespace cnn
