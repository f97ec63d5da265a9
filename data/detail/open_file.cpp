#include "data/detail/open_file.hpp"

#include <cerrno>
#include <cstring>
#include <string>

#include "data/data_error.hpp"

namespace cnn::data {

File open_for_reading(const std::filesystem::path& path) {
  require_regular_file(path);
  File file(std::fopen(path.c_str(), "rb"));
  if (!file) fail(path, std::string("cannot open: ") + std::strerror(errno));
  return file;
}

}  // namespace cnn::data
