#include "memory/trace_replay.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "memory/buffer.hpp"
#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::memory {
namespace {

struct Block {
  void* ptr;
  std::size_t bytes;
  std::size_t alignment;
  Category category;
};

[[noreturn]] void bad_trace(const TraceEvent& event, const std::string& what) {
  throw DataError("memory trace event " + std::to_string(event.sequence) + ": " + what);
}

}  // namespace

ReplayResult replay(const std::vector<TraceEvent>& events, MemoryResource& resource) {
  ReplayResult result;
  std::unordered_map<std::uint64_t, Block> live;
  std::unordered_set<std::uint64_t> refused;  // ids whose allocation the resource refused
  std::size_t live_bytes = 0;

  auto free_all = [&] {
    for (auto& [id, block] : live)
      give_back(resource, block.ptr, block.bytes, block.alignment, block.category);
    live.clear();
  };

  try {
    for (const TraceEvent& event : events) {
      switch (event.op) {
        case TraceOp::failed:
          ++result.recorded_failures;
          break;
        case TraceOp::allocate: {
          if (live.count(event.id) || refused.count(event.id))
            bad_trace(event, "block " + std::to_string(event.id) + " is allocated twice");
          try {
            void* ptr = resource.allocate(event.bytes, event.alignment, event.category);
            live.emplace(event.id, Block{ptr, event.bytes, event.alignment, event.category});
            ++result.allocations;
            live_bytes += event.bytes;
            result.peak_bytes = std::max(result.peak_bytes, live_bytes);
          } catch (const OutOfMemory&) {
            ++result.out_of_memory;
            refused.insert(event.id);
          }
          break;
        }
        case TraceOp::deallocate: {
          if (auto r = refused.find(event.id); r != refused.end()) {
            refused.erase(r);
            ++result.skipped_frees;
            break;
          }
          auto it = live.find(event.id);
          if (it == live.end())
            bad_trace(event, "frees block " + std::to_string(event.id) + ", which is not live");
          if (it->second.bytes != event.bytes)
            bad_trace(event, "frees " + std::to_string(event.bytes) + " bytes of a block of " +
                                 std::to_string(it->second.bytes));
          resource.deallocate(it->second.ptr, it->second.bytes, it->second.alignment,
                              it->second.category);
          live_bytes -= it->second.bytes;
          live.erase(it);
          ++result.deallocations;
          break;
        }
      }
    }
  } catch (...) {
    free_all();
    throw;
  }
  result.live_at_end = live_bytes;
  free_all();
  return result;
}

}  // namespace cnn::memory
