#pragma once
// The allocation trace: one text line per allocate or deallocate, so that a recorded training
// run can be read back and replayed against any strategy.
//
//   # cnnengine memory trace v1: seq op id bytes alignment category
//   0 alloc 1 1048576 256 activations
//   1 fail 0 8388608 256 workspace
//   2 free 1 1048576 256 activations
//
// `id` names a block from its allocation to its free (0 for a refused request).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

enum class TraceOp { allocate, deallocate, failed };

struct TraceEvent {
  std::uint64_t sequence = 0;
  TraceOp op = TraceOp::allocate;
  std::uint64_t id = 0;
  std::size_t bytes = 0;
  std::size_t alignment = 0;
  Category category = Category::other;

  bool operator==(const TraceEvent&) const = default;
};

inline constexpr std::string_view kTraceHeader =
    "# cnnengine memory trace v1: seq op id bytes alignment category";

// One word per category, for the trace ("parameter_gradients").
std::string_view category_token(Category category);

void write_trace_event(std::ostream& out, const TraceEvent& event);

// Throws DataError naming the source and line on a line it cannot read, and when the
// file cannot be opened.
std::vector<TraceEvent> read_trace(const std::filesystem::path& path);
std::vector<TraceEvent> read_trace(std::istream& in, const std::string& source_name = "trace");

}  // namespace cnn::memory
