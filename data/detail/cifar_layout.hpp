#pragma once
// Whether a folder is a CIFAR data set, and which: by the files it holds (data_batch_*.bin or
// test_batch.bin: CIFAR-10; train.bin or test.bin: CIFAR-100), by its own name (the tarballs'
// cifar-10-batches-bin/ and cifar-100-binary/), or by a sub-folder of one of those names (the
// folder a tarball was unpacked into).
#include <filesystem>
#include <optional>
#include <string>

namespace cnn::data {

enum class CifarVersion { cifar10, cifar100 };

struct CifarLayout {
  CifarVersion version;
  std::filesystem::path folder;  // where the files are: the folder given, or its sub-folder
};

// nullopt when nothing marks the folder as CIFAR. Marks of both versions are a DataError; so
// is a folder holding both tarballs' sub-folders.
std::optional<CifarLayout> find_cifar_layout(const std::filesystem::path& folder);

// An entry of any kind at `path`: a FIFO or a broken link named test_batch.bin is a CIFAR file
// that fails to read, with its reason, not a file that is missing.
bool cifar_file_present(const std::filesystem::path& path);

// A name of the form data_batch_*.bin: a CIFAR-10 training batch, or a file posing as one.
bool is_cifar10_batch_name(const std::string& file_name);

}  // namespace cnn::data
