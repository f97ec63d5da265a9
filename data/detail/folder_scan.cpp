#include "data/detail/folder_scan.hpp"

#include <algorithm>
#include <set>
#include <system_error>

#include "base/utf8.hpp"
#include "data/data_error.hpp"
#include "data/detail/image_codec.hpp"

namespace cnn::data {
namespace fs = std::filesystem;

namespace {

void require_folder(const fs::path& folder) {
  std::error_code ec;
  fs::file_status status = fs::status(folder, ec);
  if (!fs::exists(status)) fail(folder, "folder not found");
  if (!fs::is_directory(status)) fail(folder, "not a folder");
}

}  // namespace

bool is_folder(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

bool is_hidden(const fs::path& path) {
  std::string name = path.filename().string();
  return !name.empty() && name[0] == '.';
}

std::vector<fs::path> visible_entries(const fs::path& folder) {
  require_folder(folder);
  std::vector<fs::path> entries;
  std::error_code ec;
  fs::directory_iterator it(folder, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (!is_hidden(it->path())) entries.push_back(it->path());
  }
  if (ec) fail(folder, "cannot list folder: " + ec.message());
  std::sort(entries.begin(), entries.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename().native() < b.filename().native(); });
  return entries;
}

std::vector<fs::path> sub_folders(const fs::path& folder) {
  std::vector<fs::path> folders;
  for (const fs::path& entry : visible_entries(folder))
    if (is_folder(entry)) folders.push_back(entry);
  return folders;
}

ClassFolders scan_class_folders(const fs::path& folder) {
  ClassFolders result;
  std::vector<fs::path> classes;
  for (const fs::path& entry : visible_entries(folder)) {
    if (is_folder(entry)) {
      classes.push_back(entry);
    } else if (has_image_extension(entry)) {
      fail(entry, "image outside a class folder: expected one sub-folder per class in " + full_path(folder));
    }
    // Other files beside the class folders (a README, a CSV index) are not part of the data.
  }
  if (classes.size() < 2) {
    fail(folder, "expected at least 2 class folders (one sub-folder per class, holding PNG, JPEG or BMP images), found " +
                     std::to_string(classes.size()));
  }
  for (std::size_t c = 0; c < classes.size(); ++c) {
    std::size_t images = 0;
    for (const fs::path& entry : visible_entries(classes[c])) {
      if (is_folder(entry)) fail(entry, "unexpected folder inside class folder: expected only images");
      if (!has_image_extension(entry))
        fail(entry, "not an image file: expected only .png, .jpg, .jpeg or .bmp files in a class folder");
      require_regular_file(entry);  // a FIFO named x.png would block the decoder forever
      result.files.push_back(entry);
      result.labels.push_back(static_cast<int>(c));
      ++images;
    }
    if (images == 0) fail(classes[c], "empty class folder: expected at least one PNG, JPEG or BMP image");
    // A class name goes into checkpoints and metrics files, which are JSON, hence UTF-8; a folder's
    // name is any bytes. Escaped now, so that a run cannot train and then fail to save.
    const std::string name = escape_non_utf8(classes[c].filename().string());
    for (std::size_t earlier = 0; earlier < c; ++earlier)
      if (result.class_names[earlier] == name)
        fail(classes[c], "its name, written as UTF-8, is the class name '" + name + "' of " +
                             full_path(classes[earlier]) + ": rename one of them");
    result.class_names.push_back(name);
  }
  return result;
}

namespace {

void scan_tree(const fs::path& folder, std::set<fs::path>& seen, std::vector<fs::path>& images) {
  std::error_code ec;
  const fs::path real = fs::canonical(folder, ec);
  if (ec) fail(folder, "cannot resolve the folder: " + ec.message());
  if (!seen.insert(real).second) fail(folder, "a link to a folder scanned already (" + full_path(real) + ")");
  for (const fs::path& entry : visible_entries(folder)) {
    if (is_folder(entry)) {
      scan_tree(entry, seen, images);
      continue;
    }
    if (!has_image_extension(entry))
      fail(entry, "not an image file: expected only .png, .jpg, .jpeg or .bmp files under " + full_path(folder));
    require_regular_file(entry);
    images.push_back(entry);
  }
}

}  // namespace

std::vector<fs::path> scan_image_tree(const fs::path& folder) {
  std::set<fs::path> seen;
  std::vector<fs::path> images;
  scan_tree(folder, seen, images);
  std::sort(images.begin(), images.end());
  return images;
}

}  // namespace cnn::data
