#pragma once
// A text file of class names, one a line (CIFAR's batches.meta.txt, fine_label_names.txt and
// coarse_label_names.txt, a segmentation's classes.txt). Spaces around a name and blank lines
// after the last are ignored (the real files end in blank lines); anything else must be
// distinct names, exactly `expected` of them where a count is expected.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cnn::data {

// A list of names takes a few kilobytes; a larger file is the wrong file, refused before it is read.
inline constexpr std::uint64_t kMaxClassNamesFileBytes = std::uint64_t{1} << 20;

// The names, or the numbers "0".."expected-1" when there is no file at `path`. Throws DataError
// naming the file (and the line): not a regular file, too large, a blank line between names, a
// control character, a name repeated, or a count other than `expected`.
std::vector<std::string> read_class_names(const std::filesystem::path& path, int expected);
// The names in the file at `path`, however many (none for an empty file), with the same checks.
std::vector<std::string> read_class_names(const std::filesystem::path& path);

}  // namespace cnn::data
