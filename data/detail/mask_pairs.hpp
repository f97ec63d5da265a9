#pragma once
// The files of one side of a segmentation data set (train/, test/ or val/): images/ holding PNG,
// JPEG or BMP images, and masks/ beside it holding one PNG mask an image, of the image's name
// (images/street.jpg, masks/street.png). Hidden entries are skipped.
#include <filesystem>
#include <vector>

namespace cnn::data {

struct MaskPairs {
  std::vector<std::filesystem::path> images;  // sorted by name
  std::vector<std::filesystem::path> masks;   // masks[i] is images[i]'s
};

// A DataError naming the file or folder at fault: images/ or masks/ missing or empty, a
// sub-folder or a file of another kind in either, two images of one name (street.png and
// street.jpg), an image without a mask, a mask without an image.
MaskPairs scan_mask_pairs(const std::filesystem::path& side);

}  // namespace cnn::data
