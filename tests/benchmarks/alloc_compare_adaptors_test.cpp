// The two adaptors alloc_compare measures with: the timing adaptor and the peak probe.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "benchmarks/alloc_compare/peak_probe.hpp"
#include "benchmarks/alloc_compare/timing_adaptor.hpp"
#include "memory/budget_adaptor.hpp"
#include "memory/host_resource.hpp"

namespace mem = cnn::memory;

namespace {

// A resource whose free space the test dictates.
class FreeSpaceStub final : public mem::MemoryResource {
 public:
  std::size_t largest = 0, free = 0;
  std::size_t largest_free_block() const override { return largest; }
  std::size_t free_bytes() const override { return free; }
  std::string name() const override { return "stub"; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t, mem::Category) override { return std::malloc(bytes); }
  void do_deallocate(void* ptr, std::size_t, std::size_t, mem::Category) override { std::free(ptr); }
};

}  // namespace

TEST_CASE("the timing adaptor sums time in the calls and counts refusals", "[alloc_compare]") {
  mem::BudgetAdaptor budget(mem::host_resource(), 4096);
  alloc_compare::TimingAdaptor timing(budget);
  void* p = timing.allocate(1024);
  CHECK_THROWS_AS(timing.allocate(8192), mem::OutOfMemory);
  timing.deallocate(p, 1024);
  CHECK(timing.refusals() == 1);
  CHECK(timing.nanoseconds() > 0);
  CHECK(budget.in_use().total() == 0);
}

TEST_CASE("the peak probe samples fragmentation at the step's fullest moment", "[alloc_compare]") {
  FreeSpaceStub stub;
  alloc_compare::PeakProbe probe(stub);
  stub.free = stub.largest = 100;
  probe.begin_step();
  CHECK(probe.fragmentation() == 0.0);

  void* a = probe.allocate(10);
  stub.largest = 25;
  void* b = probe.allocate(10);  // the fullest moment so far: 20 bytes live
  CHECK(probe.fragmentation() == Approx(0.75));

  probe.deallocate(b, 10);
  stub.largest = 50;
  void* c = probe.allocate(5);  // 15 live: below the high, no new sample
  CHECK(probe.fragmentation() == Approx(0.75));

  probe.begin_step();  // a new step starts from what is live now
  CHECK(probe.fragmentation() == Approx(0.5));
  probe.deallocate(c, 5);
  probe.deallocate(a, 10);

  stub.free = 0;  // nothing free: one block of nothing, not fragmented
  probe.begin_step();
  CHECK(probe.fragmentation() == 0.0);
}
