#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <cnnengine/base/error.hpp>
#include "block_tracker.hpp"
#include "memory/arena_resource.hpp"
#include "memory/budget_adaptor.hpp"
#include "memory/fault_injection_adaptor.hpp"
#include "memory/host_resource.hpp"
#include "memory/pool_resource.hpp"
#include "memory/statistics_adaptor.hpp"
#include "memory/strategy.hpp"
#include "memory/trace.hpp"
#include "memory/trace_adaptor.hpp"
#include "memory/trace_replay.hpp"

using namespace cnn::memory;
using namespace cnn::memory::test;

namespace {

constexpr std::size_t MiB = 1024 * 1024;

std::filesystem::path scratch_file(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("cnnengine_memory_" + std::to_string(::getpid()) + "_" + name);
}

}  // namespace

TEST_CASE("trace: record, read and replay give the same peak on every strategy", "[memory]") {
  const auto path = scratch_file("roundtrip.trace");
  Statistics recorded;
  std::vector<TraceEvent> trace_events;
  {
    PoolResource pool(host_resource());
    StatisticsAdaptor stats(pool);
    FaultInjectionAdaptor faults(stats);
    TraceAdaptor trace(faults, path);
    faults.fail_on({5, 50});  // two refused requests are recorded as "fail"
    BlockTracker tracker(trace);
    ChurnOptions churn;
    churn.operations = 2000;
    churn.allow_out_of_memory = true;
    tracker.churn(23, churn);
    // Two blocks left live at the end of the recording.
    tracker.allocate(1000, 256, Category::parameters);
    tracker.allocate(2000, 256, Category::optimizer_state);
    recorded = stats.statistics();
    trace.flush();
    CHECK(trace.good());
    trace_events = read_trace(path);  // the run so far, ending with two blocks live
    REQUIRE(trace_events.size() == trace.events_recorded());
    tracker.free_all();
  }
  std::filesystem::remove(path);
  CHECK(trace_events.front().sequence == 0);
  CHECK(trace_events.back().sequence == trace_events.size() - 1);

  for (const char* strategy : {"direct", "pool", "arena"}) {
    INFO("strategy " << strategy);
    auto resource = make_strategy(parse_strategy(strategy), host_resource(), 64 * MiB);
    StatisticsAdaptor replay_stats(*resource);
    const ReplayResult result = replay(trace_events, replay_stats);
    CHECK(result.peak_bytes == recorded.peak_bytes);
    CHECK(replay_stats.statistics().peak_bytes == recorded.peak_bytes);
    CHECK(result.allocations == recorded.allocations);
    CHECK(result.recorded_failures == 2);
    CHECK(result.out_of_memory == 0);
    CHECK(result.live_at_end == 3000);
    CHECK(replay_stats.statistics().current_bytes == 0);  // replay frees what the trace left
  }
}

TEST_CASE("trace: replay against a simulated small device counts the refusals", "[memory]") {
  std::stringstream text;
  {
    StatisticsAdaptor stats(host_resource());
    TraceAdaptor trace(stats, static_cast<std::ostream&>(text));
    BlockTracker tracker(trace);
    ChurnOptions churn;
    churn.operations = 2000;
    tracker.churn(31, churn);
  }
  const auto events = read_trace(text, "in-memory trace");
  PoolResource pool(host_resource());
  BudgetAdaptor device(pool, 2 * MiB);
  const ReplayResult result = replay(events, device);
  CHECK(result.out_of_memory > 0);
  CHECK(result.skipped_frees == result.out_of_memory);  // the churn freed every block
  CHECK(result.peak_bytes <= 2 * MiB);
  CHECK(device.in_use().total() == 0);
}

TEST_CASE("trace: lines are written and read back unchanged", "[memory]") {
  std::vector<TraceEvent> events = {
      {0, TraceOp::allocate, 1, 4096, 256, Category::parameter_gradients},
      {1, TraceOp::failed, 0, 1 << 30, 4096, Category::workspace},
      {2, TraceOp::deallocate, 1, 4096, 256, Category::parameter_gradients},
  };
  std::stringstream text;
  text << kTraceHeader << "\n\n";
  for (const auto& e : events) write_trace_event(text, e);
  CHECK(text.str().find("1 fail 0 1073741824 4096 workspace") != std::string::npos);
  CHECK(read_trace(text) == events);
}

TEST_CASE("trace: a bad line or a missing file is an error that says where", "[memory]") {
  std::stringstream bad("0 alloc 1 64 256 activations\n1 allocate 2 64 256 activations\n");
  CHECK_THROWS_WITH(read_trace(bad, "t.trace"), Catch::Contains("t.trace:2") &&
                                                    Catch::Contains("unknown operation"));
  std::stringstream short_line("0 alloc 1 64\n");
  CHECK_THROWS_WITH(read_trace(short_line, "t.trace"), Catch::Contains("t.trace:1"));
  std::stringstream category("0 alloc 1 64 256 weights\n");
  CHECK_THROWS_WITH(read_trace(category, "t.trace"), Catch::Contains("unknown category 'weights'"));
  std::stringstream endless("0 alloc 1 64 256 activations\n" + std::string(1 << 20, '7'));  // no line break
  CHECK_THROWS_WITH(read_trace(endless, "t.trace"), Catch::Contains("t.trace:2: longer than 4096 bytes"));
  CHECK_THROWS_WITH(read_trace(std::filesystem::path("/nonexistent/run.trace")),
                    Catch::Contains("/nonexistent/run.trace"));
  CHECK_THROWS_AS(TraceAdaptor(host_resource(), std::filesystem::path("/nonexistent/dir/x")),
                  cnn::ConfigError);
}

TEST_CASE("trace: replay refuses an inconsistent trace and leaves the resource clean",
          "[memory]") {
  StatisticsAdaptor stats(host_resource());
  const std::vector<TraceEvent> unknown_free = {
      {0, TraceOp::allocate, 1, 64, 256, Category::other},
      {1, TraceOp::deallocate, 2, 64, 256, Category::other},
  };
  CHECK_THROWS_AS(replay(unknown_free, stats), cnn::DataError);
  const std::vector<TraceEvent> twice = {
      {0, TraceOp::allocate, 1, 64, 256, Category::other},
      {1, TraceOp::allocate, 1, 64, 256, Category::other},
  };
  CHECK_THROWS_AS(replay(twice, stats), cnn::DataError);
  const std::vector<TraceEvent> wrong_size = {
      {0, TraceOp::allocate, 1, 64, 256, Category::other},
      {1, TraceOp::deallocate, 1, 65, 256, Category::other},
  };
  CHECK_THROWS_AS(replay(wrong_size, stats), cnn::DataError);
  CHECK(stats.statistics().current_bytes == 0);
}
