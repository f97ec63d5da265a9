#include <catch2/catch.hpp>
#include <cstdint>

#include "memory/host_resource.hpp"
#include <cnnengine/memory/out_of_memory.hpp>

TEST_CASE("a request near SIZE_MAX is an OutOfMemory, never a wrapped tiny block", "[memory]") {
  cnn::memory::HostResource host;
  CHECK_THROWS_AS(host.allocate(SIZE_MAX - 100, 256), cnn::memory::OutOfMemory);
}
