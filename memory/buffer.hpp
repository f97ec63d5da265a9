#pragma once
// One block owned: allocated from a resource on construction, given back on destruction
// (RMM's device_buffer is the model). Holders of several blocks stay exception-safe for free.
#include <cstddef>
#include <utility>

#include "cnnengine/memory/memory_resource.hpp"

namespace cnn::memory {

class Buffer {
 public:
  Buffer() = default;
  Buffer(MemoryResource& resource, std::size_t bytes, Category category, std::size_t alignment = kDefaultAlignment)
      : resource_(&resource), bytes_(bytes), alignment_(alignment), category_(category) {
    if (bytes_) data_ = resource.allocate(bytes_, alignment_, category_);
  }
  ~Buffer() { release(); }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      release();
      resource_ = std::exchange(other.resource_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      alignment_ = other.alignment_;
      category_ = other.category_;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  float* floats() const { return static_cast<float*>(data_); }
  std::size_t bytes() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }

  // Gives the block back now (a no-op when empty).
  void release() noexcept {
    if (data_) resource_->deallocate(data_, bytes_, alignment_, category_);
    data_ = nullptr;
    bytes_ = 0;
  }

 private:
  MemoryResource* resource_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  std::size_t alignment_ = kDefaultAlignment;
  Category category_ = Category::other;
};

}  // namespace cnn::memory
