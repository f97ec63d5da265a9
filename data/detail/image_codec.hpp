#pragma once
// Image files through stb_image: PNG, JPEG and BMP, grey or colour, to 8-bit planar pixels at
// a chosen channel count and size. Every failure is a DataError naming the file.
#include <cstdint>
#include <filesystem>

#include "cnnengine/data/dataset.hpp"

namespace cnn::data {

// .png, .jpg, .jpeg, .bmp in any letter case.
bool has_image_extension(const std::filesystem::path& path);

struct ImageInfo {
  int width = 0, height = 0, channels = 0;
};

// Reads the header only.
ImageInfo probe_image(const std::filesystem::path& path);

// Decodes the whole file, converts it to target.channels (1 or 3) and resizes it (bilinear) to
// target.height x target.width; writes target.elements() bytes, CHW, into out.
void decode_image(const std::filesystem::path& path, SampleShape target, std::uint8_t* out);

}  // namespace cnn::data
