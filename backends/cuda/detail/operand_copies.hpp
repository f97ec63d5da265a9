#pragma once
// The 16-bit copies of a product's operands that lead its workspace in bf16 and fp16 (Note
// [16-bit products on CUDA], conv.cpp): each starts 256-byte aligned, and what follows the last
// is the library's workspace.
#include <cstddef>
#include <initializer_list>

#include <cnnengine/engine/core/backend.hpp>

namespace cnn::cuda {

constexpr std::size_t kCopyAlignment = 256;

// The bytes a 16-bit copy of `elements` values takes, rounded up to the alignment.
inline std::size_t copy_bytes(std::size_t elements) {
  return (elements * 2 + kCopyAlignment - 1) / kCopyAlignment * kCopyAlignment;
}

inline std::size_t copies_bytes(std::initializer_list<std::size_t> elements) {
  std::size_t bytes = 0;
  for (std::size_t e : elements) bytes += copy_bytes(e);
  return bytes;
}

// Takes copies from the front of a workspace, in order.
class OperandCopies {
 public:
  explicit OperandCopies(Workspace ws) : rest_(ws) {}
  // Where the copy of `elements` values goes; nullptr where the workspace has no room for it.
  void* take(std::size_t elements) {
    const std::size_t bytes = copy_bytes(elements);
    if (bytes > rest_.bytes || !rest_.data) return nullptr;
    void* copy = rest_.data;
    rest_.data = static_cast<char*>(rest_.data) + bytes;
    rest_.bytes -= bytes;
    return copy;
  }
  Workspace rest() const { return rest_; }

 private:
  Workspace rest_;
};

}  // namespace cnn::cuda
