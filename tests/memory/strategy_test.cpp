#include <catch2/catch.hpp>

#include <string>

#include <cnnengine/base/error.hpp>
#include "memory/host_resource.hpp"
#include "memory/strategy.hpp"

using namespace cnn::memory;

TEST_CASE("make_strategy builds each strategy by name", "[memory]") {
  for (const std::string name : {"direct", "pool", "arena"}) {
    auto resource = make_strategy(parse_strategy(name), host_resource(), 1 << 20);
    REQUIRE(resource);
    CHECK(resource->name() == name + "(host)");
    void* p = resource->allocate(1000);
    resource->deallocate(p, 1000);
  }
}

TEST_CASE("a strategy's word reads back as the strategy", "[memory]") {
  for (Strategy s : {Strategy::planned, Strategy::arena, Strategy::pool, Strategy::direct})
    CHECK(parse_strategy(to_string(s)) == s);
}

TEST_CASE("make_strategy names the accepted strategies on an unknown one", "[memory]") {
  CHECK_THROWS_AS(make_strategy(Strategy::planned, host_resource(), 0), cnn::ConfigError);
  CHECK_THROWS_WITH(parse_strategy("bfc"),
                    Catch::Contains("'bfc'") && Catch::Contains("direct") &&
                        Catch::Contains("pool") && Catch::Contains("arena"));
}
