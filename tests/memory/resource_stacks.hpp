#pragma once
// Test helper: every strategy, alone and under adaptors, as one list that the battery runs.
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory::test {

inline constexpr std::size_t kStackArenaCapacity = std::size_t{64} << 20;

// Owns a chain of resources, bottom first; destroys them top first.
class ResourceStack {
 public:
  explicit ResourceStack(std::string name) : name_(std::move(name)) {}
  ResourceStack(const ResourceStack&) = delete;
  ResourceStack& operator=(const ResourceStack&) = delete;
  ~ResourceStack() {
    while (!layers_.empty()) layers_.pop_back();
  }

  template <typename Resource, typename... Args>
  Resource& push(Args&&... args) {
    auto layer = std::make_unique<Resource>(std::forward<Args>(args)...);
    Resource& ref = *layer;
    layers_.push_back(std::move(layer));
    return ref;
  }
  MemoryResource& below() { return *layers_.back(); }  // the layer the next push wraps
  MemoryResource& top() { return *layers_.back(); }
  std::ostringstream& trace_stream() { return trace_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::ostringstream trace_;  // declared before the layers: a trace adaptor writes into it
  std::vector<std::unique_ptr<MemoryResource>> layers_;
};

using StackFactory = std::function<std::unique_ptr<ResourceStack>()>;

// Every strategy (direct, pool, arena) bare and under each adaptor, plus deep compositions.
std::vector<StackFactory> all_stacks();

}  // namespace cnn::memory::test
