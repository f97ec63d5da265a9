// Running a strategy on a step's buffers while planning (memory/detail/strategy_replay.hpp): what
// it holds at most, and its refusal where what it is left is too little.
#include <catch2/catch.hpp>

#include <vector>

#include "memory/detail/strategy_replay.hpp"
#include "memory/pool_resource.hpp"

using namespace cnn::memory;

namespace {

BufferRequest buffer(std::size_t bytes, int first, int last) {
  BufferRequest r;
  r.bytes = bytes;
  r.first_use = first;
  r.last_use = last;
  return r;
}

}  // namespace

TEST_CASE("a replayed strategy holds what it would hold in a step, and is refused below it", "[memory][planner]") {
  // 1000 and 3000 live together, then 3000 and 2000: 5000 bytes at most, in 512-byte classes
  // 1024 + 3072 and then 3072 + 2048.
  const std::vector<BufferRequest> step = {buffer(1000, 0, 1), buffer(3000, 1, 2), buffer(2000, 2, 3)};
  SECTION("direct: the most live at once") {
    const StrategyReplay r = replay_step_buffers(Strategy::direct, 0, 0, {&step, &step});
    CHECK(r.served);
    CHECK(r.peak_bytes == 5000);
    CHECK_FALSE(replay_step_buffers(Strategy::direct, 4999, 0, {&step}).served);
  }
  SECTION("arena: best fit in its capacity, refused where no free block holds the request") {
    // 4608 bytes: 1024 and 3072 fill 4096; with 1024 freed, 2048 finds blocks of 1024 and 512.
    CHECK(replay_step_buffers(Strategy::arena, 6144, 6144, {&step, &step}).served);
    const StrategyReplay tight = replay_step_buffers(Strategy::arena, 4608, 4608, {&step});
    CHECK_FALSE(tight.served);
    CHECK_THAT(tight.refusal, Catch::Contains("arena"));
  }
  SECTION("pool: a chunk of its growth where the budget allows, of the request where it does not") {
    const StrategyReplay roomy = replay_step_buffers(Strategy::pool, 0, 0, {&step, &step});
    CHECK(roomy.served);
    CHECK(roomy.peak_bytes == PoolOptions{}.growth);
    const StrategyReplay tight = replay_step_buffers(Strategy::pool, 1024, 0, {&step});
    CHECK_FALSE(tight.served);
    CHECK_THAT(tight.refusal, Catch::Contains("pool"));
  }
}
