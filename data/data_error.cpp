#include "data/data_error.hpp"

#include <system_error>

namespace cnn::data {

std::string full_path(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return (ec ? path : absolute).lexically_normal().string();
}

void fail(const std::filesystem::path& path, const std::string& what) {
  throw DataError(full_path(path) + ": " + what);
}

}  // namespace cnn::data
