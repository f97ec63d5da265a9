// A layer of one's own, registered with its word, parser and text form, is read and written by
// network text as a built-in one is.
#include <catch2/catch.hpp>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/layers/registry.hpp>
#include <cnnengine/models/network_text.hpp>

using namespace cnn;

namespace {

// The identity, with a number to carry through the text and an option.
class Tagged final : public Layer {
 public:
  Tagged(int tag, bool twice) : tag_(tag), twice_(twice) {}
  std::string type_name() const override { return "tagged_test"; }
  std::string describe() const override { return "tagged " + std::to_string(tag_); }
  Shape output_shape(const std::vector<Shape>& inputs) override { return inputs.at(0); }
  void forward(const LayerContext& c) override { c.backend->copy_or_add(c.inputs[0], c.output, false); }
  void backward(const LayerContext& c) override {
    if (wants_gradient(c, 0)) c.backend->copy_or_add(c.grad_output, c.grad_inputs[0], c.accumulate[0]);
  }
  int tag() const { return tag_; }
  bool twice() const { return twice_; }

 private:
  int tag_;
  bool twice_;
};

void register_tagged() {
  if (layer_type_for_word("tagged")) return;  // once per test process
  LayerType type;
  type.type_name = "tagged_test";
  type.layer_class = &typeid(Tagged);
  type.word = "tagged";
  type.usage = "tagged TAG [twice=0|1]";
  type.options = {"twice"};
  type.parse = [](LayerLine& line) {
    line.expect_arguments(1);
    return std::make_unique<Tagged>(line.whole_number(0), line.flag_option("twice", false));
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    const auto& tagged = static_cast<const Tagged&>(layer);
    return std::to_string(tagged.tag()) + (tagged.twice() ? " twice=1" : "");
  };
  register_layer_type(std::move(type));
}

std::string parse_error(const std::string& text) {
  try {
    parse_network(text, Shape{1, 8, 8}, 10, "net.txt");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a registered layer of one's own round-trips through network text", "[network]") {
  register_tagged();
  const std::string text = "conv 4 3\ntagged 7 twice=1 as=n2\ntagged 8 in=n2\nflatten\ndense 10\n";
  const Network net = parse_network(text, Shape{1, 8, 8}, 10);
  REQUIRE(net.size() == 6);
  CHECK(net.node(2).name == "2:tagged_test");
  const auto& first = dynamic_cast<const Tagged&>(*net.node(2).layer);
  CHECK(first.tag() == 7);
  CHECK(first.twice());
  CHECK_FALSE(dynamic_cast<const Tagged&>(*net.node(3).layer).twice());
  CHECK(network_text(net) == "conv 4 3\ntagged 7 twice=1\ntagged 8\nflatten\ndense 10\n");
  const Network again = parse_network(network_text(net), Shape{1, 8, 8}, 10);
  CHECK(network_text(again) == network_text(net));
}

TEST_CASE("a registered layer's lines are checked as a built-in's", "[network]") {
  register_tagged();
  CHECK_THAT(parse_error("tagged\n"), Catch::Contains("net.txt:1: expected: tagged TAG [twice=0|1]"));
  CHECK_THAT(parse_error("tagged 1 twice=2\n"), Catch::Contains("net.txt:1: twice= takes 0 or 1, got 2"));
  CHECK_THAT(parse_error("tagged 1 pad=2\n"),
             Catch::Contains("net.txt:1: unknown option 'pad' for tagged (accepted: twice=, as=, in=)"));
  CHECK_THAT(parse_error("tagged x\n"), Catch::Contains("net.txt:1: 'x' is not a number"));
  CHECK_THAT(parse_error("tag 1\n"), Catch::Contains("unknown layer 'tag' (known: conv,") &&
                                         Catch::Contains(", tagged"));
}
