// Recorded results: the CPU losses, parameters and plan bytes of `small`, `small-bn` and `resnet`
// must not change by a bit when the code is restructured. The values were recorded from this
// test itself (run it with CNN_RECORD=1 to print them) for each instruction set the library can
// be compiled for (CpuBackend::instruction_set(): "generic" is the default build, "avx2" and
// "avx512" CNN_NATIVE's): the matrix products give the same bits on every instruction set, but
// the element-wise and reduction kernels (Eigen's) round differently with other vector widths. On a build for
// an instruction set with no recording, the losses are held to the AVX2 ones within 1e-3. The
// direct convolution, which AVX-512 hosts run and AVX2 hosts in part (and resnet's 3x3 layers and
// small's second take), is held off: the recordings hold the paths every host runs (its own tests hold it to the
// definition). So are the Winograd passes (small's and small-bn's second convolution takes them
// where the direct ones do not run): the recordings of every build hold im2col + GEMM, and the
// Winograd tests hold those passes to the definition and their training to im2col's within
// rounding.
//
// A deliberate change of the numbers (a faster kernel that sums in another order) records anew,
// and says so in its commit.
#include <catch2/catch.hpp>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/direct_conv.hpp"
#include "backends/cpu/detail/winograd_conv.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;

namespace {

struct Recorded {
  std::vector<std::uint64_t> loss_bits;  // each step's mean loss, as the bits of a double
  std::uint64_t parameters_hash = 0;     // FNV-1a over the bits of every float after training
  std::uint64_t eval_loss_bits = 0;
  // Plan bytes at micro-batches 1, 16 and 64: total, step arena, liveness lower bound.
  std::vector<std::size_t> plan_bytes;
};

std::uint64_t bits_of(double value) {
  std::uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

std::uint64_t fnv1a(const std::vector<float>& values) {
  std::uint64_t hash = 14695981039346656037ull;
  for (float v : values) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int byte = 0; byte < 4; ++byte) {
      hash ^= (bits >> (8 * byte)) & 0xffu;
      hash *= 1099511628211ull;
    }
  }
  return hash;
}

// AdamW with the cosine schedule (the defaults), 6 steps of 32 samples in micro-batches of 16,
// then one evaluation batch of 48; 2 threads.
Recorded run(const std::string& model) {
  const cpu::DirectOff direct_off;
  const cpu::WinogradOff winograd_off;
  const Shape image{1, 28, 28};
  constexpr int kClasses = 10, kSteps = 6, kBatch = 32;
  Network net = make_preset(model, image, kClasses);
  CpuBackend backend(2);
  TrainerOptions options;
  options.batch = kBatch;
  options.micro_batch = 16;
  options.seed = 3;
  options.total_steps = kSteps;
  Trainer trainer(net, backend, memory::host_resource(), options);
  Recorded r;
  for (int b : {1, 16, 64}) {
    const MemoryBreakdown m = trainer.breakdown(b);
    r.plan_bytes.insert(r.plan_bytes.end(), {m.total(), m.arena_bytes, m.lower_bound});
  }
  const testing::SyntheticData data(kSteps * kBatch + 48, image, kClasses, 21);
  for (int s = 0; s < kSteps; ++s) r.loss_bits.push_back(bits_of(trainer.train_step(data.batch(s * kBatch, kBatch)).loss));
  r.parameters_hash = fnv1a(trainer.parameters().download());
  bool given = false;
  r.eval_loss_bits = bits_of(trainer.evaluate([&]() -> std::optional<Batch> {
                                       if (given) return std::nullopt;
                                       given = true;
                                       return data.batch(kSteps * kBatch, 48);
                                     }).loss);
  return r;
}

void print(const std::string& model, const Recorded& r) {
  std::printf("      {\"%s\", {{", model.c_str());
  for (auto b : r.loss_bits) std::printf("0x%016" PRIx64 "ull, ", b);
  std::printf("}, 0x%016" PRIx64 "ull, 0x%016" PRIx64 "ull, {", r.parameters_hash, r.eval_loss_bits);
  for (auto b : r.plan_bytes) std::printf("%zu, ", b);
  std::printf("}}},\n");
}

double from_bits(std::uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// By instruction set (CpuBackend::instruction_set()), then model.
const std::map<std::string, std::map<std::string, Recorded>>& recordings() {
  static const std::map<std::string, std::map<std::string, Recorded>> table = {
      {"avx512",
       {
          {"small",
           {{0x4002799c20000000ull, 0x40021c65c0000000ull, 0x4001e4b7a0000000ull,
             0x4001121dc0000000ull, 0x4000f89c40000000ull, 0x4001569100000000ull},
            0x6346508996e99b85ull,
            0x40014ec1aaaaaaabull,
            {7619376, 872960, 872960, 11905328, 5158912, 4876800, 24609072, 17862656, 17862656}}},
          {"small-bn",
           {{0x4002bee920000000ull, 0x400122fac0000000ull, 0x3ff569e8c0000000ull,
             0x3fec6ff500000000ull, 0x3fe44ccd00000000ull, 0x3fdea01d00000000ull},
            0x912728620a3a8889ull,
            0x3ffdfffc55555555ull,
            {7723312, 973824, 973824, 14026032, 7276544, 7075840, 34246960, 27497472, 27497472}}},
          {"resnet",
           {{0x40026818c0000000ull, 0x4000f1cac0000000ull, 0x3fff829e00000000ull,
             0x3ff92502a0000000ull, 0x3ff7bec940000000ull, 0x3ffb7691c0000000ull},
            0x557c1cd7ac282e77ull,
            0x40022a9b6aaaaaabull,
            {4206384, 1397760, 1396992, 17433392, 14624768, 14624768, 58527536, 55718912, 55718912}}},
       }},
      {"generic",
       {
          {"small",
           {{0x4002799c20000000ull, 0x40021c65c0000000ull, 0x4001e4b7a0000000ull,
             0x4001121dc0000000ull, 0x4000f89c40000000ull, 0x4001569100000000ull},
            0xcb8f07c49c9453fbull,
            0x40014ec1aaaaaaabull,
            {7619376, 872960, 872960, 11905328, 5158912, 4876800, 24609072, 17862656, 17862656}}},
          {"small-bn",
           {{0x4002bee920000000ull, 0x400122fac0000000ull, 0x3ff569e8c0000000ull,
             0x3fec6ff500000000ull, 0x3fe44ccd00000000ull, 0x3fdea01d20000000ull},
            0xad14207743123a7cull,
            0x3ffdfffc55555555ull,
            {7723312, 973824, 973824, 14026032, 7276544, 7075840, 34246960, 27497472, 27497472}}},
          {"resnet",
           {{0x40026818c0000000ull, 0x4000f1cac0000000ull, 0x3fff829e00000000ull,
             0x3ff92502a0000000ull, 0x3ff7bec940000000ull, 0x3ffb7691c0000000ull},
            0x94cf398379ab72faull,
            0x40022a9b6aaaaaabull,
            {4206384, 1397760, 1396992, 17433392, 14624768, 14624768, 58527536, 55718912, 55718912}}},
       }},
      {"avx2",
       {
          {"small",
           {{0x4002799c20000000ull, 0x40021c65c0000000ull, 0x4001e4b7a0000000ull,
             0x4001121dc0000000ull, 0x4000f89c40000000ull, 0x4001569100000000ull},
            0x5f717d8aecac335aull,
            0x40014ec1aaaaaaabull,
            {7619376, 872960, 872960, 11905328, 5158912, 4876800, 24609072, 17862656, 17862656}}},
          {"small-bn",
           {{0x4002bee920000000ull, 0x400122fac0000000ull, 0x3ff569e8c0000000ull,
             0x3fec6ff500000000ull, 0x3fe44ccd00000000ull, 0x3fdea01d20000000ull},
            0xad14207743123a7cull,
            0x3ffdfffc55555555ull,
            {7723312, 973824, 973824, 14026032, 7276544, 7075840, 34246960, 27497472, 27497472}}},
          {"resnet",
           {{0x40026818c0000000ull, 0x4000f1cac0000000ull, 0x3fff829e00000000ull,
             0x3ff92502a0000000ull, 0x3ff7bec940000000ull, 0x3ffb7691c0000000ull},
            0x94cf398379ab72faull,
            0x40022a9b6aaaaaabull,
            {4206384, 1397760, 1396992, 17433392, 14624768, 14624768, 58527536, 55718912, 55718912}}},
       }},
  };
  return table;
}

}  // namespace

TEST_CASE("small, small-bn and resnet train and plan as recorded, to the bit", "[trainer][recorded]") {
  const std::string isa = CpuBackend::instruction_set();
  const bool recording = std::getenv("CNN_RECORD") != nullptr;
  if (recording) std::printf("      {\"%s\",\n       {\n", isa.c_str());
  for (const std::string model : {"small", "small-bn", "resnet"}) {
    const Recorded got = run(model);
    if (recording) {
      print(model, got);
      continue;
    }
    INFO(model << " on " << isa);
    const auto table = recordings().find(isa);
    if (table != recordings().end()) {
      const Recorded& want = table->second.at(model);
      CHECK(got.loss_bits == want.loss_bits);
      CHECK(got.parameters_hash == want.parameters_hash);
      CHECK(got.eval_loss_bits == want.eval_loss_bits);
      CHECK(got.plan_bytes == want.plan_bytes);
    } else {
      WARN("no recording for a build for " << isa << ": losses compared with the AVX2 ones within 1e-3");
      const Recorded& want = recordings().at("avx2").at(model);
      REQUIRE(got.loss_bits.size() == want.loss_bits.size());
      for (std::size_t s = 0; s < got.loss_bits.size(); ++s)
        CHECK(from_bits(got.loss_bits[s]) == Approx(from_bits(want.loss_bits[s])).epsilon(1e-3));
    }
  }
  if (recording) std::printf("       }},\n");
}
