#include "base/regular_file.hpp"

#include <system_error>

namespace cnn {

std::string regular_file_problem(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // follows symbolic links
  switch (status.type()) {
    case fs::file_type::regular: return {};
    case fs::file_type::not_found:
      return fs::is_symlink(fs::symlink_status(path, ec)) ? "is a broken symbolic link" : "does not exist";
    case fs::file_type::directory: return "is a folder, not a file";
    case fs::file_type::fifo: return "is a FIFO (named pipe), not a regular file";
    case fs::file_type::socket: return "is a socket, not a regular file";
    case fs::file_type::block:
    case fs::file_type::character: return "is a device, not a regular file";
    default: return ec ? "cannot be examined: " + ec.message() : "is not a regular file";
  }
}

}  // namespace cnn
