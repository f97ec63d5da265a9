#include "models/network_text.hpp"

#include <climits>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "base/error.hpp"
#include "base/regular_file.hpp"
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

// Options each layer accepts besides as= and in=.
const std::map<std::string, std::set<std::string>> kLayerOptions = {
    {"conv", {"stride", "pad", "bias"}}, {"maxpool", {"stride", "pad"}}, {"avgpool", {"stride", "pad"}},
    {"dense", {"bias"}}, {"relu", {}}, {"flatten", {}}, {"batchnorm", {"momentum", "eps"}}, {"globalavgpool", {}},
    {"dropout", {}}, {"add", {}}};

class LineError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// One non-empty line, split into its layer word, positional arguments and key=value options.
struct Line {
  std::string op;
  std::vector<std::string> args;
  std::map<std::string, std::string> options;
};

std::string accepted_options(const std::set<std::string>& own) {
  std::string text;
  for (const auto& key : own) text += key + "=, ";
  return text + "as=, in=";
}

Line split(const std::string& text) {
  Line line;
  std::istringstream words(text);
  words >> line.op;
  const auto known = kLayerOptions.find(line.op);
  if (known == kLayerOptions.end()) throw LineError("unknown layer '" + line.op + "'");
  std::string word;
  while (words >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) {
      line.args.push_back(word);
      continue;
    }
    const std::string key = word.substr(0, eq);
    if (key != "as" && key != "in" && !known->second.count(key))
      throw LineError("unknown option '" + key + "' for " + line.op + " (accepted: " + accepted_options(known->second) +
                      ")");
    if (!line.options.emplace(key, word.substr(eq + 1)).second) throw LineError("option '" + key + "=' given twice");
  }
  return line;
}

double number(const std::string& text) {
  try {
    std::size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw LineError("'" + text + "' is not a number");
}

int whole_number(const std::string& text) {
  const double value = number(text);
  if (!std::isfinite(value) || value != std::floor(value) || value < INT_MIN || value > INT_MAX)
    throw LineError("'" + text + "' is not a whole number");
  return static_cast<int>(value);
}

class Parser {
 public:
  explicit Parser(Shape input) : net_(input) {}

  // `line_no` is where a name given with as= is recorded, for the "already taken" message.
  void add_line(const std::string& text, int line_no) {
    line_no_ = line_no;
    Line line = split(text);
    std::vector<int> inputs;
    if (line.options.count("in")) inputs.push_back(named(line.options["in"]));
    std::unique_ptr<Layer> layer = make_layer(line, inputs);
    const int id = net_.add(std::move(layer), inputs);
    line_of_.resize(static_cast<std::size_t>(id) + 1, line_no);
    if (line.options.count("as")) name_output(line.options["as"], id);
  }

  // The line that made node `id` (0: the input).
  int line_of(int id) const { return line_of_.at(static_cast<std::size_t>(id)); }

  Network take() { return std::move(net_); }

 private:
  static void need(const Line& line, std::size_t count, const char* usage) {
    if (line.args.size() != count) throw LineError(std::string("expected: ") + usage);
  }

  static int option(const Line& line, const std::string& key, int fallback) {
    const auto it = line.options.find(key);
    return it == line.options.end() ? fallback : whole_number(it->second);
  }

  static float real_option(const Line& line, const std::string& key, float fallback) {
    const auto it = line.options.find(key);
    return it == line.options.end() ? fallback : static_cast<float>(number(it->second));
  }

  static bool bias_option(const Line& line) {
    const int bias = option(line, "bias", 1);
    if (bias != 0 && bias != 1) throw LineError("bias= takes 0 or 1, got " + std::to_string(bias));
    return bias == 1;
  }

  std::unique_ptr<Layer> make_layer(const Line& line, std::vector<int>& inputs) {
    const std::string& op = line.op;
    if (op == "conv") {
      need(line, 2, "conv OUT KERNEL [stride=S] [pad=P] [bias=0|1]");
      return std::make_unique<Conv2D>(whole_number(line.args[0]), whole_number(line.args[1]), option(line, "stride", 1),
                                      option(line, "pad", 0), bias_option(line));
    }
    if (op == "maxpool" || op == "avgpool") {
      need(line, 1, "maxpool|avgpool WINDOW [stride=S] [pad=P]");
      return std::make_unique<Pool2D>(op == "maxpool" ? PoolMode::max : PoolMode::average, whole_number(line.args[0]),
                                      option(line, "stride", 0), option(line, "pad", 0));
    }
    if (op == "dense") {
      need(line, 1, "dense UNITS [bias=0|1]");
      return std::make_unique<Dense>(whole_number(line.args[0]), bias_option(line));
    }
    if (op == "dropout") {
      need(line, 1, "dropout P");
      return std::make_unique<Dropout>(static_cast<float>(number(line.args[0])));
    }
    if (op == "add") {
      need(line, 1, "add NAME");
      if (inputs.empty()) inputs.push_back(net_.last());
      inputs.push_back(named(line.args[0]));
      return std::make_unique<Add>();
    }
    need(line, 0, (op + " (no arguments)").c_str());
    if (op == "relu") return std::make_unique<ReLU>();
    if (op == "flatten") return std::make_unique<Flatten>();
    if (op == "batchnorm")
      return std::make_unique<BatchNorm2D>(real_option(line, "momentum", 0.1f), real_option(line, "eps", 1e-5f));
    return std::make_unique<Pool2D>(Pool2D::global_average());  // globalavgpool
  }

  int named(const std::string& name) const {
    if (name.empty()) throw LineError("in= and add need a name");
    const auto it = names_.find(name);
    if (it == names_.end()) throw LineError("no output is named '" + name + "'");
    return it->second.id;
  }

  void name_output(const std::string& name, int id) {
    if (name.empty()) throw LineError("as= needs a name");
    const auto it = names_.find(name);
    if (it != names_.end())
      throw LineError("the name '" + name + "' is already taken" +
                      (it->second.line ? " on line " + std::to_string(it->second.line) : " (the network input)"));
    names_[name] = {id, line_no_};
  }

  struct Name {
    int id = 0, line = 0;  // line 0: the input
  };
  Network net_;
  std::map<std::string, Name> names_{{"input", {0, 0}}};
  std::vector<int> line_of_{0};
  int line_no_ = 0;
};

void check_input(const Shape& input, const std::string& source) {
  std::size_t elements = 1;
  for (int d = 0; d < 3; ++d) {
    if (input[d] < 1 || input[d] > kMaxInputSide)
      throw ShapeError(source + ": the input " + input.str() + " has a side outside 1 to " +
                       std::to_string(kMaxInputSide));
    elements *= static_cast<std::size_t>(input[d]);
  }
  if (elements > kMaxInputElements)
    throw ShapeError(source + ": the input " + input.str() + " holds " + std::to_string(elements) +
                     " values a sample, over the limit of " + std::to_string(kMaxInputElements));
}

}  // namespace

Network parse_network(const std::string& text, Shape input, int classes, const std::string& source) {
  check_input(input, source);
  if (text.size() > kMaxNetworkTextBytes)
    throw ConfigError(source + ": " + std::to_string(text.size()) + " bytes of network text, over the limit of " +
                      std::to_string(kMaxNetworkTextBytes));
  Parser parser(input);
  std::istringstream lines(text);
  int layers = 0;
  std::string raw;
  int line_no = 0;
  bool any = false;
  while (std::getline(lines, raw)) {
    ++line_no;
    raw = raw.substr(0, raw.find('#'));
    if (raw.find_first_not_of(" \t\r\v\f") == std::string::npos) continue;
    if (++layers > kMaxNetworkLayers)
      throw ConfigError(source + ":" + std::to_string(line_no) + ": more than " + std::to_string(kMaxNetworkLayers) +
                        " layers");
    try {
      parser.add_line(raw, line_no);
      any = true;
    } catch (const ShapeError& e) {  // the file and line in front, the kind kept
      throw ShapeError(source + ":" + std::to_string(line_no) + ": " + e.what());
    } catch (const ConfigError& e) {  // LineError and the layers' own checks
      throw ConfigError(source + ":" + std::to_string(line_no) + ": " + e.what());
    }
  }
  if (!any) throw ConfigError(source + ": describes no layer");
  // Said here, with its line, rather than by the planner: a layer whose output nothing reads is a
  // mistake in the text (a missing in= or add).
  Network net = parser.take();
  std::vector<bool> read(static_cast<std::size_t>(net.size()));
  for (int id = 0; id < net.size(); ++id)
    for (int in : net.node(id).inputs) read[static_cast<std::size_t>(in)] = true;
  for (int id = 1; id < net.last(); ++id)
    if (!read[static_cast<std::size_t>(id)])
      throw ShapeError(source + ":" + std::to_string(parser.line_of(id)) + ": the output of " + net.node(id).name +
                       " is never used (a later line's in= or add must name it, or it must come last)");
  if (classes > 0 && net.output_shape().elements() != static_cast<std::size_t>(classes))
    throw ShapeError(source + ": the network ends with " + net.output_shape().str() + " outputs but the data has " +
                     std::to_string(classes) + " classes");
  return net;
}

Network load_network_file(const std::filesystem::path& path, Shape input, int classes) {
  if (const std::string problem = regular_file_problem(path); !problem.empty())
    throw ConfigError("cannot read the network file " + path.string() + ": it " + problem);
  std::error_code ec;
  if (std::filesystem::file_size(path, ec) > kMaxNetworkTextBytes && !ec)
    throw ConfigError("cannot read the network file " + path.string() + ": over the limit of " +
                      std::to_string(kMaxNetworkTextBytes) + " bytes of network text");
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read the network file " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  return parse_network(text.str(), input, classes, path.string());
}

}  // namespace cnn
