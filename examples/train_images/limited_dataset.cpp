#include "limited_dataset.hpp"

namespace cnn::app {

std::string LimitedDataset::description() const {
  return "first " + std::to_string(size_) + " of " + base_.description();
}

}  // namespace cnn::app
