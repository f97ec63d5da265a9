#include <cnnengine/models/fine_tuning.hpp>

#include <sstream>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/models/network_text.hpp>

namespace cnn {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

}  // namespace

FineTuningNetwork network_for_fine_tuning(const CheckpointInfo& info, const std::filesystem::path& path, int classes,
                                          bool new_head) {
  Network saved = checkpoint_network(info, path);
  if (classes <= 0) classes = saved.num_classes();
  if (saved.num_classes() == classes && !new_head) return {std::move(saved), ""};
  const Node& last = saved.node(saved.last());
  const std::string from = saved.num_classes() == classes
                               ? path.string() + ": a new head was asked for"
                               : path.string() + ": its network gives " + std::to_string(saved.num_classes()) +
                                     " outputs, this data " + std::to_string(classes);
  if (saved.task() != Task::classify && saved.task() != Task::multilabel)
    throw ShapeError(from + ", and a " + to_string(saved.task()) + " network's head is not replaced");
  if (last.layer->type_name() != "dense")
    throw ShapeError(from + ", and its last layer (" + last.layer->describe() +
                     ") is not a dense layer, the head that is replaced for other classes");
  // The text's last line is the head: "dense 1000 [options]" becomes "dense CLASSES [options]".
  std::vector<std::string> lines = lines_of(network_text(saved));
  std::string& head = lines.back();
  const std::size_t units = head.find(' ') + 1, end = head.find(' ', units);
  const std::string old_head = last.layer->describe();
  head = head.substr(0, units) + std::to_string(classes) + (end == std::string::npos ? "" : head.substr(end));
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  Network network = parse_network(text, info.model.input, 0, path.string());
  network.set_loss(info.model.loss);
  std::string change = old_head + " -> " + network.node(network.last()).layer->describe() + " (initialised)";
  return {std::move(network), std::move(change)};
}

}  // namespace cnn
