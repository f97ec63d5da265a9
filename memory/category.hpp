#pragma once
// What a byte is for. Every request the engine makes names one, so a budget failure or a
// report can say where the memory went.
#include <array>
#include <cstddef>
#include <string_view>

namespace cnn::memory {

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

}  // namespace cnn::memory
