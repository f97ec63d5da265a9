// 16-bit values (step_plan.cpp, Note [16-bit values]): the conversions round as documented, a
// bf16 plan stores the values between layers in half the bytes and gives each operation float32
// copies live at its own time step, and the same budget holds about twice the micro-batch.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/gemm16.hpp"
#include "engine/core/forwarding_backend.hpp"
#include "engine/plan/detail/step_plan.hpp"
#include "engine/train/planning_options.hpp"
#include "memory/detail/planner.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;

namespace {

std::vector<std::uint16_t> to_16bit(CpuBackend& backend, std::vector<float> x, ValueFormat format) {
  std::vector<std::uint16_t> packed(x.size());
  backend.to_16bit(Tensor{x.data(), Shape{static_cast<int>(x.size())}}, packed.data(), format);
  return packed;
}

std::vector<float> from_16bit(CpuBackend& backend, const std::vector<std::uint16_t>& packed, ValueFormat format) {
  std::vector<float> x(packed.size());
  backend.from_16bit(packed.data(), Tensor{x.data(), Shape{static_cast<int>(x.size())}}, format);
  return x;
}

float bits_to_float(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

TEST_CASE("to_16bit rounds to nearest with ties to even, from_16bit widens exactly", "[value_format]") {
  CpuBackend backend(2);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  SECTION("bf16") {
    // 1 + 2^-8 lies halfway between 1 and the next bfloat16 (even: 1); 1 + 3 x 2^-8 halfway
    // between two odd and even neighbours (even: 1 + 2^-6). A subnormal is flushed as the CPU computes.
    const std::vector<float> x{1.0f, 1.00390625f, 1.01171875f, -2.5f, inf, -inf, 1e-40f, -1e-40f, 3.0e38f};
    const std::vector<std::uint16_t> packed = to_16bit(backend, x, ValueFormat::bf16);
    CHECK(packed == std::vector<std::uint16_t>{0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x7F62});
    CHECK(std::isnan(from_16bit(backend, to_16bit(backend, {nan}, ValueFormat::bf16), ValueFormat::bf16)[0]));
    // Large enough for every thread to convert a range: the products' own rounding, element by element.
    std::vector<float> many = testing::random_vector(300000, 7);
    for (float& v : many) v *= 40.0f;
    const std::vector<std::uint16_t> words = to_16bit(backend, many, ValueFormat::bf16);
    const std::vector<float> back = from_16bit(backend, words, ValueFormat::bf16);
    for (std::size_t i = 0; i < many.size(); ++i) {
      REQUIRE(words[i] == cpu::to_bf16(many[i]));
      REQUIRE(back[i] == bits_to_float(std::uint32_t{words[i]} << 16));
    }
  }
  SECTION("fp16") {
    // 65504 is the largest half; 65520, halfway to 65536, rounds (to even) beyond it: infinity.
    // 2^-24 is the smallest subnormal half, kept; 1 + 2^-11 is a tie, to 1.
    const std::vector<float> x{1.0f, 65504.0f, 65520.0f, -70000.0f, 5.9604645e-8f, 1.00048828125f, -0.0f};
    CHECK(to_16bit(backend, x, ValueFormat::fp16) ==
          std::vector<std::uint16_t>{0x3C00, 0x7BFF, 0x7C00, 0xFC00, 0x0001, 0x3C00, 0x8000});
    CHECK(from_16bit(backend, {0x3C00, 0x7BFF, 0x7C00, 0x0001, 0xC000}, ValueFormat::fp16) ==
          std::vector<float>{1.0f, 65504.0f, inf, 5.9604645e-8f, -2.0f});
    CHECK(std::isnan(from_16bit(backend, to_16bit(backend, {nan}, ValueFormat::fp16), ValueFormat::fp16)[0]));
  }
  SECTION("fp32 is not a 16-bit format") {
    float one = 1.0f;
    std::uint16_t word = 0;
    CHECK_THROWS_WITH(backend.to_16bit(Tensor{&one, Shape{1}}, &word, ValueFormat::fp32),
                      Catch::Contains("fp32 is not a 16-bit format"));
    CHECK_THROWS_WITH(backend.from_16bit(&word, Tensor{&one, Shape{1}}, ValueFormat::fp32),
                      Catch::Contains("fp32 is not a 16-bit format"));
  }
  CHECK(value_format(Precision::bf16) == ValueFormat::bf16);
  CHECK(value_format(Precision::fp16) == ValueFormat::fp16);
  CHECK(value_format(Precision::tf32) == ValueFormat::fp32);
}

namespace {

const Shape kImage{1, 12, 12};
constexpr int kMicroBatch = 8;

StepNeeds needs_in(Network& net, ValueFormat values) {
  CpuBackend backend(2);
  StepNeeds needs = step_needs(net, backend, kMicroBatch, true, std::size_t{256} << 20);
  needs.values = values;
  return needs;
}

// Every recomputable output, recomputed.
RecomputeSet everything(const Network& net) {
  RecomputeSet set(static_cast<std::size_t>(net.size()), false);
  for (int id = 0; id < net.size(); ++id) set[static_cast<std::size_t>(id)] = can_recompute(net, id);
  return set;
}

// Goes through the step as the executor does: each 16-bit value an operation reads or writes has
// a float32 copy of the value's size live exactly at that time step, a float32 value has none,
// and a value's buffers hold 2 bytes a number where it is stored in 16 bits, else 4. A layer the
// plan hands its values as they are stored (StepPlan::packed_values, Layer::packed_values) has no
// copies.
void check_fp32_copies(const Network& net, const StepPlan& p) {
  const auto b = static_cast<std::size_t>(p.micro_batch);
  auto request = [&](int index) -> const memory::BufferRequest& { return p.requests[static_cast<std::size_t>(index)]; };
  auto floats = [&](int node) { return net.node(node).shape.elements() * b; };
  int layer = 0;  // the node whose operation the copies are for
  auto check_copy = [&](int node, int copy, int t) {
    INFO("value " << net.node(node).name << " at time " << t << " for " << net.node(layer).name);
    if (!p.stores_16bit(net.node(node).value) || (p.packed_values && net.node(layer).layer->packed_values())) {
      CHECK(copy < 0);
      return;
    }
    REQUIRE(copy >= 0);
    CHECK(request(copy).first_use == t);
    CHECK(request(copy).last_use == t);
    CHECK(request(copy).bytes == floats(node) * sizeof(float));
  };
  auto copy_of = [](const std::vector<int>& copies, std::size_t k) { return k < copies.size() ? copies[k] : -1; };
  const int logits = net.node(net.last()).value;
  CHECK_FALSE(p.stores_16bit(0));
  CHECK_FALSE(p.stores_16bit(logits));
  for (int id = 0; id < net.size(); ++id) {
    const Node& n = net.node(id);
    if (n.value != id) continue;
    const std::size_t bytes_each = p.stores_16bit(id) ? 2 : 4;
    CHECK(p.stores_16bit(id) == (p.values != ValueFormat::fp32 && id != 0 && id != logits));
    CHECK(request(p.node(id).value).bytes == floats(id) * bytes_each);
    if (id > 0) CHECK(request(p.node(id).value_grad).bytes == floats(id) * sizeof(float));
  }
  for (int id = 1; id < net.size(); ++id) {
    const Node& n = net.node(id);
    if (n.layer->is_view()) continue;
    const NodeBuffers& nb = p.node(id);
    layer = id;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) check_copy(n.inputs[k], copy_of(nb.forward_inputs_fp32, k), id);
    check_copy(id, nb.forward_output_fp32, id);
    const int t = p.backward_time(id);
    for (std::size_t k = 0; k < n.inputs.size(); ++k)
      if (n.layer->backward_needs_input()) check_copy(n.inputs[k], copy_of(nb.backward_inputs_fp32, k), t);
      else CHECK(copy_of(nb.backward_inputs_fp32, k) < 0);
    if (n.layer->backward_needs_output()) check_copy(id, nb.backward_output_fp32, t);
    else CHECK(nb.backward_output_fp32 < 0);
  }
  for (int t = 0; t < p.time_steps; ++t) {
    const StepOp op = p.ops[static_cast<std::size_t>(t)];
    if (op.kind != StepOpKind::recompute) continue;
    const Node& n = net.node(op.node);
    const RecomputeBuffers& r = p.recomputations[static_cast<std::size_t>(t)];
    layer = op.node;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) check_copy(n.inputs[k], copy_of(r.inputs_fp32, k), t);
    check_copy(op.node, r.output_fp32, t);
    CHECK(request(r.output).bytes == floats(op.node) * (p.stores_16bit(op.node) ? 2 : 4));
  }
  // A value written in place over its input's buffer is stored as its input is.
  for (int id : p.in_place) {
    const int input = net.node(net.node(id).inputs[0]).value;
    CHECK(p.stores_16bit(id) == p.stores_16bit(input));
  }
  CHECK(memory::plan_is_valid(p.requests, p.plan));
}

}  // namespace

TEST_CASE("a bf16 plan stores values in half the bytes, with float32 copies live at one time step", "[value_format][planner]") {
  for (const std::string name : {"small-bn", "resnet", "resnet18+dropout", "dense-relu-out"}) {
    INFO(name);
    Network net = name == "resnet18+dropout" ? testing::resnet18_with_dropout(kImage, 4)
                  : name == "dense-relu-out" ? parse_network("conv 4 3 pad=1\nrelu\nflatten\ndense 4\nrelu\n", kImage, 4)
                                             : make_preset(name, kImage, 4);
    const StepNeeds fp32 = needs_in(net, ValueFormat::fp32), bf16 = needs_in(net, ValueFormat::bf16);
    const StepPlan wide = plan_step(net, fp32);
    for (InPlaceSharing sharing : {InPlaceSharing::always, InPlaceSharing::never}) {
      StepNeeds needs = bf16;
      needs.in_place = sharing;
      check_fp32_copies(net, plan_step(net, needs));
      check_fp32_copies(net, plan_step(net, needs, everything(net)));
    }
    check_fp32_copies(net, wide);
    // The last network keeps too little for backward: its float32 copies outweigh what 16 bits save.
    const StepPlan narrow = plan_step(net, bf16);
    if (name != "dense-relu-out") CHECK(narrow.arena_bytes() < wide.arena_bytes());
  }
}

namespace {

// The CPU backend as the planner sees a backend that takes values as they are stored (Note
// [Values as they are stored], backend.hpp); planned only, never run.
class TakesStoredValues : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  bool takes_packed_values() const override { return true; }
};

}  // namespace

TEST_CASE("on a backend that takes values as they are stored, the layers that take them have no float32 copies",
          "[value_format][planner]") {
  for (const std::string name : {"small-bn", "resnet", "resnet18+dropout", "dense-relu-out"}) {
    INFO(name);
    Network net = name == "resnet18+dropout" ? testing::resnet18_with_dropout(kImage, 4)
                  : name == "dense-relu-out" ? parse_network("conv 4 3 pad=1\nrelu\nflatten\ndense 4\nrelu\n", kImage, 4)
                                             : make_preset(name, kImage, 4);
    CpuBackend cpu(2, Precision::bf16);
    TakesStoredValues stored(cpu);
    StepNeeds copies = step_needs(net, cpu, kMicroBatch, true, std::size_t{256} << 20);
    StepNeeds none = step_needs(net, stored, kMicroBatch, true, std::size_t{256} << 20);
    CHECK(copies.packed == ValueFormat::fp32);
    CHECK(none.packed == ValueFormat::bf16);
    copies.values = none.values = ValueFormat::bf16;
    const StepPlan with_copies = plan_step(net, copies);
    for (InPlaceSharing sharing : {InPlaceSharing::always, InPlaceSharing::never}) {
      StepNeeds needs = none;
      needs.in_place = sharing;
      const StepPlan p = plan_step(net, needs);
      CHECK(p.packed_values);
      check_fp32_copies(net, p);
      check_fp32_copies(net, plan_step(net, needs, everything(net)));
      if (sharing == InPlaceSharing::always) CHECK(p.requests.size() < with_copies.requests.size());
    }
    CHECK(plan_step(net, none).arena_bytes() <= with_copies.arena_bytes());
    // Values in another format than the backend's are handed as float32 copies.
    none.values = ValueFormat::fp16;
    const StepPlan other = plan_step(net, none);
    CHECK_FALSE(other.packed_values);
    check_fp32_copies(net, other);
  }
}

TEST_CASE("small stores its values in 16 bits where no float32 copies are planned for its layers", "[value_format][planner]") {
  // small's first convolution's output dominates its peak: with float32 copies around each layer
  // 16 bits save nothing there, without them (a backend that takes values as stored) they do.
  Network net = make_preset("small", Shape{1, 28, 28}, 10);
  CpuBackend cpu(2, Precision::bf16);
  TakesStoredValues stored(cpu);
  const StepNeeds copies = step_needs(net, cpu, 64, true, std::size_t{256} << 20);
  const StepNeeds none = step_needs(net, stored, 64, true, std::size_t{256} << 20);
  CHECK(chosen_value_format(net, copies, ValueFormat::bf16, NarrowValues::where_smaller) == ValueFormat::fp32);
  CHECK(chosen_value_format(net, none, ValueFormat::bf16, NarrowValues::where_smaller) == ValueFormat::bf16);
  StepNeeds wide = none, narrow = none;
  narrow.values = ValueFormat::bf16;
  CHECK(plan_step(net, narrow).arena_bytes() < 0.8 * plan_step(net, wide).arena_bytes());
}

TEST_CASE(
    "resnet18 in 16 bits: the activations' peak halves, the arena at 1.000x the lower bound, 1.8 times the micro-batch",
    "[value_format][planner]") {
  const Shape image{3, 32, 32};
  Network net = make_preset("resnet18", image, 10);
  CpuBackend backend(2);
  StepNeeds fp32 = step_needs(net, backend, 64, true, std::size_t{256} << 20), bf16 = fp32;
  bf16.values = ValueFormat::bf16;
  const StepPlan wide = plan_step(net, fp32), narrow = plan_step(net, bf16);
  const auto activations = [](const StepPlan& p) {
    return static_cast<double>(p.plan.peak_by_category[memory::Category::activations]);
  };
  INFO("activations at the peak: " << activations(narrow) << " bytes in bf16, " << activations(wide) << " in fp32");
  CHECK(activations(narrow) < 0.55 * activations(wide));
  CHECK(wide.arena_bytes() == wide.plan.lower_bound_bytes);
  // 1.000x the bound: in bf16 every greedy order leaves two 1 KiB BatchNorm statistics, live until
  // the step before the peak, 2 KiB above it (the bound need not be reachable by any packing).
  CHECK(narrow.plan.overhead() < 1.0005);

  // The same budget, as the trainer plans it.
  TrainerOptions o = testing::constant_sgd(4096);
  o.memory_budget = std::size_t{512} << 20;
  auto largest = [&](Precision precision) {
    Network each = make_preset("resnet18", image, 10);
    CpuBackend on(2, precision);
    const BatchPlanner planner(each, on, planning_options(o, each, on));
    return planner.largest_fitting(o.batch);
  };
  const int in_fp32 = largest(Precision::fp32), in_bf16 = largest(Precision::bf16);
  // A backend that takes the values as they are stored needs no float32 copies for most layers.
  Network each = make_preset("resnet18", image, 10);
  CpuBackend cpu(2, Precision::bf16);
  TakesStoredValues stored(cpu);
  const int as_stored = BatchPlanner(each, stored, planning_options(o, each, stored)).largest_fitting(o.batch);
  INFO("largest micro-batch in 512 MiB: " << in_bf16 << " in bf16, " << as_stored << " taken as stored, " << in_fp32
                                          << " in fp32");
  REQUIRE(in_fp32 > 0);
  CHECK(in_bf16 >= 1.8 * in_fp32);
  CHECK(as_stored > in_bf16);
  CHECK(largest(Precision::fp16) == in_bf16);  // half values take bfloat16's bytes
}

TEST_CASE("bf16 stores values in 16 bits where the plan comes out smaller, or always when asked", "[value_format][planner]") {
  // small at 1x28x28 keeps little for backward: its first convolution's float32 copies outweigh
  // what 16 bits save. resnet18 keeps a great deal.
  for (const std::string name : {"small", "resnet18"}) {
    INFO(name);
    const Shape image = name == "small" ? Shape{1, 28, 28} : Shape{3, 32, 32};
    Network net = make_preset(name, image, 10);
    CpuBackend backend(2, Precision::bf16);
    TrainerOptions o = testing::constant_sgd(64);
    const BatchPlanner planner(net, backend, planning_options(o, net, backend));  // rewrites the network first
    StepNeeds needs = step_needs(net, backend, 64, true, std::size_t{256} << 20);
    const std::size_t wide = plan_step(net, needs).arena_bytes();
    needs.values = ValueFormat::bf16;
    const std::size_t narrow = plan_step(net, needs).arena_bytes();
    CHECK((narrow < wide) == (name == "resnet18"));
    const ValueFormat chosen = chosen_value_format(net, needs, ValueFormat::bf16, NarrowValues::where_smaller);
    CHECK(chosen == (narrow < wide ? ValueFormat::bf16 : ValueFormat::fp32));
    CHECK(chosen_value_format(net, needs, ValueFormat::bf16, NarrowValues::always) == ValueFormat::bf16);
    CHECK(chosen_value_format(net, needs, ValueFormat::fp32, NarrowValues::always) == ValueFormat::fp32);

    // The trainer's planner chooses so, and reports it.
    CHECK(planner.breakdown(64).values == chosen);
    CHECK(planner.breakdown(64).arena_bytes == std::min(narrow, wide));
    o.narrow_values = NarrowValues::always;
    CHECK(BatchPlanner(net, backend, planning_options(o, net, backend)).breakdown(64).values == ValueFormat::bf16);
  }
}
