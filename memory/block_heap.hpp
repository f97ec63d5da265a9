#pragma once
// Best-fit bookkeeping over address ranges ("chunks") obtained elsewhere: a request takes the
// smallest free block that holds it and splits off the rest; a block given back merges with
// its free neighbours in the same chunk. Shared by PoolResource and ArenaResource.
// Not thread-safe: its owners lock around it.
#include <cstddef>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

class BlockHeap {
 public:
  // Requests are rounded up to a multiple of this (PyTorch's size classes).
  static constexpr std::size_t kGranularity = 512;
  // What chunks must be aligned to: kDefaultAlignment, all that cudaMalloc guarantees. Larger
  // alignments are served by leaving free padding in front of the block.
  static constexpr std::size_t kChunkAlignment = kDefaultAlignment;

  struct Chunk {
    void* base = nullptr;
    std::size_t bytes = 0;
    Category category = Category::other;  // what the upstream was told when it was reserved
  };

  struct Released {
    std::size_t block_bytes = 0;  // rounded size the block occupied
    Category category = Category::other;
  };

  // Up to a multiple of kGranularity, at least one granule; saturates instead of wrapping
  // (a size that large never fits).
  static std::size_t round(std::size_t bytes);

  // `base` must be kChunkAlignment-aligned, `bytes` a positive multiple of kGranularity.
  void add_chunk(const Chunk& chunk);

  // Best fit (ties: lowest address) for `bytes` at `alignment`; nullptr when no free block
  // holds it. `requested` is remembered so that give_back can check the caller's size.
  void* take(std::size_t requested, std::size_t alignment, Category category);

  bool holds_live(const void* ptr) const;
  // Throws ConfigError (the caller broke the contract) when `ptr` is not a live block
  // of this heap or was allocated with a different size.
  Released give_back(void* ptr, std::size_t requested);

  std::size_t largest_free() const { return free_.empty() ? 0 : free_.rbegin()->first; }
  std::size_t free_bytes() const { return free_bytes_; }
  std::size_t free_block_count() const { return free_.size(); }
  std::size_t reserved_bytes() const { return reserved_bytes_; }
  std::size_t chunk_count() const { return chunks_.size(); }
  std::size_t live_block_count() const { return blocks_.size() - free_.size(); }

  // Removes the chunks that are one free block and hands them back for release upstream.
  std::vector<Chunk> remove_free_chunks();
  // Removes every chunk, live blocks or not (the owner is being destroyed).
  std::vector<Chunk> remove_all_chunks();

 private:
  struct Block {
    std::size_t bytes = 0;
    char* chunk = nullptr;  // base of the chunk it belongs to: only same-chunk blocks merge
    bool free = true;
    std::size_t requested = 0;
    Category category = Category::other;
  };
  using BlockMap = std::map<char*, Block>;

  void insert_free(BlockMap::iterator it);
  void erase_free(BlockMap::iterator it);
  // Cuts [at, end of block) off `it` into a new block (marked free, not yet in free_).
  BlockMap::iterator split(BlockMap::iterator it, char* at);

  BlockMap blocks_;                                  // every block, by address
  std::set<std::pair<std::size_t, char*>> free_;     // free blocks by (size, address)
  std::map<char*, Chunk> chunks_;
  std::size_t free_bytes_ = 0;
  std::size_t reserved_bytes_ = 0;
};

}  // namespace cnn::memory
