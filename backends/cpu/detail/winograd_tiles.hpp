#pragma once
// The tile transforms of the Winograd convolution (winograd_conv.hpp), one tile row of one plane
// at a time, and the matrices they apply. The loops are in winograd_tiles.inl, compiled once per
// instruction set (Note [Kernels for each instruction set], isa_region.hpp); every copy adds the
// same terms in the same order, so every instruction set gives the same bits.
//
// Note [Winograd tiles]: F(m x m, 3x3) computes an m x m output tile y = A^T [U (.) V] A from an
// a x a input tile d (a = m + 2), where V = B^T d B and U = G g G^T is the 3x3 filter g
// transformed; (.) multiplies element by element, and summed over the input channels it is a*a
// matrix products, one per element (xi) of the tile: M_xi[out x tiles] = U_xi[out x in]
// V_xi[in x tiles]. The gradients follow from the same three maps: dV_xi = U_xi^T dM_xi and
// dU_xi = dM_xi V_xi^T with dM = A dy A^T, then dg = G^T dU G. (Backward-data runs as the
// forward pass of the adjoint convolution instead of through dV.)
//
// The forward pass runs F(4x4, 3x3), backward-data and backward-filter F(2x2, 3x3). F(4x4)'s
// large coefficients leave errors of about 2^-20 of the terms' magnitudes where a direct sum's
// and F(2x2)'s (0, +-1, +-1/2) are about 2^-23 (measured on small-bn's second convolution).
// That costs nothing in the forward pass, but in the gradients it is amplified by training:
// backward-data in F(4x4) left one process and two data-parallel ranks (synchronised BatchNorm,
// 20 SGD steps of small-bn) 3e-5 apart where the tests hold them to 1e-5. resnet18 at 64x64
// trained as fast with F(2x2) in both backward passes as with F(4x4) there (33.0 images/s,
// within the runs' 2% noise); F(2x2) in the forward pass too ran 3% slower.
#include <cstddef>

namespace cnn::cpu::winograd {

// F(m x m, 3x3)'s matrices (Lavin and Gray's): m values a tile side out, a = m + 2 in.
template <int M>
struct Tiles;

// F(4x4, 3x3), points 0, +-1, +-2 and infinity: 36 products for 16 outputs (a direct 3x3 takes
// 144), its transforms scaling values by up to 100 or so before the products and back after.
template <>
struct Tiles<4> {
  static constexpr int m = 4, a = 6;
  static constexpr float BT[a][a] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                     {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr float G[a][3] = {{1.f / 4, 0, 0},
                                    {-1.f / 6, -1.f / 6, -1.f / 6},
                                    {-1.f / 6, 1.f / 6, -1.f / 6},
                                    {1.f / 24, 1.f / 12, 1.f / 6},
                                    {1.f / 24, -1.f / 12, 1.f / 6},
                                    {0, 0, 1}};
  static constexpr float AT[m][a] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

// F(2x2, 3x3), points 0, +-1 and infinity: 16 products for 4 outputs, and every coefficient 0,
// +-1 or +-1/2, so its sums round about as a direct convolution's do.
template <>
struct Tiles<2> {
  static constexpr int m = 2, a = 4;
  static constexpr float BT[a][a] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr float G[a][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
  static constexpr float AT[m][a] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};

// Floats of scratch the transforms of F(m x m, 3x3) need for `rows` tile rows of `tiles` tiles at
// a time: the input rows split into phases, then one tile row's transform down the columns.
constexpr std::size_t scratch_floats(int m, int tiles, int rows) {
  const auto row = static_cast<std::size_t>(m) * (static_cast<std::size_t>(tiles) + 1);  // a row's phases
  const std::size_t split_rows = static_cast<std::size_t>((rows - 1) * m + m + 2);
  return (split_rows + static_cast<std::size_t>(m + 2)) * row;
}

// Where one tile row of a plane lies: tile t covers rows [row0, row0 + a) and columns
// [col0 + t m, col0 + t m + a) of the plane (its output rows and columns: m from there); values
// outside the plane's h x w are zeros.
struct TileRow {
  const float* plane;
  int h, w;
  int row0, col0;
  int tiles;
};

// Transformed tiles, point xi of tile t at data[xi * stride + t].
struct PointRows {
  float* data;
  std::size_t stride;
};

// Where an output tile row goes: `rows` rows (at most m) of `cols` values, each `stride` apart.
struct OutputRows {
  float* data;
  std::size_t stride;
  int rows, cols;
  bool accumulate;    // add to what is there
  const float* bias;  // added after the convolution, where given
};

}  // namespace cnn::cpu::winograd
