#pragma once
// A data set over arrays another program holds (numpy's, from Python): images read in place,
// never copied whole. Each sample is converted as the loader asks for it: uint8 scaled to [0, 1],
// float32 as it is (a NaN or infinity refused naming the sample), NHWC transposed to CHW. The
// arrays must outlive the data set; nothing here takes a reference on them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cnnengine/data/dataset.hpp>

namespace cnn::python {

enum class PixelType { uint8, float32 };

// Images: `count` samples of `shape`, C-contiguous, NCHW or (channels_last) NHWC.
struct ImageArray {
  const void* data = nullptr;
  PixelType type = PixelType::float32;
  std::size_t count = 0;
  data::SampleShape shape;
  bool channels_last = false;
};

// Targets as the task reads them: a classification's labels (checked against the classes), a
// segmentation's masks (count x H x W bytes, read in place: a class or kIgnoreMask), or a
// multi-label's or regression's `classes` floats a sample (copied: they are small). None of the
// three: images alone, to predict (every label 0).
struct TargetArray {
  std::vector<std::int32_t> labels;
  const std::uint8_t* masks = nullptr;
  std::vector<float> values;
};

class ArrayDataset final : public data::Dataset {
 public:
  // Throws DataError naming what does not fit: targets of another count than the images, a
  // label out of range, a multi-label value that is not 0 or 1, a regression target that is not
  // finite. `name` is how errors call the images ("x", "validation_data[0]").
  ArrayDataset(ImageArray images, TargetArray targets, Task task, int classes, std::vector<std::string> class_names,
               std::string name);

  std::size_t size() const override { return images_.count; }
  data::SampleShape shape() const override { return images_.shape; }
  Task task() const override { return task_; }
  int num_classes() const override { return classes_; }
  std::vector<std::string> class_names() const override { return class_names_; }
  std::string description() const override;
  int load(std::size_t index, float* out) const override;
  std::size_t host_bytes() const override { return 0; }  // the caller's arrays, not ours
  int label(std::size_t index) const override;
  void load_target(std::size_t index, void* out) const override;

 private:
  ImageArray images_;
  TargetArray targets_;
  Task task_;
  int classes_;
  std::vector<std::string> class_names_;
  std::string name_;
};

}  // namespace cnn::python
