#pragma once
// The run's CSV file (FitOptions::csv; Keras's CSVLogger's columns): rewritten whole from the run's
// epochs at each epoch's end, so a resumed run's file is what the uninterrupted run's would be. A
// callback over the run's events (FitCallbacks), on the rank that writes.
#include <filesystem>

#include <cnnengine/fit/fit.hpp>

namespace cnn::detail {

class CsvLog {
 public:
  explicit CsvLog(std::filesystem::path path) : path_(std::move(path)) {}

  // Its events, bound to this log: it must outlive the run.
  FitCallbacks callbacks();

 private:
  std::filesystem::path path_;
};

}  // namespace cnn::detail
