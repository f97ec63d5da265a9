#pragma once
// The one error type of the data folder. Its message always names the file (full path) and,
// where it applies, the record and what was expected against what was found.
#include <filesystem>
#include <stdexcept>
#include <string>

namespace cnn::data {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The absolute, normalised form of a path, as error messages and descriptions print it.
std::string full_path(const std::filesystem::path& path);

// A DataError reading "<full path>: <what>".
[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what);

}  // namespace cnn::data
