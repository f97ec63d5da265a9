#pragma once
// Text that goes into JSON (checkpoints, metrics files, ONNX metadata) must be UTF-8, while a
// file name on Linux is any bytes. These say whether a name is UTF-8, and make one that is,
// keeping every byte readable.
#include <string>
#include <string_view>

namespace cnn {

bool is_utf8(std::string_view text);
// `text` with each byte that is not part of a well-formed UTF-8 sequence written as \xNN
// (uppercase hex digits): "caf\xE9" for Latin-1's "café". Text that is UTF-8 comes back as it is.
std::string escape_non_utf8(std::string_view text);

}  // namespace cnn
