#pragma once
// Every error a user of cnnengine can cause is a cnn::Error, and its message names what was
// wrong: the file, the record, the layer, the option, the bytes. Catch cnn::Error for all of
// them, or one kind below. std::logic_error remains for what only a bug in cnnengine can cause.
// The out-of-memory errors carry a breakdown of the bytes: memory/out_of_memory.hpp.
#include <stdexcept>
#include <string>
#include <utility>

namespace cnn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An option or argument out of range, options that conflict, a call that breaks its contract.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// An option out of range or in conflict, naming the option by its field in the options struct
// ("validation_split", "batch"), so that a program can say which of its own flags it was
// (train_images maps the field to its flag).
class OptionError : public ConfigError {
 public:
  OptionError(std::string field, const std::string& message)
      : ConfigError(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// A layer that does not fit its input; a network that does not fit the data.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// A data file that is missing, truncated, corrupt or too large; a label outside the classes.
class DataError : public Error {
 public:
  using Error::Error;
};

// A checkpoint that cannot be written, or read back as this network's.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

// No usable device; a CUDA, cuDNN or cuBLAS call that failed.
class DeviceError : public Error {
 public:
  using Error::Error;
};

}  // namespace cnn
