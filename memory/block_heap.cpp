#include "memory/block_heap.hpp"

#include <cstdint>
#include <iterator>
#include <string>

#include <cnnengine/base/error.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

std::size_t BlockHeap::round(std::size_t bytes) {
  constexpr std::size_t kLargest = SIZE_MAX / kGranularity * kGranularity;
  if (bytes > kLargest) return kLargest;
  return bytes == 0 ? kGranularity : align_up(bytes, kGranularity);
}

void BlockHeap::add_chunk(const Chunk& chunk) {
  char* base = static_cast<char*>(chunk.base);
  if (!base || reinterpret_cast<std::uintptr_t>(base) % kChunkAlignment != 0 || chunk.bytes == 0 ||
      chunk.bytes % kGranularity != 0)
    throw ConfigError("BlockHeap: a chunk must be a non-empty multiple of " +
                           std::to_string(kGranularity) + " bytes at an address aligned to " +
                           std::to_string(kChunkAlignment));
  chunks_[base] = chunk;
  auto it = blocks_.emplace(base, Block{chunk.bytes, base, true, 0, Category::other}).first;
  insert_free(it);
  reserved_bytes_ += chunk.bytes;
}

void* BlockHeap::take(std::size_t requested, std::size_t alignment, Category category) {
  if (requested > largest_free()) return nullptr;
  const std::size_t bytes = round(requested);
  // Candidates in increasing size: the first whose aligned start still leaves room is the best
  // fit. With alignment <= kChunkAlignment that is always the first candidate (every block
  // starts at a multiple of kChunkAlignment: chunks do, and sizes and paddings are multiples).
  for (auto f = free_.lower_bound({bytes, nullptr}); f != free_.end(); ++f) {
    char* start = f->second;
    const auto address = reinterpret_cast<std::uintptr_t>(start);
    char* aligned = start + (align_up(address, alignment) - address);
    if (aligned + bytes > start + f->first) continue;

    auto it = blocks_.find(start);
    erase_free(it);
    if (aligned != start) {  // the padding in front stays a free block of its own
      auto rest = split(it, aligned);
      insert_free(it);
      it = rest;
    }
    if (it->second.bytes > bytes) insert_free(split(it, aligned + bytes));
    it->second.free = false;
    it->second.requested = requested;
    it->second.category = category;
    return aligned;
  }
  return nullptr;
}

bool BlockHeap::holds_live(const void* ptr) const {
  auto it = blocks_.find(static_cast<char*>(const_cast<void*>(ptr)));
  return it != blocks_.end() && !it->second.free;
}

BlockHeap::Released BlockHeap::give_back(void* ptr, std::size_t requested) {
  auto it = blocks_.find(static_cast<char*>(ptr));
  if (it == blocks_.end() || it->second.free)
    throw ConfigError("deallocate: pointer is not a live block of this resource");
  if (it->second.requested != requested)
    throw ConfigError("deallocate: block was allocated with " +
                                std::to_string(it->second.requested) + " bytes, freed with " +
                                std::to_string(requested));
  const Released released{it->second.bytes, it->second.category};
  it->second.free = true;
  it->second.requested = 0;

  // Blocks of a chunk tile it in address order, so same-chunk map neighbours are adjacent.
  auto next = std::next(it);
  if (next != blocks_.end() && next->second.free && next->second.chunk == it->second.chunk) {
    erase_free(next);
    it->second.bytes += next->second.bytes;
    blocks_.erase(next);
  }
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.free && prev->second.chunk == it->second.chunk) {
      erase_free(prev);
      prev->second.bytes += it->second.bytes;
      blocks_.erase(it);
      it = prev;
    }
  }
  insert_free(it);
  return released;
}

std::vector<BlockHeap::Chunk> BlockHeap::remove_free_chunks() {
  std::vector<Chunk> removed;
  for (auto c = chunks_.begin(); c != chunks_.end();) {
    auto it = blocks_.find(c->first);
    if (it->second.free && it->second.bytes == c->second.bytes) {
      erase_free(it);
      blocks_.erase(it);
      reserved_bytes_ -= c->second.bytes;
      removed.push_back(c->second);
      c = chunks_.erase(c);
    } else {
      ++c;
    }
  }
  return removed;
}

std::vector<BlockHeap::Chunk> BlockHeap::remove_all_chunks() {
  std::vector<Chunk> removed;
  for (const auto& [base, chunk] : chunks_) removed.push_back(chunk);
  chunks_.clear();
  blocks_.clear();
  free_.clear();
  free_bytes_ = 0;
  reserved_bytes_ = 0;
  return removed;
}

void BlockHeap::insert_free(BlockMap::iterator it) {
  it->second.free = true;
  free_.emplace(it->second.bytes, it->first);
  free_bytes_ += it->second.bytes;
}

void BlockHeap::erase_free(BlockMap::iterator it) {
  free_.erase({it->second.bytes, it->first});
  free_bytes_ -= it->second.bytes;
}

BlockHeap::BlockMap::iterator BlockHeap::split(BlockMap::iterator it, char* at) {
  const std::size_t front = static_cast<std::size_t>(at - it->first);
  Block tail{it->second.bytes - front, it->second.chunk, true, 0, Category::other};
  it->second.bytes = front;
  return blocks_.emplace_hint(std::next(it), at, tail);
}

}  // namespace cnn::memory
