#pragma once
// How memory is asked for and counted. One interface for every source of memory (RMM's
// device_memory_resource is the model): upstreams (host, CUDA device, CUDA pinned), strategies
// (direct, pool, arena, planned) and adaptors (budget, statistics, trace, fault injection) all
// implement it and compose. Beside it, the words its bytes are counted in: what a byte is for
// (Category), what a statistics adaptor counts, and byte counts as text.
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace cnn::memory {

// What a byte is for. Every request the engine makes names one, so a budget failure or a
// report can say where the memory went.
enum class Category : int {
  parameters = 0,
  parameter_gradients,
  optimizer_state,
  activations,
  workspace,
  data_staging,
  other,
};

inline constexpr std::size_t kCategoryCount = 7;

constexpr std::string_view category_name(Category c) {
  constexpr std::array<std::string_view, kCategoryCount> names = {
      "parameters", "parameter gradients", "optimizer state", "activations",
      "workspace",  "data staging",        "other"};
  return names[static_cast<std::size_t>(c)];
}

// Bytes by category: what the engine prints before step 1 and what an OutOfMemory carries.
struct CategoryBytes {
  std::array<std::size_t, kCategoryCount> bytes{};
  std::size_t& operator[](Category c) { return bytes[static_cast<std::size_t>(c)]; }
  std::size_t operator[](Category c) const { return bytes[static_cast<std::size_t>(c)]; }
  std::size_t total() const {
    std::size_t sum = 0;
    for (auto b : bytes) sum += b;
    return sum;
  }
};

inline constexpr std::size_t kDefaultAlignment = 256;  // cudaMalloc's guarantee; AVX-512 needs 64

class MemoryResource {
 public:
  virtual ~MemoryResource() = default;

  // Throws OutOfMemory when the request cannot be served; never returns nullptr for bytes > 0.
  void* allocate(std::size_t bytes, std::size_t alignment = kDefaultAlignment,
                 Category category = Category::other) {
    return do_allocate(bytes, alignment, category);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment = kDefaultAlignment,
                  Category category = Category::other) {
    do_deallocate(ptr, bytes, alignment, category);
  }

  // Largest single request that would succeed now without growing (0 if unknown).
  virtual std::size_t largest_free_block() const { return 0; }
  // Bytes free inside what the resource already holds, in any number of blocks (0 if unknown).
  virtual std::size_t free_bytes() const { return 0; }
  // True when memory comes from the CUDA device (kernels may touch it, the host may not).
  virtual bool is_device_memory() const { return false; }
  virtual std::string name() const = 0;

 private:
  virtual void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) = 0;
  virtual void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment,
                             Category category) = 0;
};

// What MemoryStack::statistics() reports (a statistics adaptor counts it): current and peak
// bytes, overall and per category, and calls.
struct Statistics {
  std::size_t current_bytes = 0;
  std::size_t peak_bytes = 0;
  CategoryBytes current_by_category;
  CategoryBytes peak_by_category;      // each category's own peak
  std::size_t allocations = 0;         // successful allocate calls
  std::size_t deallocations = 0;
  std::size_t failed_allocations = 0;  // allocate calls the upstream refused
  std::size_t allocated_bytes_total = 0;
  std::size_t largest_free_block = 0;  // of the upstream, when the snapshot was taken
  std::size_t free_bytes = 0;          // of the upstream, when the snapshot was taken

  std::size_t live_blocks() const { return allocations - deallocations; }
};

// Human-readable byte counts: "512MiB" in, "12.3 MiB" out. parse_bytes accepts a plain number of
// bytes or a number with B, KB/KiB, MB/MiB, GB/GiB, TB/TiB (case-insensitive; KB means 1000, KiB
// 1024): the units format_bytes writes. Throws ConfigError naming the text on anything else.
std::size_t parse_bytes(std::string_view text);
std::string format_bytes(std::size_t bytes);

inline std::size_t align_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace cnn::memory
