#include "data/data_error.hpp"

#include <system_error>

#include "base/regular_file.hpp"

namespace cnn::data {

std::string full_path(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return (ec ? path : absolute).lexically_normal().string();
}

void fail(const std::filesystem::path& path, const std::string& what) {
  throw DataError(full_path(path) + ": " + what);
}

void require_regular_file(const std::filesystem::path& path) {
  if (const std::string problem = regular_file_problem(path); !problem.empty()) fail(path, problem);
}

}  // namespace cnn::data
