#include <cnnengine/memory/memory_stack.hpp>

#include <string>

#include <cnnengine/base/error.hpp>
#include "memory/block_heap.hpp"

namespace cnn::memory {
namespace {

// Byte counts added up with a plan's: none may come near overflowing the sum.
constexpr std::size_t kLargestBytes = std::size_t{1} << 60;

void check_bytes(std::size_t bytes, const char* what) {
  if (bytes > kLargestBytes)
    throw ConfigError(std::string(what) + " of " + std::to_string(bytes) + " bytes: more than any memory holds");
}

}  // namespace

void BudgetAccount::set_aside(std::size_t libraries, std::size_t communication) {
  check_bytes(libraries, "the libraries' workspaces");
  check_bytes(communication, "the communicator's buffers");
  libraries_ = libraries;
  communication_ = communication;
}

void BudgetAccount::add_loader_staging(std::size_t bytes) {
  check_bytes(bytes, "loader staging");
  check_bytes(loader_staging_ + bytes, "loader staging");
  loader_staging_ += bytes;
}

std::size_t BudgetAccount::cap() const { return budget_ > set_aside() ? budget_ - set_aside() : 0; }

std::size_t BudgetAccount::left_for_step_buffers(std::size_t outside_arena) const {
  const std::size_t held = beside_trainer() + outside_arena;
  return budget_ > held ? budget_ - held : 0;
}

std::size_t BudgetAccount::arena_capacity(std::size_t outside_arena) const {
  return left_for_step_buffers(outside_arena) / BlockHeap::kGranularity * BlockHeap::kGranularity;
}

}  // namespace cnn::memory
