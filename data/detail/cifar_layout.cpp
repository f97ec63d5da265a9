#include "data/detail/cifar_layout.hpp"

#include <string>
#include <system_error>

#include "data/data_error.hpp"
#include "data/detail/folder_scan.hpp"

namespace cnn::data {
namespace fs = std::filesystem;

namespace {

const char* const kCifar10Folder = "cifar-10-batches-bin";
const char* const kCifar100Folder = "cifar-100-binary";

bool has_cifar10_batch(const fs::path& folder) {
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
    if (is_cifar10_batch_name(it->path().filename().string())) return true;
  return false;
}

// The folder's own name, even when given as "cifar-10-batches-bin/".
std::string name_of(const fs::path& folder) {
  fs::path normal = fs::path(full_path(folder));
  if (normal.filename().empty()) normal = normal.parent_path();
  return normal.filename().string();
}

}  // namespace

bool cifar_file_present(const fs::path& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

bool is_cifar10_batch_name(const std::string& name) {
  const std::string prefix = "data_batch_", suffix = ".bin";
  return name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::optional<CifarLayout> find_cifar_layout(const fs::path& folder) {
  const std::string name = name_of(folder);
  const bool cifar10 = name == kCifar10Folder || cifar_file_present(folder / "test_batch.bin") || has_cifar10_batch(folder);
  const bool cifar100 = name == kCifar100Folder || cifar_file_present(folder / "train.bin") || cifar_file_present(folder / "test.bin");
  if (cifar10 && cifar100) {
    fail(folder, "holds files of both CIFAR-10 (data_batch_N.bin, test_batch.bin) and CIFAR-100 (train.bin, "
                 "test.bin): expected one data set");
  }
  if (cifar10) return CifarLayout{CifarVersion::cifar10, folder};
  if (cifar100) return CifarLayout{CifarVersion::cifar100, folder};

  const bool sub10 = is_folder(folder / kCifar10Folder), sub100 = is_folder(folder / kCifar100Folder);
  if (sub10 && sub100) {
    fail(folder, std::string("holds both ") + kCifar10Folder + "/ and " + kCifar100Folder +
                     "/: give one of them as the data folder");
  }
  if (sub10) return CifarLayout{CifarVersion::cifar10, folder / kCifar10Folder};
  if (sub100) return CifarLayout{CifarVersion::cifar100, folder / kCifar100Folder};
  return std::nullopt;
}

}  // namespace cnn::data
