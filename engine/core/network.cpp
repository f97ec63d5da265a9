#include <cnnengine/engine/core/network.hpp>

#include <climits>
#include <cstdint>
#include <iomanip>
#include <sstream>

#include <cnnengine/base/error.hpp>

namespace cnn {
namespace {

// Layers index a sample with int: every dimension positive, at most INT_MAX elements in all.
// Returns what is wrong, or nothing. Counted in 64 bits: the dimensions may multiply past int.
std::string sample_shape_problem(const Shape& shape) {
  std::int64_t elements = 1;
  for (int i = 0; i < shape.rank; ++i) {
    if (shape[i] <= 0) return "dimension " + std::to_string(shape[i]) + " is not positive";
    elements *= shape[i];
    if (elements > INT_MAX)
      return "more than " + std::to_string(INT_MAX) + " elements per sample";
  }
  return {};
}

}  // namespace

Network::Network(Shape input_shape) {
  if (input_shape.rank != 3) throw ShapeError("network input must be CxHxW, got " + input_shape.str());
  if (const std::string problem = sample_shape_problem(input_shape); !problem.empty())
    throw ShapeError("network input " + input_shape.str() + ": " + problem);
  Node input;
  input.shape = input_shape;
  input.name = "input";
  nodes_.push_back(std::move(input));
}

int Network::add(std::unique_ptr<Layer> layer, std::vector<int> inputs) {
  if (!layer) throw ConfigError("network: null layer");
  if (inputs.empty()) inputs.push_back(last());
  const int id = size();
  const int takes = layer->input_count();
  if (takes == 0 ? inputs.size() < 2 : static_cast<int>(inputs.size()) != takes)
    throw ShapeError(layer->describe() + ": takes " + (takes == 0 ? std::string("two or more") : std::to_string(takes)) +
                     " inputs, given " + std::to_string(inputs.size()));
  std::vector<Shape> shapes;
  for (int in : inputs) {
    if (in < 0 || in >= id) throw ConfigError(layer->describe() + ": input node " + std::to_string(in) + " does not exist");
    shapes.push_back(node(in).shape);
  }
  Node n;
  try {
    n.shape = layer->output_shape(shapes);
  } catch (const ShapeError& e) {
    throw ShapeError("layer " + std::to_string(id) + " (" + e.what() + ")");
  }
  if (const std::string problem = sample_shape_problem(n.shape); !problem.empty())
    throw ShapeError("layer " + std::to_string(id) + " (" + layer->describe() + ") -> " + n.shape.str() + ": " + problem);
  n.value = layer->is_view() ? node(inputs[0]).value : id;
  n.name = std::to_string(id) + ":" + layer->type_name();
  n.inputs = std::move(inputs);
  n.layer = std::move(layer);
  nodes_.push_back(std::move(n));
  return id;
}

std::vector<std::vector<int>> Network::value_readers() const {
  std::vector<std::vector<int>> readers(static_cast<std::size_t>(size()));
  for (int id = 1; id < size(); ++id) {
    const Node& n = node(id);
    if (n.layer->is_view()) continue;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      auto& of_value = readers[static_cast<std::size_t>(node(n.inputs[k]).value)];
      if (of_value.empty() || of_value.back() != id) of_value.push_back(id);  // once per reader
    }
  }
  return readers;
}

TrainingBatchNeed Network::training_batch_need() const {
  TrainingBatchNeed most;
  // Frozen layers in eval mode run as in inference.
  for (int id = frozen_mode_ == FrozenMode::train ? 1 : frozen_through_ + 1; id < size(); ++id) {
    const TrainingBatchNeed need = node(id).layer->training_batch_need();
    if (need.samples <= most.samples) continue;
    most.samples = need.samples;
    most.why = "layer " + node(id).name + " on " + node(node(id).inputs[0]).shape.str() + " needs at least " +
               std::to_string(need.samples) + " samples per training micro-batch: " + need.why;
  }
  return most;
}

void Network::freeze_through(int through) {
  if (through < 0 || through >= last())
    throw ConfigError("freezing through node " + std::to_string(through) + ": the nodes are 1 to " +
                      std::to_string(last()) + ", and the last one stays trainable");
  bool trains = false;
  for (int id = through + 1; id < size() && !trains; ++id)
    for (const ParamSpec& p : node(id).layer->parameters()) trains = trains || p.trainable;
  if (!trains)
    throw ConfigError("freezing through node " + std::to_string(through) + " (" + node(through).name +
                      ") leaves no parameter to train");
  frozen_through_ = through;
}

int Network::head() const {
  for (int id = last(); id >= 1; --id)
    if (!node(id).layer->parameters().empty()) return id;
  return 0;
}

int Network::commute_relu_and_max_pool() {
  const std::vector<std::vector<int>> readers = value_readers();  // a swap changes no edge
  int swapped = 0;
  for (int id = 1; id + 1 < size(); ++id) {
    Node& first = node(id);
    Node& second = node(id + 1);
    if (!first.layer->commutes_with_max_pooling() || !second.layer->is_max_pooling() ||
        second.inputs != std::vector<int>{id} || readers[static_cast<std::size_t>(id)] != std::vector<int>{id + 1})
      continue;
    // Node id becomes the pooling of the ReLU's input, node id + 1 the ReLU of that: readers of
    // id + 1 see the same values as before.
    std::swap(first.layer, second.layer);
    first.shape = first.layer->output_shape({node(first.inputs[0]).shape});
    second.shape = second.layer->output_shape({first.shape});
    first.name = std::to_string(id) + ":" + first.layer->type_name();
    second.name = std::to_string(id + 1) + ":" + second.layer->type_name();
    ++swapped;
  }
  return swapped;
}

double Network::forward_multiply_adds() const {
  double total = 0;
  for (int id = 1; id < size(); ++id)
    if (node(id).layer) total += node(id).layer->forward_cost().multiply_adds;
  return total;
}

std::string Network::summary() const {
  std::ostringstream out;
  std::size_t total = 0, frozen = 0;
  for (int id = 0; id < size(); ++id) {
    const Node& n = node(id);
    std::size_t params = 0;
    if (n.layer)
      for (const auto& p : n.layer->parameters())
        if (p.trainable) params += p.shape.elements();
    (this->frozen(id) ? frozen : total) += params;
    out << "  " << std::left << std::setw(3) << id << std::setw(34)
        << (n.layer ? n.layer->describe() : std::string("input")) << " -> " << std::setw(12) << n.shape.str();
    if (params) out << "  (" << params << (this->frozen(id) ? " parameters, frozen)" : " parameters)");
    if (n.inputs.size() > 1 || (id > 0 && n.inputs[0] != id - 1)) {
      out << "  from";
      for (int in : n.inputs) out << " " << in;
    }
    out << "\n";
  }
  out << "  total trainable parameters: " << total << "\n";
  const double multiply_adds = forward_multiply_adds();
  const bool giga = multiply_adds >= 1e9;
  out << "  forward pass a sample: " << std::fixed << std::setprecision(3) << multiply_adds * (giga ? 1e-9 : 1e-6)
      << (giga ? " G" : " M") << " multiply-adds in convolutions and dense layers (the \"FLOPs\" of torchvision's tables)\n";
  if (frozen_through_) out << "  frozen: nodes 1 to " << frozen_through_ << ", " << frozen << " parameters\n";
  return out.str();
}

int Network::num_classes() const {
  const Shape& out = output_shape();
  if (loss_.task == Task::segment && out.rank == 3) return out[0];
  return static_cast<int>(out.elements());
}

void Network::check_loss() const {
  const Shape& out = output_shape();
  const Shape& in = input_shape();
  if (loss_.task == Task::segment) {
    if (out.rank != 3 || out[1] != in[1] || out[2] != in[2])
      throw ShapeError("a segmentation network's output must be [classes, " + std::to_string(in[1]) + ", " +
                       std::to_string(in[2]) + "] (a class score a pixel of its " + in.str() + " input), but " +
                       node(last()).name + " gives " + out.str());
  }
  if (loss_.task == Task::segment && num_classes() < 2)
    throw ShapeError("a segmentation network's output has " + std::to_string(num_classes()) +
                     " channel: it needs one a class, at least two");
  try {
    check_loss_options(loss_, num_classes());
  } catch (const ConfigError& e) {
    throw ConfigError("the " + to_string(loss_.task) + " loss of a network of " + std::to_string(num_classes()) +
                      (loss_.task == Task::regress ? " targets: " : " classes: ") + e.what());
  }
}

std::size_t Network::target_bytes() const {
  return cnn::target_bytes(loss_.task, num_classes(), input_shape()[1], input_shape()[2]);
}

}  // namespace cnn
