#pragma once
// One side (train/, test/ or val/) of a segmentation data set: images/ holding PNG, JPEG or BMP
// images, masks/ beside it holding one mask an image, of its name (detail/mask_pairs.hpp). A
// mask is an 8-bit greyscale PNG of its image's size whose values are classes, 255
// (kIgnoreMask) a pixel of none. Images are converted and resized as an image folder's are
// (image_folder_dataset.hpp); masks are resized by nearest neighbour, never blending classes.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <cnnengine/data/dataset.hpp>

namespace cnn::data {

// `class_names`: the classes (2 to kMaxSegmentationClasses), a mask value at or above their count
// (other than 255) a DataError naming the mask and the value; or none (empty) to take them
// from the masks: 0 up to the largest value any mask holds (not 255), named "0", "1", ...
// Every image and mask is checked at open; both are held decoded when they fit in
// options.eager_decode_limit, else decoded on load. With options.skip_corrupt a pair whose image
// or mask cannot be used is left out instead.
std::unique_ptr<Dataset> open_segmentation_folder(const std::filesystem::path& side, SampleShape target,
                                                  std::vector<std::string> class_names,
                                                  const ImageFolderOptions& options = {});

}  // namespace cnn::data
