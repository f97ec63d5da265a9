// Network text for the joining and shaping layers: concat, mul, upsample, globalmaxpool and
// pooling's ceil=1: parsed, written back, read again, and the errors each line can make.
#include <catch2/catch.hpp>

#include <cnnengine/base/error.hpp>
#include <cnnengine/layers/registry.hpp>
#include <cnnengine/models/network_text.hpp>

using namespace cnn;

namespace {

std::string parse_error(const std::string& text, Shape input = Shape{1, 28, 28}) {
  try {
    parse_network(text, input, 10, "net.txt");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

const char* const kNetwork = R"(conv 8 3 pad=1 as=stem
relu as=a
conv 4 1 in=stem as=b
conv 2 3 pad=1 in=stem
concat a b as=cat
globalavgpool
conv 2 1
relu
conv 14 1 as=gate
mul gate in=cat
upsample 2
upsample 3 mode=bilinear
maxpool 3 stride=2 ceil=1
avgpool 2 ceil=1
globalmaxpool
flatten
dense 10
)";

}  // namespace

TEST_CASE("network text reads and writes concat, mul, upsample, globalmaxpool and ceil=1", "[network][join]") {
  const Network net = parse_network(kNetwork, Shape{1, 28, 28}, 10);
  CHECK(net.node(5).layer->type_name() == "concat");
  CHECK(net.node(5).inputs == std::vector<int>{4, 2, 3});  // the previous line's, then a, then b
  CHECK(net.node(5).shape == Shape{14, 28, 28});
  CHECK(net.node(10).layer->type_name() == "multiply");
  CHECK(net.node(10).inputs == std::vector<int>{5, 9});
  CHECK(net.node(10).shape == Shape{14, 28, 28});
  CHECK(net.node(11).shape == Shape{14, 56, 56});
  CHECK(net.node(12).shape == Shape{14, 168, 168});
  CHECK(net.node(13).shape == Shape{14, 84, 84});  // ceil((168 - 3) / 2) + 1
  CHECK(net.node(14).shape == Shape{14, 42, 42});
  CHECK(net.node(15).layer->type_name() == "global_maxpool");
  CHECK(net.node(15).shape == Shape{14, 1, 1});

  const std::string text = network_text(net);
  CHECK(text.find("concat n2 n3 as=n5") != std::string::npos);  // names are written n<node>
  CHECK(text.find("mul n9 in=n5") != std::string::npos);
  CHECK(text.find("upsample 2\n") != std::string::npos);
  CHECK(text.find("upsample 3 mode=bilinear") != std::string::npos);
  CHECK(text.find("maxpool 3 stride=2 ceil=1") != std::string::npos);
  CHECK(text.find("avgpool 2 ceil=1") != std::string::npos);
  CHECK(text.find("globalmaxpool") != std::string::npos);
  const Network again = parse_network(text, Shape{1, 28, 28}, 10);
  REQUIRE(again.size() == net.size());
  for (int id = 1; id < net.size(); ++id) {
    INFO(net.node(id).name);
    CHECK(again.node(id).name == net.node(id).name);
    CHECK(again.node(id).inputs == net.node(id).inputs);
    CHECK(again.node(id).shape == net.node(id).shape);
  }
  CHECK(network_text(again) == text);
}

TEST_CASE("network text reads and writes padding, even or by side, with its value", "[network][join]") {
  const Network net = parse_network("pad 1\npad 0 1 2 3 value=-inf\nmaxpool 2\npad 2 2 2 2 value=0.25\nflatten\ndense 3\n",
                                    Shape{1, 4, 4}, 3);
  CHECK(net.node(1).shape == Shape{1, 6, 6});
  CHECK(net.node(2).shape == Shape{1, 11, 7});  // 2 + 6 + 3 rows, 0 + 6 + 1 columns
  CHECK(net.node(4).shape == Shape{1, 9, 7});
  const std::string text = network_text(net);
  CHECK(text.find("pad 1\npad 0 1 2 3 value=-inf\n") != std::string::npos);
  CHECK(text.find("pad 2 value=0.25\n") != std::string::npos);
  CHECK(network_text(parse_network(text, Shape{1, 4, 4}, 3)) == text);
}

TEST_CASE("a concat of one output with itself and of flat outputs", "[network][join]") {
  const Network net = parse_network("flatten as=f\ndense 5 as=d\nconcat f d d\ndense 10\n", Shape{1, 4, 4}, 10);
  CHECK(net.node(3).inputs == std::vector<int>{2, 1, 2, 2});
  CHECK(net.node(3).shape == Shape{16 + 5 + 5 + 5});
  const std::string text = network_text(net);
  CHECK(network_text(parse_network(text, Shape{1, 4, 4}, 10)) == text);
  const Network twice = parse_network("conv 3 3 as=c\nconcat c\nflatten\ndense 10\n", Shape{1, 8, 8}, 10);
  CHECK(twice.node(2).inputs == std::vector<int>{1, 1});
  CHECK(twice.node(2).shape == Shape{6, 6, 6});
}

TEST_CASE("network text refuses what the joining layers cannot do", "[network][join]") {
  const std::string hw = parse_error("conv 4 3 as=small\nconv 4 3 pad=1 in=input\nconcat small\n");
  CHECK(hw.find("net.txt") != std::string::npos);
  CHECK(hw.find("concat") != std::string::npos);
  CHECK(hw.find("4x28x28") != std::string::npos);
  CHECK(hw.find("4x26x26") != std::string::npos);
  CHECK(parse_error("concat\n").find("expected: concat NAME [NAME...]") != std::string::npos);
  CHECK(parse_error("conv 2 3 as=x\nconcat nowhere\n").find("nowhere") != std::string::npos);

  const std::string mul = parse_error("conv 4 3 as=x\nconv 2 1\nmul x\n");
  CHECK(mul.find("multiply") != std::string::npos);
  CHECK(mul.find("2x26x26") != std::string::npos);
  CHECK(mul.find("4x26x26") != std::string::npos);
  CHECK(parse_error("mul\n").find("expected: mul NAME") != std::string::npos);

  const std::string cubic = parse_error("upsample 2 mode=cubic\n");
  CHECK(cubic.find("cubic") != std::string::npos);
  CHECK(cubic.find("nearest, bilinear") != std::string::npos);
  CHECK(parse_error("upsample 0\n").find("0") != std::string::npos);
  CHECK(parse_error("upsample 1.5\n").find("'1.5' is not a whole number") != std::string::npos);
  CHECK(parse_error("upsample 2 scale=2\n").find("mode") != std::string::npos);  // the accepted options
  CHECK(parse_error("flatten\nupsample 2\n").find("CxHxW") != std::string::npos);

  CHECK(parse_error("pad 1 2\n").find("pad P | pad LEFT RIGHT TOP BOTTOM") != std::string::npos);
  CHECK(parse_error("pad -1\n").find("from 0 to 65536") != std::string::npos);
  CHECK(parse_error("pad 1 value=nan\n").find("NaN") != std::string::npos);
  CHECK(parse_error("flatten\npad 1\n").find("CxHxW") != std::string::npos);

  CHECK(parse_error("maxpool 2 ceil=2\n").find("ceil= takes 0 or 1") != std::string::npos);
  CHECK(parse_error("avgpool 2 ceil=yes\n").find("'yes' is not a number") != std::string::npos);
  CHECK(parse_error("globalmaxpool 2\n").find("expected: globalmaxpool") != std::string::npos);
}

TEST_CASE("an unknown word still lists every layer, the joining ones too", "[network][join]") {
  const std::string e = parse_error("x\n");
  CHECK(e.find("unknown layer 'x'") != std::string::npos);
  for (const LayerType* type : layer_types()) {
    INFO(type->word);
    CHECK(e.find(type->word) != std::string::npos);
  }
  for (const char* word : {"concat", "mul", "upsample", "globalmaxpool"}) CHECK(e.find(word) != std::string::npos);
}
