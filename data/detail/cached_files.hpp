#pragma once
// Image files decoded on load through a DecodedCache: each image's pixels as the cache keeps them
// (filled the first time a thread asks), and the samples a data set takes from them: its framing
// of the image, or a crop's window. What image folders, labels.csv folders and segmentation
// folders share.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <cnnengine/data/dataset.hpp>
#include "data/detail/image_codec.hpp"

namespace cnn::data {

class DecodedCache;

class CachedFiles {
 public:
  // sizes: each file's image as its header gives it (verify_image), in the files' order. The
  // cache keeps each at options.shorter_side, else the framing's side, else the shape's larger
  // side. Throws DataError as DecodedCache does.
  CachedFiles(const DecodedCacheOptions& options, const std::vector<std::filesystem::path>& files,
              std::vector<ImageInfo> sizes, SampleShape shape, int resize_shorter_side,
              std::size_t max_decoded_image_bytes, const std::string& name);
  ~CachedFiles();

  // Sample `index` framed as the data set frames it (shape, resize_shorter_side), or the window
  // `choose` picks, from the cache; false where the image is not there (no room for it, or another
  // thread is filling it): the caller decodes its file.
  bool load(std::size_t index, const std::filesystem::path& file, float* out) const;
  bool load_window(std::size_t index, const std::filesystem::path& file, const WindowChooser& choose, bool mirror,
                   float* out) const;
  std::string describe() const;

 private:
  const std::uint8_t* kept(std::size_t index, const std::filesystem::path& file) const;

  std::unique_ptr<DecodedCache> cache_;
  std::vector<ImageInfo> sizes_;
  SampleShape shape_;
  int resize_shorter_side_;
  std::size_t max_decoded_image_bytes_;
};

}  // namespace cnn::data
