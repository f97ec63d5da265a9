#pragma once
// The engine reads files (weights, network descriptions) only when they are regular files,
// symbolic links followed: a FIFO would block forever, a device may never end.
#include <filesystem>
#include <string>

namespace cnn {

// Empty when `path` is a regular file; otherwise what it is instead, to follow "it": "does not
// exist", "is a folder, not a file", "is a FIFO (named pipe), not a regular file", ...
std::string regular_file_problem(const std::filesystem::path& path);

}  // namespace cnn
