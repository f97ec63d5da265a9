#pragma once
// Data files are read only when they are regular files, symbolic links followed: a FIFO would
// block open() forever and a device (/dev/zero) never ends.
#include <filesystem>

namespace cnn::data {

// Throws DataError naming the path and what it is instead ("is a FIFO (named pipe)", ...).
void require_regular_file(const std::filesystem::path& path);

}  // namespace cnn::data
