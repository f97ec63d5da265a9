#include <cnnengine/data/dataset.hpp>

#include <cstdint>
#include <optional>
#include <system_error>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "data/cifar_folder.hpp"
#include "data/data_error.hpp"
#include "data/detail/cifar_layout.hpp"
#include "data/detail/folder_scan.hpp"
#include "data/idx_dataset.hpp"
#include "data/image_folder_dataset.hpp"
#include "data/subset_dataset.hpp"
#include "data/task_folders.hpp"

namespace cnn::data {
namespace fs = std::filesystem;

namespace {

const char* const kIdxLookedFor =
    "train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz] and "
    "t10k-labels-idx1-ubyte[.gz] (or test-...)";

// Anything by that name, a FIFO, a folder or a broken link too: the reader says what is wrong with it,
// rather than the folder calling it missing.
bool is_there(const fs::path& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() != fs::file_type::not_found && !ec;
}

// The first of prefix-<stem>, for each prefix, raw before gzip, that exists.
std::optional<fs::path> find_idx(const fs::path& folder, std::vector<std::string> prefixes, const std::string& stem) {
  for (const std::string& prefix : prefixes) {
    for (const char* suffix : {"", ".gz"}) {
      fs::path candidate = folder / (prefix + "-" + stem + suffix);
      if (is_there(candidate)) return candidate;
    }
  }
  return std::nullopt;
}

struct IdxFiles {
  std::optional<fs::path> train_images, train_labels, test_images, test_labels;
  bool any() const { return train_images || train_labels || test_images || test_labels; }
};

IdxFiles find_idx_files(const fs::path& folder) {
  return {find_idx(folder, {"train"}, "images-idx3-ubyte"), find_idx(folder, {"train"}, "labels-idx1-ubyte"),
          find_idx(folder, {"t10k", "test"}, "images-idx3-ubyte"),
          find_idx(folder, {"t10k", "test"}, "labels-idx1-ubyte")};
}

DatasetSplits open_idx_folder(const fs::path& folder, const IdxFiles& files) {
  std::string missing;
  auto note = [&](const std::optional<fs::path>& file, const char* name) {
    if (!file) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  note(files.train_images, "train-images-idx3-ubyte[.gz]");
  note(files.train_labels, "train-labels-idx1-ubyte[.gz]");
  note(files.test_images, "t10k-images-idx3-ubyte[.gz] (or test-...)");
  note(files.test_labels, "t10k-labels-idx1-ubyte[.gz] (or test-...)");
  if (!missing.empty()) fail(folder, "incomplete IDX data set: missing " + missing);

  DatasetSplits splits;
  splits.kind = "idx";
  splits.files = {*files.train_images, *files.train_labels, *files.test_images, *files.test_labels};
  splits.train = open_idx(*files.train_images, *files.train_labels);
  splits.test = open_idx(*files.test_images, *files.test_labels, splits.train->num_classes());
  if (splits.test->shape() != splits.train->shape()) {
    fail(*files.test_images, "image size differs from the training set: expected " + to_string(splits.train->shape()) +
                                 ", found " + to_string(splits.test->shape()));
  }
  std::error_code ec;
  if (const fs::path names = folder / "classes.txt"; fs::exists(names, ec)) {
    name_classes(splits, names);
    splits.files.push_back(names);
  } else if (fs::equivalent(folder, kFashionMnistFolder, ec) &&
             splits.train->num_classes() == static_cast<int>(fashion_mnist_classes().size())) {
    for (std::unique_ptr<Dataset>* side : {&splits.train, &splits.test})
      *side = with_class_names(std::move(*side), fashion_mnist_classes());
  }
  return splits;
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return "[" + text + "]";
}

DatasetSplits open_train_test_folders(const fs::path& folder, bool validation, SampleShape target,
                                      const ImageFolderOptions& options) {
  DatasetSplits splits;
  splits.kind = "image-folder";
  splits.files = scan_class_folders(folder / "train").files;
  for (fs::path& file : scan_class_folders(folder / "test").files) splits.files.push_back(std::move(file));
  splits.train = open_image_folder(folder / "train", target, options);
  splits.test = open_image_folder(folder / "test", splits.train->shape(), options);
  if (validation) {
    for (fs::path& file : scan_class_folders(folder / "val").files) splits.files.push_back(std::move(file));
    splits.validation = open_image_folder(folder / "val", splits.train->shape(), options);
  }
  for (const auto& [side, name] : {std::pair{splits.test.get(), "test"}, std::pair{splits.validation.get(), "val"}}) {
    if (side && side->class_names() != splits.train->class_names())
      fail(folder / name, "class folders differ from train/: expected " + joined(splits.train->class_names()) +
                              ", found " + joined(side->class_names()));
  }
  return splits;
}

DatasetSplits open_held_out(const fs::path& folder, SampleShape target, std::uint64_t seed,
                            const ImageFolderOptions& options) {
  std::shared_ptr<const Dataset> all;
  try {
    all = open_image_folder(folder, target, options);
  } catch (const DataError& e) {
    // This layout is the last guess: say why it was tried, since the folder may be no data set at all.
    throw DataError(std::string(e.what()) + " (read " + full_path(folder) +
                    " as one folder per class: found no IDX files (" + kIdxLookedFor +
                    "), no CIFAR binary files and no train/ and test/ folders)");
  }
  Split split = stratified_split(all, seed);
  return {std::move(split.train), std::move(split.test), "image-folder", scan_class_folders(folder).files, {}, {}};
}

DatasetSplits open_layout(const fs::path& folder, SampleShape target, std::uint64_t seed,
                          const ImageFolderOptions& images, std::optional<Task> task) {
  std::vector<fs::path> folders = sub_folders(folder);  // DataError when the folder is missing

  if (IdxFiles idx = find_idx_files(folder); idx.any()) {
    require_task(folder, task, {Task::classify}, "a classification data set (IDX files)");
    return open_idx_folder(folder, idx);
  }
  if (find_cifar_layout(folder)) {
    require_task(folder, task, {Task::classify}, "a classification data set (CIFAR binary files)");
    return open_cifar_folder(folder);
  }
  if (std::optional<TaskLayout> layout = find_task_layout(folder))
    return open_task_folders(folder, *layout, target, task, images);

  // A train/ or test/ that holds images directly is a class that happens to bear that name.
  auto split_folder = [&](const char* name) {
    for (const fs::path& f : folders)
      if (f.filename() == name) return !sub_folders(f).empty();
    return false;
  };
  const bool train = split_folder("train"), test = split_folder("test");
  require_task(folder, task, {Task::classify},
               train || test     ? "train/ or test/ folders of class folders (a classification data set)"
               : folders.empty() ? "no sub-folder"
                                 : "class folders (a classification data set)");
  if (train && test) return open_train_test_folders(folder, split_folder("val"), target, images);
  if (train || test) {
    fail(folder, std::string("found ") + (train ? "train/" : "test/") + " but no " + (train ? "test/" : "train/") +
                     " folder of class folders beside it: expected both");
  }
  if (!folders.empty()) return open_held_out(folder, target, seed, images);

  fail(folder, std::string("no data set found: looked for IDX files (") + kIdxLookedFor +
                   "), CIFAR binary files (data_batch_N.bin and test_batch.bin, or train.bin and test.bin), "
                   "train/ and test/ folders of class folders, or class folders");
}

// What the caller asks of image folders, checked before any folder is read: a request that can
// never be met is the caller's mistake, not the data's.
void check_request(SampleShape target, const ImageFolderOptions& images) {
  if (target.channels != 0 && target.channels != 1 && target.channels != 3)
    throw ConfigError("open_dataset: images are brought to 1 (grey) or 3 (RGB) channels, or 0 (as the first image "
                      "is), not " + std::to_string(target.channels));
  if (target.height < 0 || target.width < 0)
    throw ConfigError("open_dataset: the target size " + std::to_string(target.height) + "x" +
                      std::to_string(target.width) + " has a negative side (0: the first image's size)");
  if (images.max_decoded_image_bytes == 0)
    throw ConfigError("open_dataset: max_decoded_image_bytes is 0: no image could be read");
  const auto height = static_cast<std::uint64_t>(target.height);
  const auto width = static_cast<std::uint64_t>(target.width > 0 ? target.width : target.height);
  const std::uint64_t bytes = 3 * height * width;
  if (bytes > images.max_decoded_image_bytes)
    throw ConfigError("open_dataset: a target size of " + std::to_string(height) + "x" + std::to_string(width) +
                      " takes " + std::to_string(bytes) + " bytes an image in colour, over max_decoded_image_bytes (" +
                      std::to_string(images.max_decoded_image_bytes) + ")");
}

}  // namespace

DatasetSplits open_dataset(const fs::path& folder, SampleShape target, std::uint64_t seed,
                           const ImageFolderOptions& images, std::optional<Task> task) {
  check_request(target, images);
  DatasetSplits splits = open_layout(folder, target, seed, images, task);
  splits.folder = folder;
  return splits;
}

}  // namespace cnn::data
