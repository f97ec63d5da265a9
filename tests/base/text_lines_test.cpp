#include "base/text_lines.hpp"

#include <catch2/catch.hpp>

#include <sstream>
#include <string>

TEST_CASE("TextLines gives each line, with or without a last line break, and stops at one too long", "[base]") {
  std::istringstream text("one\r\ntwo\n\nfour");
  cnn::TextLines lines(text, 8);
  std::string line;
  REQUIRE(lines.next(line));
  CHECK(line == "one\r");
  REQUIRE(lines.next(line));
  CHECK(line == "two");
  REQUIRE(lines.next(line));
  CHECK(line.empty());
  REQUIRE(lines.next(line));
  CHECK(line == "four");
  CHECK(lines.number() == 4);
  CHECK_FALSE(lines.next(line));
  CHECK_FALSE(lines.too_long());

  std::istringstream endless(std::string(1000, 'x'));  // no line break at all
  cnn::TextLines bounded(endless, 16);
  CHECK_FALSE(bounded.next(line));
  CHECK(bounded.too_long());
  CHECK(bounded.number() == 1);
  CHECK(line.size() <= 16);
  CHECK_FALSE(bounded.next(line));  // it stays stopped

  std::istringstream exact("12345678\n");
  cnn::TextLines fits(exact, 8);
  CHECK(fits.next(line));
  CHECK(line == "12345678");
}
