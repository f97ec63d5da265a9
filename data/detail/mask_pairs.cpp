#include "data/detail/mask_pairs.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <system_error>

#include "data/data_error.hpp"
#include "data/detail/folder_scan.hpp"
#include "data/detail/image_codec.hpp"

namespace cnn::data {
namespace fs = std::filesystem;

namespace {

bool has_png_extension(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png";
}

}  // namespace

MaskPairs scan_mask_pairs(const fs::path& side) {
  const fs::path images = side / "images", masks = side / "masks";
  std::map<std::string, fs::path> image_of;  // by the name without its extension
  std::vector<fs::path> image_files;
  for (const fs::path& entry : visible_entries(images)) {
    if (is_folder(entry)) fail(entry, "unexpected folder inside images/: expected only images");
    if (!has_image_extension(entry))
      fail(entry, "not an image file: expected only .png, .jpg, .jpeg or .bmp files in images/");
    require_regular_file(entry);  // a FIFO named x.png would block the decoder forever
    if (auto [at, added] = image_of.emplace(entry.stem().string(), entry); !added)
      fail(entry, "has the name of " + full_path(at->second) +
                      ": an image's mask is found by its name, so two images cannot share one");
    image_files.push_back(entry);
  }
  if (image_files.empty()) fail(images, "no images: expected PNG, JPEG or BMP images, each with a mask in masks/");

  std::map<std::string, fs::path> mask_of;
  for (const fs::path& entry : visible_entries(masks)) {
    if (is_folder(entry)) fail(entry, "unexpected folder inside masks/: expected only PNG masks");
    if (!has_png_extension(entry)) fail(entry, "not a PNG file: expected only .png masks in masks/");
    require_regular_file(entry);
    const std::string name = entry.stem().string();
    if (!image_of.count(name))
      fail(entry, "a mask without an image: expected an image of the name '" + name +
                      "' (.png, .jpg, .jpeg or .bmp) in " + full_path(images));
    if (auto [at, added] = mask_of.emplace(name, entry); !added)
      fail(entry, "a second mask for the image " + full_path(image_of[name]) + ", beside " + full_path(at->second));
  }

  MaskPairs pairs;
  for (const fs::path& image : image_files) {
    const auto mask = mask_of.find(image.stem().string());
    if (mask == mask_of.end())
      fail(image, "an image without a mask: expected " + full_path(masks / (image.stem().string() + ".png")));
    pairs.images.push_back(image);
    pairs.masks.push_back(mask->second);
  }
  return pairs;
}

}  // namespace cnn::data
