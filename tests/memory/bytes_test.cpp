// Sizes on the command line: every unit format_bytes prints reads back, and a malformed number
// is refused whole (it once read "1.2.3MiB" as 1.2 MiB).
#include <catch2/catch.hpp>

#include <cnnengine/base/error.hpp>
#include <cnnengine/memory/memory_resource.hpp>

using namespace cnn::memory;

TEST_CASE("parse_bytes reads what format_bytes writes, TiB included", "[memory]") {
  CHECK(parse_bytes("512MiB") == std::size_t{512} << 20);
  CHECK(parse_bytes("1TiB") == std::size_t{1} << 40);
  CHECK(parse_bytes("2 TB") == std::size_t{2'000'000'000'000});
  CHECK(parse_bytes("1.5GiB") == std::size_t{3} << 29);
  for (std::size_t bytes : {std::size_t{1} << 40, std::size_t{3} << 30, std::size_t{1000}})
    CHECK(parse_bytes(format_bytes(bytes)) == Approx(bytes).epsilon(0.005));
}

TEST_CASE("parse_bytes refuses a malformed number whole", "[memory]") {
  for (const char* text : {"1.2.3MiB", "1..2", ".", "12a", "MiB", "-5MiB", "1e3", "", "5 XB"}) {
    INFO(text);
    CHECK_THROWS_AS(parse_bytes(text), cnn::ConfigError);
  }
}
