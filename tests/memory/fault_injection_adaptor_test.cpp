#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "memory/fault_injection_adaptor.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/memory/out_of_memory.hpp>
#include "memory/statistics_adaptor.hpp"

using namespace cnn::memory;

namespace {

// Makes `count` requests; returns the numbers of those that failed, freeing the others.
std::vector<std::uint64_t> failing_requests(MemoryResource& resource, int count) {
  std::vector<std::uint64_t> failed;
  for (int i = 0; i < count; ++i) {
    try {
      void* p = resource.allocate(64);
      resource.deallocate(p, 64);
    } catch (const OutOfMemory&) {
      failed.push_back(static_cast<std::uint64_t>(i));
    }
  }
  return failed;
}

}  // namespace

TEST_CASE("fault injection: fails exactly the chosen requests", "[memory]") {
  StatisticsAdaptor below(host_resource());
  FaultInjectionAdaptor faults(below);
  faults.fail_on({1, 3, 7});
  CHECK(failing_requests(faults, 10) == std::vector<std::uint64_t>{1, 3, 7});
  CHECK(faults.injected_failures() == 3);
  CHECK(faults.requests_seen() == 10);
  CHECK(below.statistics().allocations == 7);  // a failed request never reaches the upstream
  CHECK(failing_requests(faults, 5).empty());  // each chosen number fails once
}

TEST_CASE("fault injection: the failure is a typed OutOfMemory that says it was injected",
          "[memory]") {
  FaultInjectionAdaptor faults(host_resource());
  faults.fail_on({0});
  try {
    faults.allocate(4096, 256, Category::workspace);
    FAIL("expected OutOfMemory");
  } catch (const OutOfMemory& e) {
    CHECK(e.details().requested == 4096);
    CHECK(e.details().category == Category::workspace);
    CHECK(std::string(e.what()).find("injected") != std::string::npos);
  }
}

TEST_CASE("fault injection: fail_next fails the next n requests", "[memory]") {
  FaultInjectionAdaptor faults(host_resource());
  failing_requests(faults, 3);
  faults.fail_next(2);
  CHECK(failing_requests(faults, 5) == std::vector<std::uint64_t>{0, 1});
  CHECK(faults.injected_failures() == 2);
}

TEST_CASE("fault injection: random failures follow the seed", "[memory]") {
  FaultInjectionAdaptor first(host_resource()), second(host_resource()), other(host_resource());
  first.fail_randomly(0.3, 1234);
  second.fail_randomly(0.3, 1234);
  other.fail_randomly(0.3, 99);
  const auto a = failing_requests(first, 1000);
  CHECK(a == failing_requests(second, 1000));
  CHECK(a != failing_requests(other, 1000));
  CHECK(a.size() > 200);
  CHECK(a.size() < 400);
  CHECK(first.injected_failures() == a.size());
  first.clear();
  CHECK(failing_requests(first, 100).empty());
  CHECK_THROWS_AS(first.fail_randomly(1.5, 1), cnn::ConfigError);
}
