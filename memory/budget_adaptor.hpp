#pragma once
// A hard cap on the bytes live through it. A request that would go over is refused before the
// upstream sees it, with an OutOfMemory that carries the request, the limit, the bytes in use by
// category and the upstream's free space (largest block, total, hence fragmentation).
#include <cstddef>
#include <memory>
#include <mutex>

#include "memory/adaptor.hpp"
#include "memory/live_blocks.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

class BudgetAdaptor final : public Adaptor {
 public:
  BudgetAdaptor(MemoryResource& upstream, std::size_t budget);
  // Over another upstream, against the same budget as `shared` (which must outlive it): the
  // bytes through the two together are capped, as the device memory and the pinned staging a
  // loader fills are under one budget (MemoryStack). Each takes back only its own blocks.
  BudgetAdaptor(MemoryResource& upstream, BudgetAdaptor& shared);

  std::size_t budget() const;
  // A smaller budget than what is in use refuses every request until enough is freed.
  void set_budget(std::size_t budget);
  CategoryBytes in_use() const;  // through every adaptor sharing the budget
  std::size_t peak_bytes() const;
  std::size_t headroom() const;  // budget - in use

  // The upstream's answers, cut to the headroom (0 stays "unknown").
  std::size_t largest_free_block() const override;
  std::size_t free_bytes() const override;
  std::string name() const override { return "budget(" + upstream_.name() + ")"; }

 private:
  // What the adaptors sharing one budget count together.
  struct Account {
    std::mutex mutex;
    std::size_t budget = 0;
    CategoryBytes in_use;
    std::size_t peak = 0;
  };

  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, Category) override;
  [[noreturn]] void refuse(std::size_t bytes, Category category) const;

  std::shared_ptr<Account> account_;
  LiveBlocks live_;  // under account_->mutex
};

}  // namespace cnn::memory
