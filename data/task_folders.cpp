#include "data/task_folders.hpp"

#include <algorithm>
#include <system_error>
#include <vector>

#include "data/data_error.hpp"
#include "data/detail/class_names_file.hpp"
#include "data/detail/folder_scan.hpp"
#include "data/detail/mask_pairs.hpp"
#include "data/image_table_dataset.hpp"
#include "data/segmentation_dataset.hpp"

namespace cnn::data {
namespace fs = std::filesystem;

namespace {

bool is_there(const fs::path& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() != fs::file_type::not_found && !ec;
}

// masks/ beside images/ that is no folder (a file, a link to nothing or a loop of links) is said
// as what it is, where it is, rather than as a side of the data set that is missing.
void require_masks_folder(const fs::path& masks) {
  std::error_code ec;
  const fs::file_status status = fs::status(masks, ec);  // through links
  if (ec) fail(masks, "cannot be read as the folder of masks: " + ec.message());
  if (!fs::is_directory(status))
    fail(masks, "is not a folder: a segmentation's masks/ holds one mask an image, beside images/");
}

std::optional<TaskLayout> side_layout(const fs::path& side) {
  if (!is_folder(side / "images")) return std::nullopt;
  const bool masks = is_there(side / "masks"), table = is_there(side / "labels.csv");
  if (masks && table)
    fail(side, "holds both masks/ and labels.csv beside images/: expected one of them (masks/: a segmentation; "
               "labels.csv: multi-label or regression)");
  if (masks) require_masks_folder(side / "masks");
  if (masks) return TaskLayout::segmentation;
  if (table) return TaskLayout::image_table;
  return std::nullopt;
}

const char* parts(TaskLayout layout) {
  return layout == TaskLayout::segmentation ? "images/ and masks/" : "images/ and labels.csv";
}

const char* data_set_of(TaskLayout layout) {
  return layout == TaskLayout::segmentation ? "a segmentation data set" : "a multi-label or regression data set";
}

// Segmentation classes: classes.txt's names, or none (empty) to take them from the train masks.
std::vector<std::string> segmentation_classes(const fs::path& folder, std::vector<fs::path>& files) {
  const fs::path names_file = folder / "classes.txt";
  if (!is_there(names_file)) return {};
  std::vector<std::string> names = read_class_names(names_file);
  if (names.size() < 2 || names.size() > static_cast<std::size_t>(kMaxSegmentationClasses))
    fail(names_file, "holds " + std::to_string(names.size()) + " class names: a segmentation has 2 to " +
                         std::to_string(kMaxSegmentationClasses) + " classes (a mask's byte is the class, " +
                         std::to_string(kIgnoreMask) + " none)");
  files.push_back(names_file);
  return names;
}

void add_side_files(const fs::path& side, TaskLayout layout, std::vector<fs::path>& files) {
  if (layout == TaskLayout::segmentation) {
    MaskPairs pairs = scan_mask_pairs(side);
    files.insert(files.end(), pairs.images.begin(), pairs.images.end());
    files.insert(files.end(), pairs.masks.begin(), pairs.masks.end());
  } else {
    std::vector<fs::path> images = scan_image_tree(side / "images");
    files.insert(files.end(), images.begin(), images.end());
    files.push_back(side / "labels.csv");
  }
}

}  // namespace

std::optional<TaskLayout> find_task_layout(const fs::path& folder) {
  const std::optional<TaskLayout> train = side_layout(folder / "train"), test = side_layout(folder / "test");
  if (!train && !test) return std::nullopt;
  const TaskLayout layout = train ? *train : *test;
  if (!train || !test) {
    const char* found = train ? "train/" : "test/";
    const char* missing = train ? "test/" : "train/";
    fail(folder, std::string("found ") + found + " holding " + parts(layout) + " (" + data_set_of(layout) +
                     ") but no " + missing + " holding the same beside it: expected both");
  }
  if (*train != *test)
    fail(folder / "test", std::string("holds ") + parts(*test) + ", while train/ holds " + parts(*train) +
                              ": expected the same layout");
  if (is_folder(folder / "val") && side_layout(folder / "val") != layout)
    fail(folder / "val", std::string("expected ") + parts(layout) + " in it, as in train/ and test/");
  return layout;
}

std::string layout_for(Task task) {
  switch (task) {
    case Task::classify:
      return "IDX files, CIFAR binary files, train/ and test/ folders of class folders, or class folders";
    case Task::segment:
      return "train/ and test/ each holding images/ and masks/ (an 8-bit grey PNG mask an image, of its name)";
    case Task::multilabel:
    case Task::regress:
      return "train/ and test/ each holding images/ and labels.csv ('file,<name>,...' and a row an image)";
  }
  return {};
}

void require_task(const fs::path& folder, std::optional<Task> asked, std::initializer_list<Task> holds,
                  const std::string& what) {
  if (!asked || std::find(holds.begin(), holds.end(), *asked) != holds.end()) return;
  throw ConfigError(full_path(folder) + ": asked for the task " + to_string(*asked) + ", but it holds " + what +
                    "; a data set of the task " + to_string(*asked) + " is " + layout_for(*asked));
}

DatasetSplits open_task_folders(const fs::path& folder, TaskLayout layout, SampleShape target,
                                std::optional<Task> task, const ImageFolderOptions& options) {
  const bool validation = is_folder(folder / "val");
  DatasetSplits splits;
  std::vector<fs::path> sides = {folder / "train", folder / "test"};
  if (validation) sides.push_back(folder / "val");
  if (layout == TaskLayout::segmentation) {
    require_task(folder, task, {Task::segment}, "a segmentation data set (images/ and masks/)");
    std::vector<std::string> names = segmentation_classes(folder, splits.files);
    splits.train = open_segmentation_folder(sides[0], target, names, options);
    names = splits.train->class_names();
    splits.test = open_segmentation_folder(sides[1], splits.train->shape(), names, options);
    if (validation) splits.validation = open_segmentation_folder(sides[2], splits.train->shape(), names, options);
    splits.kind = "segmentation";
  } else {
    require_task(folder, task, {Task::multilabel, Task::regress},
                 "a multi-label or regression data set (images/ and labels.csv)");
    splits.train = open_image_table(sides[0], target, task, {}, options);
    const Task decided = splits.train->task();
    const std::vector<std::string> names = splits.train->class_names();
    splits.test = open_image_table(sides[1], splits.train->shape(), decided, names, options);
    if (validation)
      splits.validation = open_image_table(sides[2], splits.train->shape(), decided, names, options);
    splits.kind = decided == Task::multilabel ? "multilabel" : "regression";
  }
  for (const fs::path& side : sides) add_side_files(side, layout, splits.files);
  return splits;
}

}  // namespace cnn::data
