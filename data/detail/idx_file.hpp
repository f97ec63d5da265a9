#pragma once
// One IDX file (the MNIST format) of unsigned bytes, read whole and validated: magic, dimension
// count, nonzero dimensions, and a data length that is exactly the product of the dimensions.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cnn::data {

struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;
};

// `rank` is the dimension count the magic must carry (3 for images, 1 for labels); `what`
// names the payload in messages ("pixels", "labels"). Throws DataError naming the file.
IdxArray read_idx(const std::filesystem::path& path, int rank, const std::string& what);

}  // namespace cnn::data
