#pragma once
// One block owned: allocated from a resource on construction, given back on destruction
// (RMM's device_buffer is the model). Holders of several blocks stay exception-safe for free.
#include <cstddef>
#include <utility>

#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

// Releases that a resource refused (a CUDA device that failed, a bug in a resource): each is
// reported on standard error, the block forgotten, and counted here. Giving memory back never
// throws: it runs in destructors and in the paths that recover from errors.
std::size_t failed_releases();
// resource.deallocate(...), with a refusal reported and counted instead of thrown.
void give_back(MemoryResource& resource, void* ptr, std::size_t bytes, std::size_t alignment,
               Category category) noexcept;

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

  // Gives the block back now (a no-op when empty). Never throws (see failed_releases).
  void release() noexcept {
    if (data_) give_back(*resource_, data_, bytes_, alignment_, category_);
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
