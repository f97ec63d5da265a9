#pragma once
// The memory a backend's workspace queries take their scratch from while a plan is made
// (Backend::set_query_memory): the planner's budget, for as long as the scope lives.
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {

class QueryMemoryScope {
 public:
  // Null: the backend's own device memory.
  QueryMemoryScope(Backend& backend, memory::MemoryResource* memory)
      : backend_(backend), previous_(backend.set_query_memory(memory)) {}
  ~QueryMemoryScope() { backend_.set_query_memory(previous_); }
  QueryMemoryScope(const QueryMemoryScope&) = delete;
  QueryMemoryScope& operator=(const QueryMemoryScope&) = delete;

 private:
  Backend& backend_;
  memory::MemoryResource* previous_;
};

}  // namespace cnn
