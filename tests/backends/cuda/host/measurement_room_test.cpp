// How much scratch a measurement of cuDNN's algorithms takes (Note [Measuring inside the budget],
// backends/cuda/detail/conv_algorithms.hpp): pure arithmetic, no GPU needed.
#include <catch2/catch.hpp>

#include <cstddef>
#include <optional>

#include "backends/cuda/detail/conv_algorithms.hpp"

using namespace cnn;

namespace {
constexpr std::size_t MiB = std::size_t{1} << 20;
}

TEST_CASE("a measurement's room is what the budget leaves, within the device's free memory",
          "[cuda_host][conv_algorithms]") {
  // A budget that leaves 100 MiB on a device with 8 GiB free: the budget's 100 MiB, not the device's.
  CHECK(cuda::measurement_room(8192 * MiB, 100 * MiB) == 100 * MiB);
  // A budget larger than the device's free memory: the device's, less the margin for cuDNN.
  CHECK(cuda::measurement_room(1024 * MiB, 4096 * MiB) == 960 * MiB);
  // Memory that cannot say what it leaves: the device's free memory less the margin.
  CHECK(cuda::measurement_room(1024 * MiB, 0) == 960 * MiB);
  CHECK(cuda::measurement_room(10 * MiB, 0) == 0);
}

TEST_CASE("a measurement's workspace is what its tensors leave of the room, none where they do not fit",
          "[cuda_host][conv_algorithms]") {
  CHECK(cuda::measurement_workspace(256 * MiB, 30 * MiB, 100 * MiB) == std::optional<std::size_t>(70 * MiB));
  CHECK(cuda::measurement_workspace(16 * MiB, 30 * MiB, 100 * MiB) == std::optional<std::size_t>(16 * MiB));
  CHECK(cuda::measurement_workspace(16 * MiB, 100 * MiB, 100 * MiB) == std::optional<std::size_t>(0));
  CHECK_FALSE(cuda::measurement_workspace(16 * MiB, 101 * MiB, 100 * MiB));
}
