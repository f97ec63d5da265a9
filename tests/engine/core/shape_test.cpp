// Shapes: at most four dimensions, refused beyond (a fifth once wrote past the array).
#include <catch2/catch.hpp>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/tensor.hpp>

using namespace cnn;

TEST_CASE("a shape of five dimensions is a ShapeError, not a write past the array", "[shape]") {
  CHECK_THROWS_AS((Shape{1, 2, 3, 4, 5}), ShapeError);
  CHECK_THROWS_WITH((Shape{1, 2, 3, 4, 5}), Catch::Contains("at most 4 dimensions, got 5"));
  const Shape four{2, 3, 4, 5};
  CHECK(four.elements() == 120);
  CHECK_THROWS_WITH(four.batched(8), Catch::Contains("[2x3x4x5]"));
  CHECK(Shape{3, 4, 5}.batched(2) == (Shape{2, 3, 4, 5}));
}
