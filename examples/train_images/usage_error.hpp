#pragma once
// A command line that cannot run as given (conflicting options, an output over an input): exit
// code 2 like CLI11's own parse errors, and no data read.
#include "base/error.hpp"

namespace cnn::app {

class UsageError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

}  // namespace cnn::app
