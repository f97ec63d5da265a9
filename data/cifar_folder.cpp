#include "data/cifar_folder.hpp"

#include <algorithm>
#include <string>
#include <system_error>
#include <vector>

#include "data/data_error.hpp"
#include "data/detail/cifar_layout.hpp"

namespace cnn::data {
namespace fs = std::filesystem;

namespace {

constexpr int kCifar10TrainingBatches = 5;

std::string listed(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// The data_batch_*.bin in the folder that are not data_batch_1..5.bin, sorted.
std::vector<std::string> extra_batches(const fs::path& folder, const std::vector<std::string>& expected) {
  std::vector<std::string> extra;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_cifar10_batch_name(name) && std::find(expected.begin(), expected.end(), name) == expected.end())
      extra.push_back(name);
  }
  std::sort(extra.begin(), extra.end());
  return extra;
}

void require_present(const fs::path& folder, const std::string& title, const std::vector<std::string>& names) {
  std::vector<std::string> missing;
  for (const std::string& name : names)
    if (!cifar_file_present(folder / name)) missing.push_back(name);
  if (!missing.empty()) fail(folder, "incomplete " + title + " data set: missing " + listed(missing));
}

// The names file joins the files read only when it is there (otherwise the classes are numbers).
std::vector<fs::path> files_read(std::vector<fs::path> data_files, const fs::path& names) {
  if (cifar_file_present(names)) data_files.push_back(names);
  return data_files;
}

DatasetSplits open_cifar10_folder(const fs::path& folder) {
  std::vector<std::string> batches;
  for (int n = 1; n <= kCifar10TrainingBatches; ++n) batches.push_back("data_batch_" + std::to_string(n) + ".bin");
  std::vector<std::string> expected = batches;
  expected.push_back("test_batch.bin");
  require_present(folder, "CIFAR-10", expected);
  if (const std::vector<std::string> extra = extra_batches(folder, batches); !extra.empty()) {
    fail(folder, listed(extra) + (extra.size() > 1 ? " are" : " is") +
                     " not part of CIFAR-10: its training set is data_batch_1.bin .. data_batch_5.bin");
  }
  std::vector<fs::path> train_files;
  for (const std::string& name : batches) train_files.push_back(folder / name);
  const fs::path test_file = folder / "test_batch.bin", names = folder / "batches.meta.txt";

  DatasetSplits splits;
  splits.kind = "cifar-10";
  splits.train = open_cifar10(train_files, names);
  splits.test = open_cifar10({test_file}, names);
  train_files.push_back(test_file);
  splits.files = files_read(std::move(train_files), names);
  return splits;
}

DatasetSplits open_cifar100_folder(const fs::path& folder, CifarLabels labels) {
  require_present(folder, "CIFAR-100", {"train.bin", "test.bin"});
  const fs::path train = folder / "train.bin", test = folder / "test.bin";
  const fs::path names = folder / (labels == CifarLabels::fine ? "fine_label_names.txt" : "coarse_label_names.txt");
  DatasetSplits splits;
  splits.kind = "cifar-100";
  splits.train = open_cifar100({train}, names, labels);
  splits.test = open_cifar100({test}, names, labels);
  splits.files = files_read({train, test}, names);
  return splits;
}

}  // namespace

DatasetSplits open_cifar_folder(const fs::path& folder, CifarLabels labels) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) fail(folder, fs::exists(folder, ec) ? "is not a folder" : "does not exist");
  const std::optional<CifarLayout> layout = find_cifar_layout(folder);
  if (!layout) {
    fail(folder, "no CIFAR data set found: looked for data_batch_1.bin .. data_batch_5.bin and test_batch.bin "
                 "(CIFAR-10), train.bin and test.bin (CIFAR-100), or a cifar-10-batches-bin/ or cifar-100-binary/ "
                 "folder");
  }
  if (layout->version == CifarVersion::cifar10) {
    if (labels == CifarLabels::coarse)
      throw ConfigError("coarse labels apply to CIFAR-100; " + full_path(layout->folder) + " holds CIFAR-10");
    return open_cifar10_folder(layout->folder);
  }
  return open_cifar100_folder(layout->folder, labels);
}

}  // namespace cnn::data
