// The micro-batch policy under memory pressure, on a memory that fits up to a set size: the
// largest that fits is built, a failure halves or recomputes, good steps grow it back, and at
// the smallest the failure carries the byte table.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/plan/micro_batch_recovery.hpp"

using namespace cnn;

namespace {

// Builds any micro-batch up to `fits`; with `recomputes`, one failure at the built size is met by
// recomputing more, once.
struct FakeMemory final : MicroBatchMemory {
  int fits = 64;
  bool recomputes = false;
  bool recomputing = false;
  int built = 0;
  std::vector<int> attempts;

  void build(int b) override {
    attempts.push_back(b);
    built = 0;
    recomputing = false;
    if (b > fits) throw memory::OutOfMemory("too large", memory::OutOfMemoryDetails{});
    built = b;
  }
  bool recompute_more() override {
    if (!recomputes || recomputing) return false;
    recomputing = true;
    built = attempts.back();
    return true;
  }
  bool recomputing_more() const override { return recomputing; }
  int recomputed_layers() const override { return recomputing ? 3 : 0; }
  void release() override { built = 0; }
  std::string cannot_reserve(int b) const override { return "nothing at " + std::to_string(b); }
  std::string byte_table(int b) const override { return "table at " + std::to_string(b); }
};

}  // namespace

TEST_CASE("the largest micro-batch the memory gives is built, halving from the plan's", "[plan][recovery]") {
  FakeMemory memory;
  memory.fits = 20;
  MicroBatchRecovery recovery(memory, 64, 2, 0);
  CHECK(recovery.build_fitting(64) == 16);
  CHECK(memory.attempts == std::vector<int>{64, 32, 16});
  CHECK(recovery.micro_batch() == 16);

  memory.fits = 1;
  CHECK_THROWS_WITH(recovery.build_fitting(8), Catch::Contains("nothing at 2: too large") && Catch::Contains("table at 2"));
}

TEST_CASE("after a failure the micro-batch halves, and grows back after enough good steps", "[plan][recovery]") {
  FakeMemory memory;
  std::vector<std::string> log;
  const std::function<void(const std::string&)> hear = [&](const std::string& line) { log.push_back(line); };
  MicroBatchRecovery recovery(memory, 32, 4, 2, &hear);
  recovery.build_fitting(32);
  recovery.shrink_after(memory::OutOfMemory("full", {}), "step 7");
  CHECK(recovery.micro_batch() == 16);
  CHECK(recovery.good_steps() == 0);
  REQUIRE(log.size() == 1);
  CHECK_THAT(log[0], Catch::Contains("step 7: out of memory at micro-batch 32") && Catch::Contains("at micro-batch 16"));

  recovery.maybe_regrow(8);  // no good step yet
  CHECK(recovery.micro_batch() == 16);
  recovery.step_succeeded();
  recovery.step_succeeded();
  recovery.maybe_regrow(10);
  CHECK(recovery.micro_batch() == 32);
  CHECK_THAT(log.back(), Catch::Contains("step 10: micro-batch back up from 16 to 32"));

  SECTION("never past the target, never when regrowing is stopped") {
    recovery.shrink_after(memory::OutOfMemory("full", {}), "step 11");
    recovery.stop_regrowing();
    for (int i = 0; i < 5; ++i) recovery.step_succeeded();
    recovery.maybe_regrow(17);
    CHECK(recovery.micro_batch() == 16);
  }
  SECTION("at the smallest the failure is rethrown with the byte table, the memory released") {
    recovery.build_fitting(4);
    CHECK_THROWS_WITH(recovery.shrink_after(memory::OutOfMemory("full", {}), "step 12"),
                      Catch::Contains("step 12: out of memory at micro-batch 4, the smallest") &&
                          Catch::Contains("table at 4"));
    CHECK(memory.built == 0);
  }
}

TEST_CASE("recomputing more is tried before halving, and undone after enough good steps", "[plan][recovery]") {
  FakeMemory memory;
  memory.recomputes = true;
  std::vector<std::string> log;
  const std::function<void(const std::string&)> hear = [&](const std::string& line) { log.push_back(line); };
  MicroBatchRecovery recovery(memory, 16, 1, 1, &hear);
  recovery.build_fitting(16);
  recovery.shrink_after(memory::OutOfMemory("full", {}), "step 3");
  CHECK(recovery.micro_batch() == 16);
  CHECK(memory.recomputing_more());
  CHECK_THAT(log.back(), Catch::Contains("replaying it at micro-batch 16 recomputing 3 layers"));
  recovery.step_succeeded();
  recovery.maybe_regrow(5);
  CHECK_FALSE(memory.recomputing_more());
  CHECK(recovery.micro_batch() == 16);
  CHECK_THAT(log.back(), Catch::Contains("step 5: micro-batch 16 back to 0 recomputed layers"));
}
