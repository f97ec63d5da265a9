// Copies, fill and the element-wise kernels against the CPU backend. Dropout masks must equal
// the CPU's exactly: both draw from dropout_keep(seed, index); so must 16-bit values, both ways.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "support.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

TEST_CASE("cuda copies round-trip", "[cuda][copy]") {
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{1} << 22}) {
    const std::vector<float> values = random_values(n, 61);
    DeviceBuffer device(gpu(), n * sizeof(float));
    gpu().copy_to_device(values.data(), device.data(), n * sizeof(float));
    std::vector<float> back(n);
    gpu().copy_to_host(device.data(), back.data(), n * sizeof(float));
    CHECK(std::memcmp(values.data(), back.data(), n * sizeof(float)) == 0);
  }
}

TEST_CASE("cuda copies from pinned staging memory round-trip", "[cuda][copy]") {
  const std::size_t n = 123457;
  auto& staging = gpu().staging_memory();
  auto* pinned = static_cast<float*>(staging.allocate(n * sizeof(float)));
  const std::vector<float> values = random_values(n, 62);
  std::memcpy(pinned, values.data(), n * sizeof(float));
  DeviceBuffer device(gpu(), n * sizeof(float));
  gpu().copy_to_device(pinned, device.data(), n * sizeof(float));
  std::memset(pinned, 0, n * sizeof(float));  // allowed as soon as copy_to_device returns
  gpu().copy_to_host(device.data(), pinned, n * sizeof(float));
  CHECK(std::memcmp(values.data(), pinned, n * sizeof(float)) == 0);
  staging.deallocate(pinned, n * sizeof(float));
}

TEST_CASE("cuda copy_to_device waits for earlier work on its destination", "[cuda][copy]") {
  // Each round: the previous round's input is still read by queued work when the next copy
  // overwrites it; the result must be as if everything ran in order.
  const Shape s{1 << 20};
  Twin accumulated(gpu(), s, std::vector<float>(s.elements(), 0.0f));
  DeviceBuffer input(gpu(), s.elements() * sizeof(float));
  float expected = 0.0f;
  for (int round = 1; round <= 20; ++round) {
    const std::vector<float> values(s.elements(), static_cast<float>(round));
    gpu().copy_to_device(values.data(), input.data(), input.bytes());
    for (int k = 0; k < 5; ++k) gpu().copy_or_add(Tensor{static_cast<float*>(input.data()), s}, accumulated.gpu(), true);
    expected += 5.0f * static_cast<float>(round);
  }
  const std::vector<float> got = accumulated.gpu_values();
  CHECK(got.front() == expected);
  CHECK(got.back() == expected);
}

TEST_CASE("cuda fill", "[cuda][elementwise]") {
  for (float value : {0.0f, 3.5f, -1.25f}) {
    Twin t(gpu(), Shape{3, 5, 7, 11}, 63);
    cpu().fill(t.cpu(), value);
    gpu().fill(t.gpu(), value);
    CHECK(t.gpu_values() == t.cpu_values());
  }
}

TEST_CASE("cuda relu forward and backward", "[cuda][elementwise]") {
  const Shape s{4, 3, 9, 7};
  Twin x(gpu(), s, 64), y(gpu(), s, 65);
  cpu().relu_forward(x.cpu(), y.cpu());
  gpu().relu_forward(x.gpu(), y.gpu());
  CHECK(y.gpu_values() == y.cpu_values());
  Twin dy(gpu(), s, 66);
  for (bool accumulate : {false, true}) {
    Twin dx(gpu(), s, 67);
    cpu().relu_backward(y.cpu(), dy.cpu(), dx.cpu(), accumulate);
    gpu().relu_backward(y.gpu(), dy.gpu(), dx.gpu(), accumulate);
    CHECK(dx.gpu_values() == dx.cpu_values());
  }
}

TEST_CASE("cuda dropout draws the CPU's mask", "[cuda][elementwise]") {
  const Shape s{16, 3, 17, 19};
  for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
    INFO("p " << p);
    Twin x(gpu(), s, 68), y(gpu(), s, 69), mask(gpu(), s, 70);
    const TwinScalars step(gpu(), StepScalars{1234567, 40, 0.0f});  // samples 40 to 55 of the step
    cpu().dropout_forward(x.cpu(), y.cpu(), mask.cpu(), p, step.cpu(), 7);
    gpu().dropout_forward(x.gpu(), y.gpu(), mask.gpu(), p, step.gpu(), 7);
    CHECK(mask.gpu_values() == mask.cpu_values());
    CHECK(y.gpu_values() == y.cpu_values());
    Twin dy(gpu(), s, 71);
    for (bool accumulate : {false, true}) {
      Twin dx(gpu(), s, 72);
      cpu().dropout_backward(dy.cpu(), mask.cpu(), dx.cpu(), accumulate);
      gpu().dropout_backward(dy.gpu(), mask.gpu(), dx.gpu(), accumulate);
      CHECK(dx.gpu_values() == dx.cpu_values());
    }
  }
}

TEST_CASE("cuda add and copy_or_add", "[cuda][elementwise]") {
  const Shape s{5, 7, 3, 3};
  Twin a(gpu(), s, 73), b(gpu(), s, 74), y(gpu(), s, 75);
  cpu().add(a.cpu(), b.cpu(), y.cpu());
  gpu().add(a.gpu(), b.gpu(), y.gpu());
  CHECK(y.gpu_values() == y.cpu_values());
  for (bool accumulate : {false, true}) {
    Twin dst(gpu(), s, 76);
    cpu().copy_or_add(a.cpu(), dst.cpu(), accumulate);
    gpu().copy_or_add(a.gpu(), dst.gpu(), accumulate);
    CHECK(dst.gpu_values() == dst.cpu_values());
  }
}

TEST_CASE("cuda 16-bit values: the CPU's bits both ways", "[cuda][elementwise][value_format]") {
  // Ties, the edges of each format's range, subnormals (bf16 flushes them as the CPU does, fp16
  // keeps its own), infinities, and enough random values for every block.
  std::vector<float> values = random_values(std::size_t{1} << 20, 91, -70000.0f, 70000.0f);
  const std::vector<float> edges{1.00390625f, 1.01171875f, 65504.0f, 65520.0f, 5.9604645e-8f, 1e-40f, -1e-40f,
                                 3.0e38f, std::numeric_limits<float>::infinity(), -0.0f, 1.00048828125f};
  values.insert(values.begin(), edges.begin(), edges.end());
  const std::size_t n = values.size();
  const Shape s{static_cast<int>(n)};
  for (ValueFormat format : {ValueFormat::bf16, ValueFormat::fp16}) {
    INFO(to_string(format));
    Twin x(gpu(), s, values);
    std::vector<std::uint16_t> want(n), got(n);
    cpu().to_16bit(x.cpu(), want.data(), format);
    DeviceBuffer packed(gpu(), n * 2);
    gpu().to_16bit(x.gpu(), packed.data(), format);
    gpu().copy_to_host(packed.data(), got.data(), n * 2);
    CHECK(got == want);
    Twin wide(gpu(), s, 92);
    cpu().from_16bit(want.data(), wide.cpu(), format);
    gpu().from_16bit(packed.data(), wide.gpu(), format);
    CHECK(std::memcmp(wide.gpu_values().data(), wide.cpu_values().data(), n * sizeof(float)) == 0);

    // Views that start one value in, as a batch's later half does: the one-at-a-time path (Note
    // [Four values a thread]) gives the same bits.
    const Shape rest{static_cast<int>(n - 1)};
    DeviceBuffer packed_rest(gpu(), n * 2);
    gpu().to_16bit(Tensor{x.gpu().data + 1, rest}, static_cast<std::uint16_t*>(packed_rest.data()) + 1, format);
    gpu().copy_to_host(packed_rest.data(), got.data(), n * 2);
    CHECK(std::equal(got.begin() + 1, got.end(), want.begin() + 1));
    Twin wide_rest(gpu(), s, 93);
    gpu().from_16bit(static_cast<std::uint16_t*>(packed.data()) + 1, Tensor{wide_rest.gpu().data + 1, rest}, format);
    const std::vector<float> widened = wide_rest.gpu_values(), reference = wide.cpu_values();
    CHECK(std::memcmp(widened.data() + 1, reference.data() + 1, (n - 1) * sizeof(float)) == 0);
  }
}

namespace {

// `values` as a step on a 16-bit backend stores them (support.hpp's stored16).
Stored16 bits_of(Backend& gpu, const Shape& s, const std::vector<float>& values) {
  const Twin floats(gpu, s, values);
  return stored16(gpu, floats.gpu());
}
// The CPU's float values rounded to 16 bits.
std::vector<std::uint16_t> rounded_on_cpu(const Twin& t, ValueFormat format) {
  std::vector<float> values = t.cpu_values();
  std::vector<std::uint16_t> out(values.size());
  cpu().to_16bit(Tensor{values.data(), Shape{static_cast<int>(values.size())}}, out.data(), format);
  return out;
}

}  // namespace

TEST_CASE("cuda ReLU and add take and write values as the step stores them: the CPU's bits",
          "[cuda][elementwise][bf16]") {
  const Shape s{3, 5, 7, 9};
  const std::size_t n = s.elements();
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    INFO(to_string(p));
    Backend& gpu = gpu_16bit(p);
    const ValueFormat format = value_format(p);
    const std::vector<float> xv = rounded16(p, random_values(n, 81)), bv = rounded16(p, random_values(n, 82));
    Twin x(gpu, s, xv), b(gpu, s, bv);
    const Stored16 x16 = bits_of(gpu, s, xv), b16 = bits_of(gpu, s, bv);

    Twin relu(gpu, s, 83);
    cpu().relu_forward(x.cpu(), relu.cpu());
    for (bool input_alone : {false, true}) {
      INFO("ReLU of " << (input_alone ? "16-bit values" : "floats"));
      Stored16 y = bits_of(gpu, s, random_values(n, 84));
      gpu.relu_forward(input_alone ? x16.alone : x.gpu(), y.alone);
      CHECK(bits_on_host(gpu, y) == rounded_on_cpu(relu, format));
    }
    gpu.relu_forward(x16.alone, relu.gpu());  // into floats
    CHECK(relu.gpu_values() == relu.cpu_values());
    Stored16 in_place = bits_of(gpu, s, xv);
    gpu.relu_forward(in_place.alone, in_place.alone);
    CHECK(bits_on_host(gpu, in_place) == rounded_on_cpu(relu, format));

    const Stored16 relu16 = bits_of(gpu, s, relu.cpu_values());
    Twin dy(gpu, s, 85);
    for (bool accumulate : {false, true}) {
      INFO("ReLU backward, accumulating " << accumulate);
      Twin dx(gpu, s, 86);
      cpu().relu_backward(relu.cpu(), dy.cpu(), dx.cpu(), accumulate);
      gpu.relu_backward(relu16.alone, dy.gpu(), dx.gpu(), accumulate);
      CHECK(dx.gpu_values() == dx.cpu_values());
    }

    Twin sum(gpu, s, 87);
    cpu().add(x.cpu(), b.cpu(), sum.cpu());
    Stored16 sum16 = bits_of(gpu, s, random_values(n, 88));
    gpu.add(x16.alone, b.gpu(), sum16.alone);
    CHECK(bits_on_host(gpu, sum16) == rounded_on_cpu(sum, format));
    gpu.add(x16.alone, b16.alone, sum.gpu());
    CHECK(sum.gpu_values() == sum.cpu_values());
  }
}

TEST_CASE("cuda ReLU refuses 16-bit values in fp32, a 16-bit gradient and a tensor with no values",
          "[cuda][elementwise][bf16]") {
  const Shape s{2, 3, 4, 5};
  Twin x(gpu(), s, 91), y(gpu(), s, 92), dy(gpu(), s, 93);
  DeviceBuffer bits(gpu(), s.elements() * 2);
  Tensor x16{nullptr, s};
  x16.packed16 = bits.data();
  CHECK_THROWS_WITH(gpu().relu_forward(x16, y.gpu()), Catch::Contains("relu_forward") && Catch::Contains("fp32"));
  Backend& bf16 = gpu_16bit(Precision::bf16);
  Twin x_bf16(bf16, s, 91), dy_bf16(bf16, s, 93), dx_bf16(bf16, s, 94);
  DeviceBuffer bits_bf16(bf16, s.elements() * 2);
  Tensor dy16 = dy_bf16.gpu();
  dy16.packed16 = bits_bf16.data();
  CHECK_THROWS_WITH(bf16.relu_backward(x_bf16.gpu(), dy16, dx_bf16.gpu(), false),
                    Catch::Contains("relu_backward") && Catch::Contains("must be floats"));
  CHECK_THROWS_WITH(bf16.relu_forward(Tensor{nullptr, s}, dx_bf16.gpu()),
                    Catch::Contains("relu_forward") && Catch::Contains("neither floats nor 16-bit values"));
}
