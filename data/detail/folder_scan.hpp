#pragma once
// The layout of an image folder: one sub-folder per class (sorted names are class ids), images
// inside. Hidden entries (names starting with '.') are skipped everywhere.
#include <filesystem>
#include <string>
#include <vector>

namespace cnn::data {

bool is_hidden(const std::filesystem::path& path);
// Whether the path is a folder (following links); false where it cannot be read.
bool is_folder(const std::filesystem::path& path);

// Entries of a folder that are not hidden, sorted by name. DataError when it cannot be read.
std::vector<std::filesystem::path> visible_entries(const std::filesystem::path& folder);

// The visible sub-folders of a folder, sorted by name.
std::vector<std::filesystem::path> sub_folders(const std::filesystem::path& folder);

struct ClassFolders {
  std::vector<std::string> class_names;
  std::vector<std::filesystem::path> files;  // grouped by class, sorted by name inside each
  std::vector<int> labels;                   // one per file
};

// Validates the layout: the folder exists, holds at least two class folders, no image sits
// outside a class folder, each class folder holds at least one image and nothing else (an
// image name on a FIFO, a device or a broken link is an error too).
ClassFolders scan_class_folders(const std::filesystem::path& folder);

// Every image under `folder`, at any depth, sorted by path. A DataError naming the entry for
// anything else there (not an image, a FIFO, a broken link) and for a link back to a folder
// already scanned; none for no image.
std::vector<std::filesystem::path> scan_image_tree(const std::filesystem::path& folder);

}  // namespace cnn::data
