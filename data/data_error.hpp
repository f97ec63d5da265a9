#pragma once
// How the data folder reports a bad file: a cnn::DataError (base/error.hpp) whose message names
// the file (full path) and, where it applies, the record and what was expected against what was
// found.
#include <filesystem>
#include <string>

#include <cnnengine/base/error.hpp>

namespace cnn::data {

using cnn::DataError;

// The absolute, normalised form of a path, as error messages and descriptions print it.
std::string full_path(const std::filesystem::path& path);

// A DataError reading "<full path>: <what>".
[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what);

// Data files are read only when they are regular files, symbolic links followed: a FIFO would
// block open() forever and a device (/dev/zero) never ends. Otherwise a DataError naming the
// path and what it is instead.
void require_regular_file(const std::filesystem::path& path);

}  // namespace cnn::data
