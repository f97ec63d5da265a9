#pragma once
// Test helper: allocates through a resource, fills every block with its own byte, and checks
// that no live block is ever overwritten or overlaps another. Reports problems by throwing
// std::runtime_error (not Catch2 macros) so that it can run on several threads.
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>

#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory::test {

struct ChurnOptions {
  int operations = 2000;
  std::size_t live_cap = std::size_t{16} << 20;  // free instead of allocating above this
  std::size_t max_bytes = std::size_t{3} << 20;
  bool allow_out_of_memory = false;              // else an OutOfMemory fails the churn
};

struct ChurnResult {
  std::size_t allocations = 0;
  std::size_t deallocations = 0;
  std::size_t refused = 0;
  std::size_t peak_bytes = 0;
};

class BlockTracker {
 public:
  BlockTracker(MemoryResource& resource, std::uint8_t tag_offset = 0)
      : resource_(resource), tag_offset_(tag_offset) {}
  BlockTracker(const BlockTracker&) = delete;
  BlockTracker& operator=(const BlockTracker&) = delete;
  ~BlockTracker();  // frees whatever is still live

  // Allocates, checks alignment and overlap, fills. OutOfMemory passes through.
  void* allocate(std::size_t bytes, std::size_t alignment, Category category);
  void free_random(std::mt19937_64& rng);
  void free_all();
  void check_all() const;  // every live block still holds its byte

  // Random allocate/free steps (seeded); frees everything at the end.
  ChurnResult churn(std::uint64_t seed, const ChurnOptions& options);

  std::size_t live_bytes() const { return live_bytes_; }
  std::size_t live_blocks() const { return blocks_.size(); }
  std::size_t peak_bytes() const { return peak_bytes_; }

 private:
  struct Block {
    std::size_t bytes;
    std::size_t alignment;
    Category category;
    std::uint8_t tag;
  };
  using Map = std::map<std::uintptr_t, Block>;

  void check(const Map::value_type& entry) const;
  void release(Map::iterator it);

  MemoryResource& resource_;
  std::uint8_t tag_offset_;
  Map blocks_;
  std::uint64_t next_tag_ = 0;
  std::size_t live_bytes_ = 0;
  std::size_t peak_bytes_ = 0;
  ChurnResult counts_;
};

// A request size: mostly small, some medium, a few large (up to max_bytes).
std::size_t random_size(std::mt19937_64& rng, std::size_t max_bytes);
std::size_t random_alignment(std::mt19937_64& rng);
Category random_category(std::mt19937_64& rng);

}  // namespace cnn::memory::test
