#pragma once
// Float functions on Eigen's SIMD packets (16 lanes with AVX-512, 8 with AVX2) for the activation
// kernels, and the loops that run them over arrays. Every element goes through the same packet
// code, the last partial packet too, so a value's bits do not depend on where a thread's range
// starts. Errors against the exact function (tests/layers/activation_test.cpp measures them):
// exp about 1 ulp (Cephes), sigmoid and tanh within 3 ulp, erf within 4e-7 absolute (Eigen's
// rational approximation, 1 outside [-4, 4]).
#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>
#include <cstddef>

namespace cnn::cpu::vmath {

using Packet = Eigen::internal::packet_traits<float>::type;
inline constexpr int kLanes = static_cast<int>(sizeof(Packet) / sizeof(float));

using Eigen::internal::padd;
using Eigen::internal::pdiv;
using Eigen::internal::pmadd;
using Eigen::internal::pmax;
using Eigen::internal::pmin;
using Eigen::internal::pmul;
using Eigen::internal::pselect;
using Eigen::internal::psub;

inline Packet splat(float v) { return Eigen::internal::pset1<Packet>(v); }
inline Packet less(Packet a, Packet b) { return Eigen::internal::pcmp_lt(a, b); }      // all ones where a < b
inline Packet less_equal(Packet a, Packet b) { return Eigen::internal::pcmp_le(a, b); }
inline Packet both(Packet a, Packet b) { return Eigen::internal::pand(a, b); }
// mask ? a : b, lane by lane.
inline Packet select(Packet mask, Packet a, Packet b) { return pselect(mask, a, b); }

// Clamped to [-88.7, 88.7] inside, so it never gives inf or 0 for a finite x; results below 2^-126
// are flushed by the kernels' mode (Note [Flushed subnormals]).
inline Packet exp(Packet x) { return Eigen::internal::pexp(x); }

inline Packet erf(Packet x) { return Eigen::internal::generic_fast_erf_float(x); }

// 1 / (1 + exp(-x)), from e = exp(-|x|) <= 1 so that nothing overflows: 1 / (1 + e) for x >= 0,
// e / (1 + e) below, each accurate in relative terms.
inline Packet sigmoid(Packet x) {
  const Packet e = exp(Eigen::internal::pnegate(Eigen::internal::pabs(x)));
  const Packet r = pdiv(splat(1.f), padd(splat(1.f), e));
  return select(less(x, splat(0.f)), pmul(e, r), r);
}

// Odd: computed on |x| and given x's sign. Below 0.625 the polynomial x + x^3 P(x^2) (least
// squares on the relative error, within 1 ulp in float), above it (1 - e) / (1 + e) with
// e = exp(-2|x|) <= 0.29, where nothing cancels; that is 1 beyond 9.
inline Packet tanh(Packet x) {
  const Packet a = Eigen::internal::pabs(x);
  const Packet z = pmul(a, a);
  Packet p = pmadd(z, splat(-0.0057189627550542355f), splat(0.020653124898672104f));
  p = pmadd(z, p, splat(-0.05374465882778168f));
  p = pmadd(z, p, splat(0.13331513106822968f));
  p = pmadd(z, p, splat(-0.3333328664302826f));
  const Packet small = pmadd(pmul(a, z), p, a);
  const Packet e = exp(pmul(a, splat(-2.f)));
  const Packet large = pdiv(psub(splat(1.f), e), padd(splat(1.f), e));
  const Packet t = select(less(a, splat(0.625f)), small, large);
  return Eigen::internal::por(t, Eigen::internal::pand(x, splat(-0.0f)));  // x's sign bit
}

// p as computed: the compiler may not fuse the multiply that made it with the add that uses it
// (an FMA rounds once), which it might do in one loop and not in another, so that an element's
// bits would depend on whether it falls in a whole packet or in the last partial one.
inline Packet rounded(Packet p) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  asm("" : "+v"(p));
#endif
  return p;
}

// y[i] = f(x[i]) for i in [begin, end); y may be x.
template <class F>
inline void map(const float* x, float* y, std::size_t begin, std::size_t end, F f) {
  using Eigen::internal::ploadu;
  using Eigen::internal::pstoreu;
  std::size_t i = begin;
  for (; i + kLanes <= end; i += kLanes) pstoreu(y + i, rounded(f(ploadu<Packet>(x + i))));
  if (i == end) return;
  float in[kLanes] = {}, out[kLanes];
  for (std::size_t k = i; k < end; ++k) in[k - i] = x[k];
  pstoreu(out, rounded(f(ploadu<Packet>(in))));
  for (std::size_t k = i; k < end; ++k) y[k] = out[k - i];
}

// d[i] = f(a[i], g[i]), or d[i] += it when accumulating; d may be a or g.
template <class F>
inline void map2(const float* a, const float* g, float* d, bool accumulate, std::size_t begin, std::size_t end, F f) {
  using Eigen::internal::ploadu;
  using Eigen::internal::pstoreu;
  std::size_t i = begin;
  if (accumulate) {
    for (; i + kLanes <= end; i += kLanes)
      pstoreu(d + i, padd(ploadu<Packet>(d + i), rounded(f(ploadu<Packet>(a + i), ploadu<Packet>(g + i)))));
  } else {
    for (; i + kLanes <= end; i += kLanes) pstoreu(d + i, rounded(f(ploadu<Packet>(a + i), ploadu<Packet>(g + i))));
  }
  if (i == end) return;
  float in_a[kLanes] = {}, in_g[kLanes] = {}, in_d[kLanes] = {}, out[kLanes];
  for (std::size_t k = i; k < end; ++k) {
    in_a[k - i] = a[k];
    in_g[k - i] = g[k];
    in_d[k - i] = d[k];
  }
  Packet r = rounded(f(ploadu<Packet>(in_a), ploadu<Packet>(in_g)));
  if (accumulate) r = padd(ploadu<Packet>(in_d), r);
  pstoreu(out, r);
  for (std::size_t k = i; k < end; ++k) d[k] = out[k - i];
}

}  // namespace cnn::cpu::vmath
