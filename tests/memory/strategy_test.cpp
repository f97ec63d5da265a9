#include <catch2/catch.hpp>

#include <string>

#include "cnnengine/base/error.hpp"
#include "cnnengine/memory/host_resource.hpp"
#include "cnnengine/memory/strategy.hpp"

using namespace cnn::memory;

TEST_CASE("make_strategy builds each strategy by name", "[memory]") {
  for (const std::string name : {"direct", "pool", "arena"}) {
    auto resource = make_strategy(name, host_resource(), 1 << 20);
    REQUIRE(resource);
    CHECK(resource->name() == name + "(host)");
    void* p = resource->allocate(1000);
    resource->deallocate(p, 1000);
  }
}

TEST_CASE("make_strategy names the accepted strategies on an unknown one", "[memory]") {
  CHECK_THROWS_AS(make_strategy("planned", host_resource(), 0), cnn::ConfigError);
  CHECK_THROWS_WITH(make_strategy("bfc", host_resource(), 0),
                    Catch::Contains("'bfc'") && Catch::Contains("direct") &&
                        Catch::Contains("pool") && Catch::Contains("arena"));
}
