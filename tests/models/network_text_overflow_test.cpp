// Sizes in a network text that overflowed int arithmetic in the layers' shape computations
// (found by fuzz_network_text): each is a clear error naming the line.
#include <catch2/catch.hpp>

#include <string>

#include <cnnengine/base/error.hpp>
#include <cnnengine/models/network_text.hpp>

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

TEST_CASE("network text: pad=same at a dilation that reaches beyond an int is refused with the reach", "[network]") {
  for (const char* line : {"conv 8 3 dilation=2147483647 pad=same", "dwconv 5 dilation=1073741824 pad=same",
                           "conv 8 3 dilation=2147483647"}) {
    const std::string what = parse_error(std::string(line) + "\nflatten\ndense 10\n");
    INFO(line << ": " << what);
    CHECK(what.find("net.txt:1:") != std::string::npos);
    CHECK(what.find("reaches") != std::string::npos);
    CHECK(what.find("pad -") == std::string::npos);
  }
  // The largest reach an int holds still pads as PyTorch's "same" does, (reach - 1) / 2 a side: the
  // output keeps the input's size.
  CHECK(parse_error("conv 8 3 dilation=1073741823 pad=same\nflatten\ndense 10\n") == "no error");
}

TEST_CASE("network text: a control character is refused where it is, and quoted words are escaped and cut",
          "[network]") {
  const std::string nul = parse_error(std::string("conv 8 3\nrelu\0 junk\nflatten\ndense 10\n", 36));
  INFO(nul);
  CHECK(nul.find("net.txt:2: a control character (0x00) at column 5") != std::string::npos);
  const std::string escape = parse_error("conv 8 3\n\x1b[31mrelu\nflatten\ndense 10\n");
  CHECK(escape.find("net.txt:2: a control character (0x1B) at column 1") != std::string::npos);
  const std::string long_word = parse_error(std::string(100000, 'x') + "\nflatten\ndense 10\n");
  INFO(long_word.substr(0, 200));
  CHECK(long_word.find("unknown layer 'xxxx") != std::string::npos);
  CHECK(long_word.find("... (100000 bytes)") != std::string::npos);
  CHECK(long_word.size() < 2000);
  const std::string latin1 = parse_error("caf\xe9 8 3\nflatten\ndense 10\n");
  CHECK(latin1.find("unknown layer 'caf\\xE9'") != std::string::npos);
}
