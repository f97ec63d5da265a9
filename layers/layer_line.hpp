#pragma once
// The network text a layer type reads and writes: one line's arguments and options, read as
// numbers with the format's messages, and floats written so that they read back the same.
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cnn {

struct LayerType;

// One line of network text as a layer type's parser reads it: the positional arguments, the
// key=value options (only those the type accepts, checked before), and the layer's inputs.
// Every accessor throws a ConfigError naming what was wrong; parse_network puts the file and
// line in front.
class LayerLine {
 public:
  // `output_named` finds the output a name refers to (as=, or "input"), and throws when none has
  // it; `previous` is the node the layer reads by default; `inputs` what in= gave (or nothing).
  LayerLine(const LayerType& type, std::vector<std::string> arguments, std::map<std::string, std::string> options,
            std::vector<int> inputs, int previous, std::function<int(const std::string&)> output_named);

  // Throws "expected: <usage>" unless the line has `count` positional arguments.
  void expect_arguments(std::size_t count) const;
  const std::string& argument(std::size_t index) const;
  double number(std::size_t index) const;
  int whole_number(std::size_t index) const;

  int whole_option(const std::string& key, int fallback) const;
  float real_option(const std::string& key, float fallback) const;
  // key=0 or key=1.
  bool flag_option(const std::string& key, bool fallback) const;

  // The layer also reads the output that argument `index` names, after its first input (in='s,
  // or the previous line's): add NAME.
  void read_named_output(std::size_t index);
  // The inputs the layer reads; empty: the previous line's output.
  const std::vector<int>& inputs() const { return inputs_; }

 private:
  const LayerType& type_;
  std::vector<std::string> arguments_;
  std::map<std::string, std::string> options_;
  std::vector<int> inputs_;
  int previous_;
  std::function<int(const std::string&)> output_named_;
};

// The shortest text that reads back as the same float ("0.3", not "0.300000012").
std::string exact_text(float value);

}  // namespace cnn
