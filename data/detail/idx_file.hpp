#pragma once
// One IDX file (the MNIST format) of unsigned bytes, read whole and validated: magic, dimension
// count, nonzero dimensions, and a data length that is exactly the product of the dimensions.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cnn::data {

// The most data one IDX file may declare: 4 GiB (5.4 million 28x28 images; MNIST's 60000 take
// 47 MB). A header declaring more is refused before anything is allocated; so is one declaring
// more than the file can hold (its size on disk; for gzip, deflate's largest expansion of it).
inline constexpr std::uint64_t kMaxIdxDataBytes = std::uint64_t{4} << 30;

struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;
};

// `rank` is the dimension count the magic must carry (3 for images, 1 for labels); `what`
// names the payload in messages ("pixels", "labels"). Throws DataError naming the file.
IdxArray read_idx(const std::filesystem::path& path, int rank, const std::string& what);

}  // namespace cnn::data
