#pragma once
// The base of every adaptor: it wraps an upstream resource and, unless it knows better, answers
// the questions about free space and the kind of memory with the upstream's answers.
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

class Adaptor : public MemoryResource {
 public:
  explicit Adaptor(MemoryResource& upstream) : upstream_(upstream) {}
  Adaptor(const Adaptor&) = delete;
  Adaptor& operator=(const Adaptor&) = delete;

  MemoryResource& upstream() const { return upstream_; }
  std::size_t largest_free_block() const override { return upstream_.largest_free_block(); }
  std::size_t free_bytes() const override { return upstream_.free_bytes(); }
  bool is_device_memory() const override { return upstream_.is_device_memory(); }
  std::string name() const override { return upstream_.name(); }

 protected:
  MemoryResource& upstream_;
};

}  // namespace cnn::memory
