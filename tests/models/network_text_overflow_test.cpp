// Sizes in a network text that overflowed int arithmetic in the layers' shape computations
// (found by fuzz_network_text): each is a clear error naming the line.
#include <catch2/catch.hpp>

#include <string>

#include "base/error.hpp"
#include "models/network_text.hpp"

using namespace cnn;

namespace {

std::string parse_error(const std::string& text) {
  try {
    parse_network(text, Shape{1, 28, 28}, 10, "net.txt");
  } catch (const Error& e) {  // ShapeError, ConfigError
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("network text: a padding of billions is refused, not overflowed", "[network]") {
  SECTION("conv: the output side would be over INT_MAX") {
    const std::string what = parse_error("conv 4 3 pad=2000000000\nflatten\ndense 10\n");
    INFO(what);
    CHECK(what.find("net.txt:1:") != std::string::npos);
    CHECK(what.find("gives an output of 4000000026") != std::string::npos);
    CHECK(what.find("more than 2147483647") != std::string::npos);
  }
  SECTION("maxpool: the output would be over INT_MAX values") {
    const std::string what = parse_error("maxpool 2000000000 stride=1 pad=1999999999\nflatten\ndense 10\n");
    INFO(what);
    CHECK(what.find("net.txt:1:") != std::string::npos);
    CHECK(what.find("more than 2147483647") != std::string::npos);
    CHECK(what.find("smaller than the window") == std::string::npos);
  }
}
