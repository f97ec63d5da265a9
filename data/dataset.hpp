#pragma once
// A data set of labelled images: what every source (IDX files, image folders, a split of
// either) offers the loader.
#include <cstddef>
#include <string>
#include <vector>

namespace cnn::data {

struct SampleShape {
  int channels = 1, height = 0, width = 0;
  std::size_t elements() const {
    return static_cast<std::size_t>(channels) * static_cast<std::size_t>(height) *
           static_cast<std::size_t>(width);
  }
  friend bool operator==(const SampleShape&, const SampleShape&) = default;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::size_t size() const = 0;
  virtual SampleShape shape() const = 0;  // what load() writes
  virtual int num_classes() const = 0;
  virtual std::vector<std::string> class_names() const = 0;
  // e.g. "IDX /usr/share/.../train-images-idx3-ubyte.gz: 60000 images 1x28x28, 10 classes"
  virtual std::string description() const = 0;
  // Writes shape().elements() floats, CHW, scaled to [0,1], into out; returns the label.
  // Thread-safe (const). Throws DataError.
  virtual int load(std::size_t index, float* out) const = 0;
  virtual std::size_t host_bytes() const = 0;  // bytes the data set holds in host memory
  // The label alone. The default decodes the sample; data sets that hold labels override it.
  virtual int label(std::size_t index) const;
};

// "1x28x28"
std::string to_string(const SampleShape& shape);

}  // namespace cnn::data
