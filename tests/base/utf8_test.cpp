#include "base/utf8.hpp"

#include <catch2/catch.hpp>

TEST_CASE("is_utf8 accepts well-formed UTF-8 and refuses what RFC 3629 does", "[base]") {
  CHECK(cnn::is_utf8(""));
  CHECK(cnn::is_utf8("plain ascii"));
  CHECK(cnn::is_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é, €, an emoji
  CHECK_FALSE(cnn::is_utf8("caf\xE9"));                              // Latin-1's é
  CHECK_FALSE(cnn::is_utf8("\xC0\xAF"));                             // an overlong '/'
  CHECK_FALSE(cnn::is_utf8("\xED\xA0\x80"));                         // a surrogate
  CHECK_FALSE(cnn::is_utf8("\xF4\x90\x80\x80"));                     // above U+10FFFF
  CHECK_FALSE(cnn::is_utf8("\xE2\x82"));                             // cut short
  CHECK_FALSE(cnn::is_utf8("\x80"));                                 // a continuation byte alone
}

TEST_CASE("escape_non_utf8 writes each stray byte as a hex escape and keeps UTF-8 as it is", "[base]") {
  CHECK(cnn::escape_non_utf8("caf\xC3\xA9") == "caf\xC3\xA9");
  CHECK(cnn::escape_non_utf8("caf\xE9") == "caf\\xE9");
  CHECK(cnn::escape_non_utf8("\xFF\xFE" "a\xE2\x82") == "\\xFF\\xFEa\\xE2\\x82");
  for (const char* text : {"caf\xE9", "\xC0\xAF", "\xED\xA0\x80", "\xE2\x82"})
    CHECK(cnn::is_utf8(cnn::escape_non_utf8(text)));
}

TEST_CASE("quoted_in_message escapes control characters and stray bytes and cuts long text", "[base]") {
  using cnn::quoted_in_message;
  CHECK(quoted_in_message("relu") == "relu");
  CHECK(quoted_in_message(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(quoted_in_message("tab\there\n") == "tab\\x09here\\x0A");
  CHECK(quoted_in_message("caf\xe9 caf\xc3\xa9") == "caf\\xE9 caf\xc3\xa9");
  CHECK(quoted_in_message(std::string(10, 'x'), 4) == "xxxx... (10 bytes)");
  CHECK(quoted_in_message("\xc3\xa9\xc3\xa9\xc3\xa9", 2) == "\xc3\xa9\xc3\xa9... (6 bytes)");  // characters, not bytes
}
