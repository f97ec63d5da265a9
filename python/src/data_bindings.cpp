// Data sets from Python: numpy arrays read in place (ArrayDataset), and data folders opened as
// train_images opens them (data::open_dataset).
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/base/task.hpp>
#include "array_dataset.hpp"
#include "bindings.hpp"
#include "data_handle.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace cnn::python {
namespace {

using Images = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using Labels = nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Masks = nb::ndarray<const std::uint8_t, nb::ndim<3>, nb::c_contig, nb::device::cpu>;
using Values = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// What an ArrayDataset reads: held as long as it is (each holds a reference on its numpy array).
struct ReadInPlace {
  Images images;
  std::optional<Masks> masks;
};

int side(std::size_t n, const std::string& name) {
  if (n < 1 || n > static_cast<std::size_t>(INT_MAX)) throw ShapeError(name + ": a side of " + std::to_string(n));
  return static_cast<int>(n);
}

ImageArray image_array(const Images& x, bool channels_last, const std::string& name) {
  if (x.ndim() != 4)
    throw ShapeError(name + " has " + std::to_string(x.ndim()) + " dimensions; give (N, C, H, W)" +
                     " or, with data_format='channels_last', (N, H, W, C)");
  ImageArray a;
  a.data = x.data();
  if (x.dtype() == nb::dtype<std::uint8_t>()) a.type = PixelType::uint8;
  else if (x.dtype() == nb::dtype<float>()) a.type = PixelType::float32;
  else throw DataError(name + ": images of uint8 or float32 values");
  a.count = x.shape(0);
  a.channels_last = channels_last;
  const std::size_t c = channels_last ? x.shape(3) : x.shape(1), h = channels_last ? x.shape(1) : x.shape(2),
                    w = channels_last ? x.shape(2) : x.shape(3);
  a.shape = data::SampleShape{side(c, name), side(h, name), side(w, name)};
  return a;
}

DataHandle array_data(Images x, std::optional<Labels> labels, std::optional<Masks> masks, std::optional<Values> values,
                      const std::string& task_word, int classes, bool channels_last, const std::string& name,
                      std::vector<std::string> class_names) {
  const Task task = parse_task(task_word);
  const ImageArray images = image_array(x, channels_last, name);
  TargetArray targets;
  if (labels) {
    targets.labels.reserve(labels->shape(0));
    for (std::size_t i = 0; i < labels->shape(0); ++i) {
      const std::int64_t v = labels->data()[i];
      if (v < INT32_MIN || v > INT32_MAX)
        throw DataError("y[" + std::to_string(i) + "] is " + std::to_string(v) + ", not a class");
      targets.labels.push_back(static_cast<std::int32_t>(v));
    }
  }
  if (masks) {
    if (masks->shape(0) != images.count || masks->shape(1) != static_cast<std::size_t>(images.shape.height) ||
        masks->shape(2) != static_cast<std::size_t>(images.shape.width))
      throw ShapeError("y: masks of shape (" + std::to_string(masks->shape(0)) + ", " +
                       std::to_string(masks->shape(1)) +
                       ", " + std::to_string(masks->shape(2)) + ") for " + std::to_string(images.count) +
                       " images of " + data::to_string(images.shape) + ": give (N, H, W)");
    targets.masks = masks->data();
  }
  if (values) {
    if (values->shape(0) != images.count || values->shape(1) != static_cast<std::size_t>(classes))
      throw ShapeError("y: targets of shape (" + std::to_string(values->shape(0)) + ", " +
                       std::to_string(values->shape(1)) + ") for " + std::to_string(images.count) +
                       " images and a network of " + std::to_string(classes) + " outputs");
    targets.values.assign(values->data(), values->data() + values->size());
  }
  DataHandle handle;
  handle.data = std::make_shared<ArrayDataset>(images, std::move(targets), task, classes, std::move(class_names), name);
  handle.arrays = std::make_shared<ReadInPlace>(ReadInPlace{std::move(x), std::move(masks)});
  return handle;
}

// One side of a folder, holding the whole folder.
std::optional<DataHandle> side_of(const std::shared_ptr<data::DatasetSplits>& splits, const data::Dataset* side) {
  if (side == nullptr) return std::nullopt;
  DataHandle handle;
  handle.data = std::shared_ptr<const data::Dataset>(splits, side);
  handle.splits = splits;
  return handle;
}

}  // namespace

void bind_data(nb::module_& m) {
  nb::class_<DataHandle>(m, "_Data", "A data set as the engine reads it.")
      .def_prop_ro("size", [](const DataHandle& h) { return h.data->size(); })
      .def("__len__", [](const DataHandle& h) { return h.data->size(); })
      .def_prop_ro("shape", [](const DataHandle& h) {
        const data::SampleShape s = h.data->shape();
        return std::vector<int>{s.channels, s.height, s.width};
      })
      .def_prop_ro("num_classes", [](const DataHandle& h) { return h.data->num_classes(); })
      .def_prop_ro("class_names", [](const DataHandle& h) { return h.data->class_names(); })
      .def_prop_ro("task", [](const DataHandle& h) { return to_string(h.data->task()); })
      .def_prop_ro("description", [](const DataHandle& h) { return h.data->description(); })
      .def("__repr__", [](const DataHandle& h) { return "<cnnengine data: " + h.data->description() + ">"; });
  m.def("_array_data", &array_data, "x"_a, "labels"_a.none(), "masks"_a.none(), "values"_a.none(), "task"_a,
        "classes"_a, "channels_last"_a, "name"_a, "class_names"_a);
  m.def(
      "_open_dataset",
      [](const std::string& folder, std::vector<int> shape, std::uint64_t seed, std::optional<std::string> task,
         int resize_shorter_side, bool skip_corrupt) {
        if (shape.size() != 3) throw ShapeError("image_shape: give (channels, height, width); 0 takes the images'");
        data::ImageFolderOptions images;
        images.resize_shorter_side = resize_shorter_side;
        images.skip_corrupt = skip_corrupt;
        std::optional<Task> wanted;
        if (task) wanted = parse_task(*task);
        nb::gil_scoped_release unlocked;
        auto splits = std::make_shared<data::DatasetSplits>(
            data::open_dataset(folder, data::SampleShape{shape[0], shape[1], shape[2]}, seed, images, wanted));
        return std::make_tuple(side_of(splits, splits->train.get()), side_of(splits, splits->validation.get()),
                               side_of(splits, splits->test.get()), splits->kind);
      },
      "folder"_a, "shape"_a, "seed"_a, "task"_a.none(), "resize_shorter_side"_a, "skip_corrupt"_a);
}

}  // namespace cnn::python
