#include <cnnengine/models/network_text.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "base/regular_file.hpp"
#include "base/utf8.hpp"
#include <cnnengine/layers/registry.hpp>

namespace cnn {
namespace {

class LineError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// One non-empty line, split into its layer type, positional arguments and key=value options.
struct Line {
  const LayerType* type = nullptr;
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
  std::string word;
  words >> word;
  line.type = layer_type_for_word(word);
  if (!line.type) throw LineError("unknown layer '" + quoted_in_message(word) + "' (known: " + layer_words() + ")");
  while (words >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) {
      line.args.push_back(word);
      continue;
    }
    const std::string key = word.substr(0, eq);
    if (key != "as" && key != "in" && !line.type->options.count(key))
      throw LineError("unknown option '" + quoted_in_message(key) + "' for " + line.type->word +
                      " (accepted: " + accepted_options(line.type->options) + ")");
    if (!line.options.emplace(key, word.substr(eq + 1)).second)
      throw LineError("option '" + quoted_in_message(key) + "=' given twice");
  }
  return line;
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
    const auto as = line.options.find("as");
    const std::string name = as == line.options.end() ? std::string() : as->second;
    const bool has_name = as != line.options.end();
    LayerLine layer_line(*line.type, std::move(line.args), std::move(line.options), std::move(inputs), net_.last(),
                         [this](const std::string& output) { return named(output); });
    std::unique_ptr<Layer> layer = line.type->parse(layer_line);
    if (!layer) throw LineError("the layer type of '" + line.type->word + "' made no layer of this line");
    const int id = net_.add(std::move(layer), layer_line.inputs());
    line_of_.resize(static_cast<std::size_t>(id) + 1, line_no);
    if (has_name) name_output(name, id);
  }

  // The line that made node `id` (0: the input).
  int line_of(int id) const { return line_of_.at(static_cast<std::size_t>(id)); }

  Network take() { return std::move(net_); }

 private:
  int named(const std::string& name) const {
    if (name.empty()) throw LineError("in= and add need a name");
    const auto it = names_.find(name);
    if (it == names_.end()) throw LineError("no output is named '" + quoted_in_message(name) + "'");
    return it->second.id;
  }

  void name_output(const std::string& name, int id) {
    if (name.empty()) throw LineError("as= needs a name");
    const auto it = names_.find(name);
    if (it != names_.end())
      throw LineError("the name '" + quoted_in_message(name) + "' is already taken" +
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

// Network text is plain text: a control character (a NUL, an escape) is a binary file or a
// damaged one, refused where it is rather than cutting a later message short.
void check_plain_text(const std::string& line, const std::string& where) {
  for (std::size_t i = 0; i < line.size(); ++i) {
    const auto byte = static_cast<unsigned char>(line[i]);
    if ((byte < 0x20 && byte != '\t' && byte != '\r' && byte != '\v' && byte != '\f') || byte == 0x7F) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", byte);
      throw ConfigError(where + ": a control character (" + hex + ") at column " + std::to_string(i + 1) +
                        ": network text is plain text, one layer a line");
    }
  }
}

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
    check_plain_text(raw, source + ":" + std::to_string(line_no));
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
  // A class score an output, or a class score a pixel (a segmentation's [K, H, W] at the input's size).
  const Shape& out = net.output_shape();
  const bool per_pixel = out.rank == 3 && out[0] == classes && out[1] == input[1] && out[2] == input[2];
  if (classes > 0 && out.elements() != static_cast<std::size_t>(classes) && !per_pixel)
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
