#include "array_dataset.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include <cnnengine/base/error.hpp>

namespace cnn::python {
namespace {

std::string sample_name(const std::string& name, std::size_t index) {
  return name + "[" + std::to_string(index) + "]";
}

}  // namespace

ArrayDataset::ArrayDataset(ImageArray images, TargetArray targets, Task task, int classes,
                           std::vector<std::string> class_names, std::string name)
    : images_(images), targets_(std::move(targets)), task_(task), classes_(classes),
      class_names_(std::move(class_names)), name_(std::move(name)) {
  if (images_.data == nullptr && images_.count > 0) throw ConfigError(name_ + ": no image data");
  if (classes_ < 1) throw ConfigError(name_ + ": " + std::to_string(classes_) + " classes");
  if (class_names_.empty())
    for (int c = 0; c < classes_; ++c) class_names_.push_back(std::to_string(c));
  if (static_cast<int>(class_names_.size()) != classes_)
    throw ConfigError("class_names: " + std::to_string(class_names_.size()) + " names for " +
                      std::to_string(classes_) + " classes");
  const std::size_t n = images_.count;
  if (!targets_.labels.empty()) {
    if (task_ != Task::classify) throw ConfigError(name_ + ": class labels given for a " + to_string(task_) + " task");
    if (targets_.labels.size() != n)
      throw DataError("y has " + std::to_string(targets_.labels.size()) + " labels for " + std::to_string(n) +
                      " images in " + name_);
    for (std::size_t i = 0; i < n; ++i)
      if (targets_.labels[i] < 0 || targets_.labels[i] >= classes_)
        throw DataError("y[" + std::to_string(i) + "] is " + std::to_string(targets_.labels[i]) +
                        ", not a class of the network's " + std::to_string(classes_) + " (0 to " +
                        std::to_string(classes_ - 1) + ")");
  }
  if (!targets_.values.empty()) {
    if (task_ != Task::multilabel && task_ != Task::regress)
      throw ConfigError(name_ + ": float targets given for a " + to_string(task_) + " task");
    const std::size_t k = static_cast<std::size_t>(classes_);
    if (targets_.values.size() != n * k)
      throw DataError("y holds " + std::to_string(targets_.values.size()) + " values for " + std::to_string(n) +
                      " images of " + std::to_string(k) + (task_ == Task::regress ? " targets" : " labels") + " each");
    for (std::size_t i = 0; i < targets_.values.size(); ++i) {
      const float v = targets_.values[i];
      const bool fits = task_ == Task::multilabel ? (v == 0.0f || v == 1.0f) : std::isfinite(v);
      if (!fits)
        throw DataError("y[" + std::to_string(i / k) + ", " + std::to_string(i % k) + "] is " + std::to_string(v) +
                        (task_ == Task::multilabel ? ": a multi-label target is 0 or 1" : ": not a finite number"));
    }
  }
  // Masks are read in place: their classes are checked by the loader as each batch is cut.
  if (targets_.masks != nullptr && task_ != Task::segment)
    throw ConfigError(name_ + ": masks given for a " + to_string(task_) + " task");
}

std::string ArrayDataset::description() const {
  return "arrays " + name_ + ": " + std::to_string(images_.count) + " images " + data::to_string(images_.shape) +
         (images_.type == PixelType::uint8 ? " uint8" : " float32") + (images_.channels_last ? " NHWC" : " NCHW") +
         ", " + std::to_string(classes_) + (task_ == Task::regress ? " targets" : " classes");
}

int ArrayDataset::load(std::size_t index, float* out) const {
  if (index >= images_.count)
    throw DataError(name_ + ": sample " + std::to_string(index) + " of " + std::to_string(images_.count));
  const data::SampleShape s = images_.shape;
  const std::size_t plane = static_cast<std::size_t>(s.height) * static_cast<std::size_t>(s.width);
  const std::size_t channels = static_cast<std::size_t>(s.channels), elements = s.elements();
  const std::size_t first = index * elements;
  if (images_.type == PixelType::uint8) {
    const std::uint8_t* in = static_cast<const std::uint8_t*>(images_.data) + first;
    if (!images_.channels_last) {
      for (std::size_t e = 0; e < elements; ++e) out[e] = static_cast<float>(in[e]) * (1.0f / 255.0f);
    } else {
      for (std::size_t p = 0; p < plane; ++p)
        for (std::size_t c = 0; c < channels; ++c)
          out[c * plane + p] = static_cast<float>(in[p * channels + c]) * (1.0f / 255.0f);
    }
    return label(index);
  }
  const float* in = static_cast<const float*>(images_.data) + first;
  if (!images_.channels_last) {
    std::copy(in, in + elements, out);
  } else {
    for (std::size_t p = 0; p < plane; ++p)
      for (std::size_t c = 0; c < channels; ++c) out[c * plane + p] = in[p * channels + c];
  }
  for (std::size_t e = 0; e < elements; ++e)
    if (!std::isfinite(out[e]))
      throw DataError(sample_name(name_, index) + " holds " + std::to_string(out[e]) +
                      ": images must be finite numbers");
  return label(index);
}

int ArrayDataset::label(std::size_t index) const {
  if (targets_.labels.empty()) return 0;
  if (index >= targets_.labels.size())
    throw DataError(name_ + ": label " + std::to_string(index) + " of " + std::to_string(targets_.labels.size()));
  return targets_.labels[index];
}

void ArrayDataset::load_target(std::size_t index, void* out) const {
  if (task_ == Task::classify) return Dataset::load_target(index, out);
  if (index >= images_.count)
    throw DataError(name_ + ": target " + std::to_string(index) + " of " + std::to_string(images_.count));
  const std::size_t bytes = target_bytes();
  if (targets_.masks != nullptr) {
    std::memcpy(out, targets_.masks + index * bytes, bytes);
  } else if (!targets_.values.empty()) {
    std::memcpy(out, targets_.values.data() + index * static_cast<std::size_t>(classes_), bytes);
  } else {
    std::memset(out, 0, bytes);  // images alone, to predict
  }
}

}  // namespace cnn::python
