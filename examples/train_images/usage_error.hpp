#pragma once
// A command line that cannot run as given (conflicting options, an output over an input): exit
// code 2 like CLI11's own parse errors, and no data read.
#include <cnnengine/base/error.hpp>
#include <cnnengine/fit/output_files.hpp>

namespace cnn::app {

class UsageError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// The library's check of what a command writes (check_run_files), its refusal a UsageError.
inline void check_command_files(const RunFiles& files) {
  try {
    check_run_files(files);
  } catch (const ConfigError& e) {
    throw UsageError(e.what());
  }
}

}  // namespace cnn::app
