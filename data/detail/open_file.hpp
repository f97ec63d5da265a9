#pragma once
// A file opened to read its bytes, closed when it goes: a regular file (a FIFO would block the
// reader forever), or a DataError naming it.
#include <cstdio>
#include <filesystem>
#include <memory>

namespace cnn::data {

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_for_reading(const std::filesystem::path& path);

}  // namespace cnn::data
