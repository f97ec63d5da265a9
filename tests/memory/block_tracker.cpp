#include "block_tracker.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>

#include <cnnengine/memory/memory_resource.hpp>
#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::memory::test {

std::size_t random_size(std::mt19937_64& rng, std::size_t max_bytes) {
  const auto pick = std::uniform_int_distribution<int>(0, 99)(rng);
  std::size_t hi = pick < 70 ? 8192 : pick < 95 ? 512 * 1024 : max_bytes;
  hi = std::min(hi, max_bytes);
  return std::uniform_int_distribution<std::size_t>(1, hi)(rng);
}

std::size_t random_alignment(std::mt19937_64& rng) {
  return std::size_t{1} << std::uniform_int_distribution<int>(0, 12)(rng);
}

Category random_category(std::mt19937_64& rng) {
  return static_cast<Category>(
      std::uniform_int_distribution<int>(0, static_cast<int>(kCategoryCount) - 1)(rng));
}

BlockTracker::~BlockTracker() {
  try {
    free_all();
  } catch (...) {  // a failing test already reported it
  }
}

void* BlockTracker::allocate(std::size_t bytes, std::size_t alignment, Category category) {
  void* ptr = resource_.allocate(bytes, alignment, category);
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  if (!ptr) throw std::runtime_error("allocate returned nullptr");
  if (address % alignment)
    throw std::runtime_error("pointer not aligned to " + std::to_string(alignment));
  auto next = blocks_.lower_bound(address);
  if (next != blocks_.end() && next->first < address + bytes)
    throw std::runtime_error("new block overlaps a live block after it");
  if (next != blocks_.begin() && std::prev(next)->first + std::prev(next)->second.bytes > address)
    throw std::runtime_error("new block overlaps a live block before it");

  // Tags skip 0 so that zeroed memory never passes for a filled block.
  const auto tag = static_cast<std::uint8_t>(1 + (tag_offset_ + next_tag_++) % 251);
  std::memset(ptr, tag, bytes);
  blocks_.emplace_hint(next, address, Block{bytes, alignment, category, tag});
  live_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  ++counts_.allocations;
  return ptr;
}

void BlockTracker::check(const Map::value_type& entry) const {
  const auto* bytes = reinterpret_cast<const unsigned char*>(entry.first);
  const Block& block = entry.second;
  // All bytes equal the first (overlapping compare), and the first is the tag.
  if (bytes[0] != block.tag || std::memcmp(bytes, bytes + 1, block.bytes - 1) != 0)
    throw std::runtime_error("a live block of " + std::to_string(block.bytes) +
                             " bytes was overwritten");
}

void BlockTracker::release(Map::iterator it) {
  check(*it);
  resource_.deallocate(reinterpret_cast<void*>(it->first), it->second.bytes, it->second.alignment,
                       it->second.category);
  live_bytes_ -= it->second.bytes;
  blocks_.erase(it);
  ++counts_.deallocations;
}

void BlockTracker::free_random(std::mt19937_64& rng) {
  if (blocks_.empty()) return;
  auto it = blocks_.begin();
  std::advance(it, std::uniform_int_distribution<std::size_t>(0, blocks_.size() - 1)(rng));
  release(it);
}

void BlockTracker::free_all() {
  while (!blocks_.empty()) release(blocks_.begin());
}

void BlockTracker::check_all() const {
  for (const auto& entry : blocks_) check(entry);
}

ChurnResult BlockTracker::churn(std::uint64_t seed, const ChurnOptions& options) {
  std::mt19937_64 rng(seed);
  counts_ = {};
  for (int step = 0; step < options.operations; ++step) {
    const std::size_t bytes = random_size(rng, options.max_bytes);
    const bool allocate_now = live_bytes_ + bytes <= options.live_cap &&
                              std::uniform_int_distribution<int>(0, 99)(rng) < 60;
    if (allocate_now) {
      try {
        allocate(bytes, random_alignment(rng), random_category(rng));
      } catch (const OutOfMemory&) {
        if (!options.allow_out_of_memory) throw;
        ++counts_.refused;
      }
    } else {
      free_random(rng);
    }
    if (step % 250 == 0) check_all();
  }
  check_all();
  counts_.peak_bytes = peak_bytes_;
  ChurnResult result = counts_;
  free_all();
  result.deallocations = counts_.deallocations;
  return result;
}

}  // namespace cnn::memory::test
