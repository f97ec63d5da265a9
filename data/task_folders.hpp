#pragma once
// The data set folders of the tasks beyond classification (base/task.hpp), as open_dataset finds
// them: train/ and test/, and val/ where there is one, each holding images/ with, beside it,
//  - masks/: a segmentation (segmentation_dataset.hpp), its classes named by classes.txt beside
//    train/ where there is one;
//  - labels.csv: a multi-label or regression data set (image_table_dataset.hpp).
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>

#include <cnnengine/data/dataset.hpp>

namespace cnn::data {

enum class TaskLayout { segmentation, image_table };

// The layout of `folder` where its train/ or test/ holds images/ with masks/ or labels.csv; none
// otherwise. A DataError naming the folder at fault: one side with both masks/ and labels.csv,
// train/ and test/ of different layouts, one of them missing, or a val/ of another layout.
std::optional<TaskLayout> find_task_layout(const std::filesystem::path& folder);

// The sides of the data set in `folder`, of `layout`. `task`: what the caller asks for, none to
// take what the folder holds; a task the layout cannot hold is a ConfigError saying what it
// holds. The test and val sides take the train side's shape, options, classes and task.
DatasetSplits open_task_folders(const std::filesystem::path& folder, TaskLayout layout, SampleShape target,
                                std::optional<Task> task, const ImageFolderOptions& options);

// The layout a data set of `task` has, in words, for messages: "train/ and test/ each holding
// images/ and masks/ ...".
std::string layout_for(Task task);

// A ConfigError when `asked` is a task other than those of `holds`: "<folder>: asked for the task
// X, but it holds <what>; a data set of the task X is <layout_for(X)>".
void require_task(const std::filesystem::path& folder, std::optional<Task> asked, std::initializer_list<Task> holds,
                  const std::string& what);

}  // namespace cnn::data
