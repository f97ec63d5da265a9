#pragma once
// A data set as the bindings pass it around: arrays of Python's (kept alive with it) or one side
// of a data folder (the folder's other sides kept alive with it).
#include <memory>

#include <cnnengine/data/dataset.hpp>

namespace cnn::python {

struct DataHandle {
  std::shared_ptr<const data::Dataset> data;
  // What `data` reads from: the arrays (dropped with the GIL held: they hold Python references),
  // or the folder's splits.
  std::shared_ptr<void> arrays;
  std::shared_ptr<const data::DatasetSplits> splits;
};

}  // namespace cnn::python
