#include "engine/presets.hpp"

#include <fstream>
#include <map>
#include <sstream>

#include "layers/add.hpp"
#include "layers/batchnorm2d.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/flatten.hpp"
#include "layers/pool2d.hpp"
#include "layers/relu.hpp"

namespace cnn {
namespace {

Network small(Shape input, int classes, bool batchnorm) {
  Network net(input);
  for (int channels : {32, 64}) {
    net.emplace<Conv2D>(channels, 3, 1, 1, !batchnorm);
    if (batchnorm) net.emplace<BatchNorm2D>();
    net.emplace<ReLU>();
    net.emplace<Pool2D>(PoolMode::max, 2);
  }
  net.emplace<Flatten>();
  net.emplace<Dense>(128);
  net.emplace<ReLU>();
  if (batchnorm) net.emplace<Dropout>(0.3f);
  net.emplace<Dense>(classes);
  return net;
}

// conv-bn-relu, conv-bn, + shortcut (1x1 conv-bn when the shape changes), relu.
int basic_block(Network& net, int in, int channels, int stride) {
  const int in_channels = net.node(in).shape[0];
  net.add(std::make_unique<Conv2D>(channels, 3, stride, 1, false), {in});
  net.emplace<BatchNorm2D>();
  net.emplace<ReLU>();
  net.emplace<Conv2D>(channels, 3, 1, 1, false);
  const int branch = net.emplace<BatchNorm2D>();
  int shortcut = in;
  if (stride != 1 || in_channels != channels) {
    net.add(std::make_unique<Conv2D>(channels, 1, stride, 0, false), {in});
    shortcut = net.emplace<BatchNorm2D>();
  }
  net.add(std::make_unique<Add>(), {branch, shortcut});
  return net.emplace<ReLU>();
}

Network resnet(Shape input, int classes, std::vector<int> widths, int blocks_per_stage) {
  Network net(input);
  net.emplace<Conv2D>(widths.front(), 3, 1, 1, false);
  net.emplace<BatchNorm2D>();
  int x = net.emplace<ReLU>();
  for (std::size_t stage = 0; stage < widths.size(); ++stage)
    for (int block = 0; block < blocks_per_stage; ++block)
      x = basic_block(net, x, widths[stage], stage > 0 && block == 0 ? 2 : 1);
  net.add(std::make_unique<Pool2D>(Pool2D::global_average()));
  net.emplace<Flatten>();
  net.emplace<Dense>(classes);
  return net;
}

[[noreturn]] void fail(const std::string& source, int line, const std::string& what) {
  throw std::invalid_argument(source + ":" + std::to_string(line) + ": " + what);
}

}  // namespace

std::vector<std::string> preset_names() { return {"small", "small-bn", "resnet", "resnet18"}; }

Network make_preset(const std::string& name, Shape input, int classes) {
  if (name == "small") return small(input, classes, false);
  if (name == "small-bn") return small(input, classes, true);
  if (name == "resnet") return resnet(input, classes, {16, 32, 64}, 2);
  if (name == "resnet18") return resnet(input, classes, {64, 128, 256, 512}, 2);
  std::string names;
  for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown model '" + name + "': use a preset (" + names + ") or a network file");
}

Network parse_network(const std::string& text, Shape input, int classes, const std::string& source) {
  Network net(input);
  std::map<std::string, int> names{{"input", 0}};
  std::istringstream lines(text);
  std::string raw;
  int line_no = 0;
  while (std::getline(lines, raw)) {
    ++line_no;
    raw = raw.substr(0, raw.find('#'));
    std::istringstream words(raw);
    std::string op;
    if (!(words >> op)) continue;
    std::vector<std::string> args;
    std::map<std::string, std::string> options;
    std::string word;
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq != std::string::npos) options[word.substr(0, eq)] = word.substr(eq + 1);
      else args.push_back(word);
    }
    auto number = [&](const std::string& text) {
      try {
        std::size_t used = 0;
        const double value = std::stod(text, &used);
        if (used == text.size()) return value;
      } catch (const std::exception&) {
      }
      fail(source, line_no, "'" + text + "' is not a number");
    };
    auto integer = [&](std::size_t i) {
      const double value = number(args[i]);
      if (value != static_cast<int>(value)) fail(source, line_no, "'" + args[i] + "' is not a whole number");
      return static_cast<int>(value);
    };
    auto option = [&](const std::string& key, int fallback) {
      auto it = options.find(key);
      return it == options.end() ? fallback : static_cast<int>(number(it->second));
    };
    auto need = [&](std::size_t count, const char* usage) {
      if (args.size() != count) fail(source, line_no, std::string("expected: ") + usage);
    };
    auto named = [&](const std::string& name) {
      auto it = names.find(name);
      if (it == names.end()) fail(source, line_no, "no output is named '" + name + "'");
      return it->second;
    };
    std::vector<int> inputs;
    if (options.count("in")) inputs.push_back(named(options["in"]));

    std::unique_ptr<Layer> layer;
    try {
      if (op == "conv") {
        need(2, "conv OUT KERNEL [stride=S] [pad=P] [bias=0]");
        layer = std::make_unique<Conv2D>(integer(0), integer(1), option("stride", 1), option("pad", 0), option("bias", 1) != 0);
      } else if (op == "dense") {
        need(1, "dense UNITS");
        layer = std::make_unique<Dense>(integer(0));
      } else if (op == "relu") layer = std::make_unique<ReLU>();
      else if (op == "flatten") layer = std::make_unique<Flatten>();
      else if (op == "batchnorm") layer = std::make_unique<BatchNorm2D>();
      else if (op == "globalavgpool") layer = std::make_unique<Pool2D>(Pool2D::global_average());
      else if (op == "maxpool" || op == "avgpool") {
        need(1, "maxpool|avgpool WINDOW [stride=S] [pad=P]");
        layer = std::make_unique<Pool2D>(op == "maxpool" ? PoolMode::max : PoolMode::average, integer(0),
                                         option("stride", 0), option("pad", 0));
      } else if (op == "dropout") {
        need(1, "dropout P");
        layer = std::make_unique<Dropout>(static_cast<float>(number(args[0])));
      } else if (op == "add") {
        need(1, "add NAME");
        if (inputs.empty()) inputs.push_back(net.last());
        inputs.push_back(named(args[0]));
        layer = std::make_unique<Add>();
      } else {
        fail(source, line_no, "unknown layer '" + op + "'");
      }
      const int id = net.add(std::move(layer), inputs);
      if (options.count("as")) names[options["as"]] = id;
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).rfind(source + ":", 0) == 0) throw;
      fail(source, line_no, e.what());
    }
  }
  if (net.size() == 1) throw std::invalid_argument(source + ": describes no layer");
  if (static_cast<int>(net.output_shape().elements()) != classes)
    throw ShapeError(source + ": the network ends with " + net.output_shape().str() + " outputs but the data has " +
                     std::to_string(classes) + " classes");
  return net;
}

Network load_network_file(const std::filesystem::path& path, Shape input, int classes) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read the network file " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  return parse_network(text.str(), input, classes, path.string());
}

Network make_network(const std::string& model, Shape input, int classes) {
  for (const auto& name : preset_names())
    if (model == name) return make_preset(model, input, classes);
  if (std::filesystem::exists(model)) return load_network_file(model, input, classes);
  return make_preset(model, input, classes);  // throws with the list of presets
}

}  // namespace cnn
