#pragma once
// Text that goes into JSON (checkpoints, metrics files, ONNX metadata) must be UTF-8, while a
// file name on Linux is any bytes. These say whether a name is UTF-8, and make one that is,
// keeping every byte readable; and quote what a user gave in an error message.
#include <string>
#include <string_view>

namespace cnn {

bool is_utf8(std::string_view text);
// `text` with each byte that is not part of a well-formed UTF-8 sequence written as \xNN
// (uppercase hex digits): "caf\xE9" for Latin-1's "café". Text that is UTF-8 comes back as it is.
std::string escape_non_utf8(std::string_view text);
// Text a user gave, as an error message quotes it: escape_non_utf8's, with control characters
// (a NUL would end the message where it is read as a C string) escaped too, and cut after `most`
// characters with "... (N bytes)", so that a message stays a line however long the text.
std::string quoted_in_message(std::string_view text, std::size_t most = 80);

}  // namespace cnn
