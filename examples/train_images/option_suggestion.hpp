#pragma once
// What a mistyped option was meant to be: `--epoch` is `--epochs`, as git and cargo suggest.
#include <string>
#include <vector>

namespace cnn::app {

// The option among `options` ("--epochs", ...) closest to `given` ("--epoch", "--epoch=3": the
// part before '='): within two edits (an insertion, a deletion, a substitution or two neighbours
// swapped), or the one option that starts with it. Empty where none is close, or several are
// equally close.
std::string nearest_option(const std::string& given, const std::vector<std::string>& options);

}  // namespace cnn::app
