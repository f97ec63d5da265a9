#pragma once
// labels.csv, the targets of a multi-label or regression data set: a header "file,<name>,..."
// and one row an image, its path under images/ then one number a name:
//
//   file,cat,dog
//   0001.jpg,1,0
//   park/0002.jpg,1,1
//
// Fields are separated by commas; spaces around a field are ignored; a field in double quotes
// may hold commas (and "" for a quote) but not a line break. Blank lines are skipped, a UTF-8 byte
// order mark and CRLF line ends are accepted.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cnn::data {

// A table of labels takes a few bytes a value: a file larger than this, a line longer (one image's
// row), or more columns is the wrong file, or a hostile one, refused before it is read whole.
inline constexpr std::uint64_t kMaxLabelsFileBytes = std::uint64_t{1} << 30;
inline constexpr std::size_t kMaxLabelsLineBytes = std::size_t{1} << 20;
inline constexpr std::size_t kMaxLabelsColumns = std::size_t{1} << 16;

struct LabelsTable {
  std::vector<std::string> names;  // the header's, after "file"
  std::vector<std::string> files;  // each row's, as a relative path in generic form ("park/0002.jpg")
  std::vector<std::size_t> lines;  // each row's line in the file, from 1
  std::vector<float> values;       // files.size() x names.size(), row by row
};

// A DataError naming the file, and the line and column where it applies: not a regular file, a
// file, a line or a header over the limits above, no header, a header that does not start with
// "file", no name after it, an empty, repeated or
// non-UTF-8 name, no row, a row of another count of fields than the header, an empty file
// field, a file named twice, a value that is not a number or not finite (NaN, inf, out of the
// range of a float), a quoted field left open; names other than `expected_names` where given
// (the training set's, for a test side).
LabelsTable read_labels_csv(const std::filesystem::path& path, const std::vector<std::string>& expected_names = {});

}  // namespace cnn::data
