// What a network text may ask for (models/network_text.hpp): refused before anything is built or
// planned, naming the file and, where there is one, the line.
#include <catch2/catch.hpp>

#include <string>

#include <cnnengine/base/error.hpp>
#include <cnnengine/models/network_text.hpp>

using namespace cnn;

namespace {

std::string error_of(const std::string& text, Shape input = Shape{1, 28, 28}) {
  try {
    parse_network(text, input, 10, "net.txt");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string repeated(const std::string& line, int times) {
  std::string text;
  for (int i = 0; i < times; ++i) text += line;
  return text;
}

}  // namespace

TEST_CASE("a network text of more layers than the limit is refused at the first one past it", "[models]") {
  const std::string at_limit = "flatten\n" + repeated("relu\n", kMaxNetworkLayers - 2) + "dense 10\n";
  CHECK(error_of(at_limit) == "(no error)");
  const std::string over = "flatten\n" + repeated("relu\n", kMaxNetworkLayers) + "dense 10\n";
  CHECK(error_of(over) == "net.txt:" + std::to_string(kMaxNetworkLayers + 1) + ": more than " +
                              std::to_string(kMaxNetworkLayers) + " layers");
}

TEST_CASE("a network text longer than the limit is refused before it is read", "[models]") {
  const std::string text = "flatten\ndense 10\n" + std::string(kMaxNetworkTextBytes, '#');
  CHECK_THAT(error_of(text), Catch::Contains("bytes of network text, over the limit of"));
}

TEST_CASE("an input too large for one sample is refused, whatever the layers", "[models]") {
  CHECK_THAT(error_of("flatten\ndense 10\n", Shape{1, 20000, 20000}),
             Catch::Contains("net.txt: the input [1x20000x20000] holds 400000000 values a sample, over the limit"));
  CHECK_THAT(error_of("flatten\ndense 10\n", Shape{1, 1, kMaxInputSide + 1}),
             Catch::Contains("has a side outside 1 to 65536"));
  CHECK_THAT(error_of("flatten\ndense 10\n", Shape{0, 28, 28}), Catch::Contains("has a side outside 1 to 65536"));
  CHECK_THROWS_AS(parse_network("flatten\ndense 10\n", Shape{1, 20000, 20000}, 10), ShapeError);
}

TEST_CASE("a layer whose output nothing reads is named with its line", "[models]") {
  CHECK_THAT(error_of("conv 8 3 pad=1\nrelu as=unused\nconv 8 3 pad=1 in=input\nflatten\ndense 10\n"),
             Catch::StartsWith("net.txt:2: the output of") && Catch::Contains("is never used"));
  // Every layer read by the next, or by a later in= or add: no error.
  CHECK(error_of("conv 8 3 pad=1 as=a\nrelu\nconv 8 3 pad=1\nadd a\nflatten\ndense 10\n") == "(no error)");
}
