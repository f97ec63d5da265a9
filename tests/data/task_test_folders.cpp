#include "task_test_folders.hpp"

#include <cstdint>

#include "data_test_files.hpp"

namespace cnn::data::test {
namespace fs = std::filesystem;

std::vector<std::uint8_t> rgb_ramp(int width, int height, int seed) {
  std::vector<std::uint8_t> pixels;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 1; c <= 3; ++c) pixels.push_back(static_cast<std::uint8_t>((seed + 10 * y + x) * c % 256));
  return pixels;
}

void write_pair(const fs::path& side, const std::string& name, int width, int height, int seed,
                const std::vector<std::uint8_t>& mask) {
  write_image(side / "images" / (name + ".png"), width, height, 3, rgb_ramp(width, height, seed));
  write_image(side / "masks" / (name + ".png"), width, height, 1, mask);
}

std::vector<std::uint8_t> segmentation_mask(int seed) {
  std::vector<std::uint8_t> mask(8);
  for (int p = 0; p < 8; ++p) mask[static_cast<std::size_t>(p)] = static_cast<std::uint8_t>((seed + p) % 3);
  mask[static_cast<std::size_t>(seed)] = 255;
  return mask;
}

void write_segmentation_folder(const fs::path& root) {
  const char* names[] = {"a", "b", "c", "d", "e"};
  for (int i = 0; i < 5; ++i)
    write_pair(root / (i < 3 ? "train" : "test"), names[i], 4, 2, i, segmentation_mask(i));
}

}  // namespace cnn::data::test
