#include "data/regular_file.hpp"

#include <system_error>

#include "data/data_error.hpp"

namespace cnn::data {

void require_regular_file(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  switch (fs::status(path, ec).type()) {  // follows symbolic links
    case fs::file_type::regular: return;
    case fs::file_type::not_found:
      fail(path, fs::is_symlink(fs::symlink_status(path, ec)) ? "broken symbolic link" : "file not found");
    case fs::file_type::directory: fail(path, "is a folder, expected a file");
    case fs::file_type::fifo: fail(path, "is a FIFO (named pipe), not a regular file");
    case fs::file_type::socket: fail(path, "is a socket, not a regular file");
    case fs::file_type::block:
    case fs::file_type::character: fail(path, "is a device, not a regular file");
    default: fail(path, ec ? "cannot be examined: " + ec.message() : "not a regular file");
  }
}

}  // namespace cnn::data
