#pragma once
// Images decoded once and kept decoded, so that later epochs read bytes instead of decoding: each
// resized so that its shorter side is at most the cache's side (its aspect kept; torchvision's
// Resize), 8-bit planar (CHW), in one mapping of anonymous memory or of a file in a folder of the
// user's. The layout is fixed when the data set opens, from its images' header sizes: images in
// order until DecodedCacheOptions::max_bytes is reached, the rest decoded from their files every
// time. An image is filled the first time a loader asks for it.
//
// A file keeps the cache from run to run. It is tied to the data's identity (each file's path,
// size and modification time, the side, the channels): a file of other data, or of another
// layout, is rebuilt; a file that does not start as ours is refused, never written over; each
// image's CRC-32 is checked the first time a process reads it, and one that does not match is
// decoded again. One process at a time holds a file (an exclusive lock).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <cnnengine/data/dataset.hpp>

namespace cnn::data {

class DecodedCache {
 public:
  // sizes: each image's height and width as its file stores it; name: what the cache holds, for
  // its file's name and messages (the data set's folder). Throws DataError naming the file.
  DecodedCache(const DecodedCacheOptions& options, int channels, int side,
               const std::vector<std::pair<int, int>>& sizes, std::uint64_t identity, const std::string& name);
  ~DecodedCache();
  DecodedCache(const DecodedCache&) = delete;
  DecodedCache& operator=(const DecodedCache&) = delete;

  // Image i's size in the cache (its shorter side at most the side).
  int height(std::size_t i) const { return entries_[i].height; }
  int width(std::size_t i) const { return entries_[i].width; }
  // Image i's pixels once filled (and checked, for a file's), else null. Thread-safe.
  const std::uint8_t* find(std::size_t i) const;
  // Room for image i's pixels where it has room and no other thread is filling it; then
  // publish(i), or abandon(i) when it could not be filled. Null otherwise: decode it elsewhere.
  std::uint8_t* claim(std::size_t i);
  void publish(std::size_t i);
  void abandon(std::size_t i);

  // "cached in memory: 2000 images of 3x256 on the shorter side, up to 367.2 MiB (filled 120)"
  std::string describe() const;
  std::size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    std::uint64_t offset = 0;
    int height = 0, width = 0;
    bool held = false;  // within max_bytes
  };
  enum State : std::uint8_t { empty, filling, unchecked, ready };

  void open_file(const std::filesystem::path& path, std::uint64_t identity);
  std::size_t image_bytes(std::size_t i) const;

  std::vector<Entry> entries_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> states_;
  int channels_, side_;
  std::size_t bytes_ = 0;  // the mapping's
  std::uint64_t data_offset_ = 0;
  unsigned char* base_ = nullptr;
  int fd_ = -1;
  std::filesystem::path file_;  // empty: in memory
  std::string name_;
};

// The identity of a data set's files for its cache: their paths, sizes and modification times.
// Throws DataError naming a file that cannot be read.
std::uint64_t files_identity(const std::vector<std::filesystem::path>& files);

// The size an image of height x width is kept at: its shorter side at most `side`, the longer
// floor(side x longer / shorter), as torchvision's Resize(side).
std::pair<int, int> kept_size(int height, int width, int side);

}  // namespace cnn::data
