// The budget's account: what is set aside, what the loaders stage, what the step buffers and the
// arena may take, added up once; and the memory stack's cap and arena built from it.
#include <catch2/catch.hpp>

#include <cstdint>

#include <cnnengine/base/error.hpp>
#include "memory/block_heap.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/memory/memory_stack.hpp>

using namespace cnn;
using namespace cnn::memory;

TEST_CASE("a budget account adds up what the budget holds beside the trainer", "[memory][budget]") {
  BudgetAccount account(100000);
  account.set_aside(3000, 1000);
  account.add_loader_staging(6000);
  account.add_loader_staging(2000);
  CHECK(account.set_aside() == 4000);
  CHECK(account.loader_staging() == 8000);
  CHECK(account.beside_trainer() == 12000);
  CHECK(account.cap() == 96000);
  CHECK(account.left_for_step_buffers(20000) == 68000);
  CHECK(account.arena_capacity(20000) == 68000 / BlockHeap::kGranularity * BlockHeap::kGranularity);
  CHECK(account.left_for_step_buffers(88000) == 0);  // exactly full
  CHECK(account.left_for_step_buffers(90000) == 0);  // over
  CHECK(account.arena_capacity(90000) == 0);
  account.set_aside(200000, 0);  // replaces the earlier amounts
  CHECK(account.cap() == 0);
  CHECK(account.left_for_step_buffers(0) == 0);
}

TEST_CASE("an account without a budget leaves nothing to compute", "[memory][budget]") {
  BudgetAccount none;
  none.set_aside(10, 10);
  none.add_loader_staging(10);
  CHECK_FALSE(none.limited());
  CHECK(none.cap() == 0);
  CHECK(none.left_for_step_buffers(0) == 0);
}

TEST_CASE("an account refuses byte counts no memory holds", "[memory][budget]") {
  BudgetAccount account(1 << 20);
  CHECK_THROWS_WITH(account.add_loader_staging(SIZE_MAX), Catch::Contains("more than any memory holds"));
  CHECK_THROWS_WITH(account.set_aside(0, SIZE_MAX), Catch::Contains("communicator") &&
                                                        Catch::Contains("more than any memory holds"));
  account.add_loader_staging(std::size_t{1} << 59);
  CHECK_THROWS_AS(account.add_loader_staging(std::size_t{1} << 59 | 1), ConfigError);  // the sum is too large
  CHECK(account.loader_staging() == std::size_t{1} << 59);
}

TEST_CASE("the memory stack caps and reserves its arena from its account", "[memory][budget][stack]") {
  const std::size_t budget = 1 << 20;
  MemoryStack stack(host_resource(), host_resource(), MemoryOptions{budget, Strategy::arena});
  stack.book_staging(100000);
  CHECK(stack.account().loader_staging() == 100000);
  const BudgetAccount& account = stack.settle_account(4096, 8192);
  CHECK(stack.cap() == budget - 4096 - 8192);
  stack.build_step_buffers(300000, 0);
  CHECK(stack.arena_capacity() == account.arena_capacity(300000));
  CHECK(stack.arena_capacity() ==
        (budget - 4096 - 8192 - 100000 - 300000) / BlockHeap::kGranularity * BlockHeap::kGranularity);
}

TEST_CASE("an arena with nothing left after the account's bytes is refused", "[memory][budget][stack]") {
  MemoryStack stack(host_resource(), host_resource(), MemoryOptions{1 << 20, Strategy::arena});
  stack.book_staging(1 << 19);
  stack.settle_account(0, 0);
  CHECK_THROWS_WITH(stack.build_step_buffers(1 << 19, 0), Catch::Contains("leaves nothing for an arena"));
}
