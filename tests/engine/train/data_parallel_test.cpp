// Data-parallel training without MPI: N trainers on N threads summing through ThreadRanks. The
// ranks' shares of a batch train as one process training the whole batch in the same micro-batches.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <set>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/core/forwarding_backend.hpp"
#include "engine/train/detail/gradient_buckets.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/step_buffers.hpp"
#include "tests/engine/test_networks.hpp"
#include "tests/engine/thread_ranks.hpp"
#include "tests/layers/gradient_checker.hpp"

using namespace cnn;
using cnn::testing::SyntheticData;
using cnn::testing::ThreadRanks;

namespace {

const Shape kImage{1, 12, 12};
constexpr int kClasses = 4;

struct Run {
  std::vector<double> losses;
  std::vector<float> trainable;  // the trainable parameters at the end
  std::vector<int> micro_batches;
};

std::vector<float> trainable_of(Trainer& trainer) {
  std::vector<float> all = trainer.parameters().download();
  all.resize(trainer.parameters().trainable().elements());
  return all;
}

// One process: `steps` batches of `batch` from `data`.
Run one_process(Network net, TrainerOptions o, const SyntheticData& data, int steps) {
  CpuBackend backend(1);
  Trainer trainer(net, backend, memory::host_resource(), o);
  Run run;
  for (int s = 0; s < steps; ++s) run.losses.push_back(trainer.train_step(data.batch(s * o.batch, o.batch)).loss);
  run.trainable = trainable_of(trainer);
  return run;
}

// Batch of rank r's share of batch s.
Batch share(const SyntheticData& data, int s, int batch, int rank, int ranks) {
  const RankShare mine = share_of_batch(batch, rank, ranks);
  Batch b = data.batch(s * batch + mine.first, mine.size);
  b.first = mine.first;
  b.global_size = batch;
  return b;
}

// The CPU backend made to say it runs BatchNorm, add and ReLU in one pass (Note [BatchNorm, add and
// ReLU in one pass], step_plan.cpp), as CUDA does in 16 bits: its plans fuse them.
class FusingAdds : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  bool fuses_batchnorm_add_relu() const override { return true; }
};

// `ranks` trainers on threads, each given its share of every batch; every rank's run.
std::vector<Run> data_parallel(const std::function<Network()>& make, TrainerOptions o, const SyntheticData& data,
                               int steps, int ranks,
                               const std::function<memory::MemoryResource&(int)>& memory_of = nullptr,
                               bool fusing_adds = false) {
  ThreadRanks group(ranks);
  std::vector<Run> runs(static_cast<std::size_t>(ranks));
  group.run([&](int r) {
    CpuBackend cpu(1);
    FusingAdds fusing(cpu);
    Backend& backend = fusing_adds ? static_cast<Backend&>(fusing) : cpu;
    Network net = make();
    TrainerOptions mine = o;
    mine.communicator = &group.rank(r);
    Trainer trainer(net, backend, memory_of ? memory_of(r) : memory::host_resource(), mine);
    Run& run = runs[static_cast<std::size_t>(r)];
    for (int s = 0; s < steps; ++s) {
      const StepReport report = trainer.train_step(share(data, s, o.batch, r, ranks));
      CHECK(report.samples == o.batch);
      run.losses.push_back(report.loss);
      run.micro_batches.push_back(report.micro_batch);
    }
    run.trainable = trainable_of(trainer);
  });
  return runs;
}

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  return worst;
}

void require_losses_close(const std::vector<double>& a, const std::vector<double>& b, double tolerance) {
  REQUIRE(a.size() == b.size());
  for (std::size_t s = 0; s < a.size(); ++s) CHECK(std::abs(a[s] - b[s]) <= tolerance * std::abs(a[s]));
}

}  // namespace

TEST_CASE("two ranks train as one process with two micro-batches, dropout masks included", "[data-parallel]") {
  TrainerOptions o = testing::constant_sgd(16);
  const SyntheticData data(16 * 4, kImage, kClasses, 5);
  auto make = [] { return testing::small_with_dropout(kImage, kClasses); };
  TrainerOptions whole = o;
  whole.micro_batch = 8;
  const Run one = one_process(make(), whole, data, 4);
  const std::vector<Run> two = data_parallel(make, o, data, 4, 2);
  for (const Run& rank : two) {
    require_losses_close(one.losses, rank.losses, 1e-6);
    // Each rank's gradient is one micro-batch's; the sum of the two is the one process's sum.
    CHECK(largest_difference(one.trainable, rank.trainable) == 0);
  }
}

TEST_CASE("uneven shares and a rank without samples train as the whole batch", "[data-parallel]") {
  auto make = [] { return make_preset("small", kImage, kClasses); };
  SECTION("5 samples over 2 ranks: 3 and 2") {
    TrainerOptions o = testing::constant_sgd(5);
    const SyntheticData data(5 * 3, kImage, kClasses, 6);
    TrainerOptions whole = o;
    whole.micro_batch = 3;
    const Run one = one_process(make(), whole, data, 3);
    for (const Run& rank : data_parallel(make, o, data, 3, 2)) {
      require_losses_close(one.losses, rank.losses, 1e-6);
      CHECK(largest_difference(one.trainable, rank.trainable) <= 1e-7);
    }
  }
  SECTION("a batch of 2 over 3 ranks: one sits the step out and still sums") {
    TrainerOptions o = testing::constant_sgd(3);
    const SyntheticData data(6, kImage, kClasses, 7);
    TrainerOptions whole = o;
    whole.micro_batch = 1;
    const Run one = one_process(make(), whole, data, 2);
    for (const Run& rank : data_parallel(make, o, data, 2, 3)) {
      require_losses_close(one.losses, rank.losses, 1e-6);
      CHECK(largest_difference(one.trainable, rank.trainable) <= 1e-7);
    }
  }
}

TEST_CASE("an out-of-memory failure on one rank: every rank replays the step, none is lost", "[data-parallel][recovery]") {
  TrainerOptions o = testing::constant_sgd(32, 1000);
  const SyntheticData data(32 * 4, kImage, kClasses, 8);
  auto make = [] { return testing::small_with_dropout(kImage, kClasses); };
  const std::vector<Run> clean = data_parallel(make, o, data, 4, 2);

  // Rank 1's step buffers fail once, in its second step's backward (the direct strategy asks
  // about 25 times a step at micro-batch 16).
  testing::StepBufferStack rank1(memory::host_resource());
  rank1.faults().fail_on({40});
  ThreadRanks group(2);
  std::vector<Run> runs(2);
  int recoveries = 0;
  group.run([&](int r) {
    CpuBackend backend(1);
    Network net = make();
    TrainerOptions mine = o;
    mine.communicator = &group.rank(r);
    std::unique_ptr<Trainer> trainer;
    if (r == 1) {
      trainer = std::make_unique<Trainer>(net, backend, rank1.stack(), mine);
      trainer->on_recovery = [&](const std::string&) { ++recoveries; };
    } else {
      trainer = std::make_unique<Trainer>(net, backend, memory::host_resource(), mine);
    }
    for (int s = 0; s < 4; ++s) {
      const StepReport report = trainer->train_step(share(data, s, 32, r, 2));
      runs[static_cast<std::size_t>(r)].losses.push_back(report.loss);
      runs[static_cast<std::size_t>(r)].micro_batches.push_back(report.micro_batch);
      CHECK(report.step == s + 1);  // a replayed step counts once
    }
    runs[static_cast<std::size_t>(r)].trainable = trainable_of(*trainer);
  });
  CHECK(rank1.faults().injected_failures() == 1);
  CHECK(recoveries == 1);
  CHECK(runs[1].micro_batches[1] == 8);  // halved on the rank that failed
  CHECK(runs[0].micro_batches[1] == 16);
  // The replica stay alike, and the run is the clean one but for the rounding of smaller micro-batches.
  CHECK(largest_difference(runs[0].trainable, runs[1].trainable) == 0);
  CHECK(largest_difference(clean[0].trainable, runs[0].trainable) <= 1e-6);
  require_losses_close(clean[0].losses, runs[0].losses, 1e-6);
}

// resnet: where the plan runs BatchNorm with the add and ReLU after it in one pass (step_plan.cpp,
// Note [BatchNorm, add and ReLU in one pass]), synchronised BatchNorm keeps its own calls, and the
// three layers' calls run on the fused buffers: the add over BatchNorm's output, and its gradient
// for it in place.
TEST_CASE("synchronised BatchNorm over two ranks trains as one batch", "[data-parallel][batchnorm]") {
  for (const char* model : {"small-bn", "resnet"}) {
    INFO(model);
    const bool fusing_adds = std::string(model) == "resnet";
    TrainerOptions o = testing::constant_sgd(16);
    o.sync_batchnorm = true;
    const SyntheticData data(16 * 3, kImage, kClasses, 9);
    auto make = [&] { return make_preset(model, kImage, kClasses); };
    TrainerOptions whole = testing::constant_sgd(16);
    whole.micro_batch = 16;
    const Run one = one_process(make(), whole, data, 3);
    const std::vector<Run> two = data_parallel(make, o, data, 3, 2, nullptr, fusing_adds);
    for (const Run& rank : two) {
      require_losses_close(one.losses, rank.losses, 1e-5);
      CHECK(largest_difference(one.trainable, rank.trainable) <= 1e-5);
    }
    // Per rank (the default), each rank's BatchNorm sees its 8 samples: not the whole batch.
    TrainerOptions per_rank = testing::constant_sgd(16);
    const std::vector<Run> apart = data_parallel(make, per_rank, data, 3, 2);
    CHECK(largest_difference(one.trainable, apart[0].trainable) > 1e-4);
  }
  // A rank's plan (8 samples) fuses resnet's adds, so the run above went through the fused buffers.
  CpuBackend cpu(1);
  FusingAdds backend(cpu);
  Network net = make_preset("resnet", kImage, kClasses);
  const Trainer rank_sized(net, backend, memory::host_resource(), testing::constant_sgd(8));
  CHECK(rank_sized.memory().fused_adds > 0);
}

TEST_CASE("synchronised BatchNorm refuses an uneven batch on every rank, none left waiting",
          "[data-parallel][batchnorm]") {
  const SyntheticData data(16 + 15 + 14, kImage, kClasses, 10);
  ThreadRanks group(2);
  group.run([&](int r) {
    CpuBackend backend(1);
    Network net = make_preset("small-bn", kImage, kClasses);
    TrainerOptions o = testing::constant_sgd(16);
    o.sync_batchnorm = true;
    o.communicator = &group.rank(r);
    Trainer trainer(net, backend, memory::host_resource(), o);
    auto share_of = [&](int first, int batch) {
      const RankShare mine = share_of_batch(batch, r, 2);
      Batch b = data.batch(first + mine.first, mine.size);
      b.first = mine.first;
      b.global_size = batch;
      b.last_of_epoch = batch < 16;  // each shorter batch an epoch's last
      return b;
    };
    CHECK(trainer.train_step(share_of(0, 16)).samples == 16);
    // 15 over 2 ranks is 8 and 7: the ranks' micro-batches could not be paired in BatchNorm's sums.
    REQUIRE_THROWS_WITH(trainer.train_step(share_of(16, 15)), Catch::Contains("shared evenly"));
    CHECK(trainer.steps() == 1);
    // A shorter batch that is even still trains: 7 on each rank.
    const StepReport last = trainer.train_step(share_of(31, 14));
    CHECK(last.samples == 14);
    CHECK(std::isfinite(last.loss));
  });
}

TEST_CASE("synchronised BatchNorm: ranks that would run different micro-batches agree on the smallest",
          "[data-parallel][batchnorm]") {
  const SyntheticData data(16 * 3, kImage, kClasses, 11);
  auto make = [] { return make_preset("small-bn", kImage, kClasses); };
  TrainerOptions o = testing::constant_sgd(16);
  o.sync_batchnorm = true;
  o.micro_batch = 4;
  const std::vector<Run> alike = data_parallel(make, o, data, 3, 2);

  // Rank 1 asks for micro-batch 8 (as a rank whose budget or device allows more would): both
  // run 4, as the run above. Before the third step rank 1 alone goes down to 2 (a restored
  // state; an evaluation out of memory does the same): both run 2. Neither waits in a sum alone.
  ThreadRanks group(2);
  std::vector<Run> runs(2);
  group.run([&](int r) {
    CpuBackend backend(1);
    Network net = make();
    TrainerOptions mine = o;
    mine.micro_batch = r == 0 ? 4 : 8;
    mine.communicator = &group.rank(r);
    Trainer trainer(net, backend, memory::host_resource(), mine);
    CHECK(trainer.micro_batch() == 4);
    Run& run = runs[static_cast<std::size_t>(r)];
    for (int s = 0; s < 3; ++s) {
      if (s == 2 && r == 1) trainer.restore(TrainerState{trainer.steps(), 2, 0});  // one rank alone goes lower
      const StepReport report = trainer.train_step(share(data, s, 16, r, 2));
      run.losses.push_back(report.loss);
      run.micro_batches.push_back(report.micro_batch);
    }
    run.trainable = trainable_of(trainer);
  });
  CHECK(runs[0].micro_batches == std::vector<int>{4, 4, 2});
  CHECK(runs[1].micro_batches == std::vector<int>{4, 4, 2});
  CHECK(largest_difference(runs[0].trainable, runs[1].trainable) == 0);
  CHECK(runs[0].losses[0] == alike[0].losses[0]);
  CHECK(runs[0].losses[1] == alike[0].losses[1]);
}

TEST_CASE("the trainer refuses data-parallel settings that cannot work", "[data-parallel]") {
  CpuBackend backend(1);
  Network net = make_preset("small-bn", kImage, kClasses);
  ThreadRanks group(2);
  TrainerOptions o = testing::constant_sgd(16);
  SECTION("synchronised BatchNorm without ranks") {
    o.sync_batchnorm = true;
    REQUIRE_THROWS_WITH(Trainer(net, backend, memory::host_resource(), o), Catch::Contains("needs a data-parallel run"));
  }
  SECTION("a batch smaller than the ranks") {
    o.batch = 1;
    o.communicator = &group.rank(0);
    REQUIRE_THROWS_WITH(Trainer(net, backend, memory::host_resource(), o), Catch::Contains("every rank needs a sample"));
  }
  SECTION("synchronised BatchNorm over uneven shares") {
    o.batch = 15;
    o.communicator = &group.rank(0);
    o.sync_batchnorm = true;
    REQUIRE_THROWS_WITH(Trainer(net, backend, memory::host_resource(), o), Catch::Contains("shared evenly"));
  }
}

TEST_CASE("a data-parallel step checks the share it is given", "[data-parallel]") {
  ThreadRanks group(1);  // one rank: no other to wait for
  CpuBackend backend(1);
  Network net = make_preset("small", kImage, kClasses);
  TrainerOptions o = testing::constant_sgd(8);
  o.communicator = &group.rank(0);
  Trainer trainer(net, backend, memory::host_resource(), o);
  const SyntheticData data(8, kImage, kClasses, 3);
  Batch b = data.batch(0, 8);
  REQUIRE_THROWS_WITH(trainer.train_step(b), Catch::Contains("not a share of a batch"));  // no global_size
  b.global_size = 8;
  b.first = 4;
  REQUIRE_THROWS_WITH(trainer.train_step(b), Catch::Contains("not a share of a batch"));  // past its end
  b.first = 0;
  CHECK(trainer.train_step(b).samples == 8);
}

TEST_CASE("gradient buckets sum every float of the gradient block once, in order, while backward runs",
          "[data-parallel]") {
  // A communicator that records the ranges it was asked to sum.
  struct Recorder final : Communicator {
    std::vector<std::pair<const float*, std::size_t>> started;
    int rank() const override { return 0; }
    int ranks() const override { return 2; }
    std::string describe() const override { return "recorder"; }
    DeviceKind memory_kind() const override { return DeviceKind::cpu; }
    std::size_t reserved_bytes(std::size_t) const override { return 0; }
    void sum_host(std::span<double>) override {}
    void max_host(std::span<double>) override {}
    void broadcast_host(std::span<std::byte>) override {}
    void sum(const Tensor&) override {}
    void start_sum(const Tensor& t) override { started.emplace_back(t.data, t.elements()); }
    void wait_started() override {}
  } recorder;
  CpuBackend backend(1);
  Network net = make_preset("resnet", kImage, kClasses);
  ParameterStore params(net, backend, memory::host_resource(), 0, 1);
  GradientBuckets buckets(net, params, recorder, 64 * 1024);
  REQUIRE(buckets.count() > 2);
  buckets.begin();
  std::size_t launched_before_last_layer = 0;
  for (int id = net.size() - 1; id >= 1; --id) {
    if (id == 1) launched_before_last_layer = recorder.started.size();
    buckets.node_done(id);
  }
  buckets.finish();
  CHECK(launched_before_last_layer > 0);  // sums began while backward had layers to go
  REQUIRE(recorder.started.size() == static_cast<std::size_t>(buckets.count()));
  // From the block's end to its start, without gap or overlap.
  const Tensor block = params.gradients();
  const float* end = block.data + block.elements();
  for (const auto& [data, count] : recorder.started) {
    CHECK(data + count == end);
    end = data;
  }
  CHECK(end == block.data);
}

TEST_CASE("synchronised BatchNorm gradients (one rank)", "[gradients][data-parallel]") {
  ThreadRanks one(1);
  std::vector<float> scratch(64);
  CrossRankContext cross{&one.rank(0), Tensor{scratch.data(), Shape{64}}};
  testing::GradientCheckOptions o;
  o.batch = 4;
  o.step = 1e-3f;
  o.cross_rank = &cross;
  SECTION("images") {
    BatchNorm2D l;
    const auto r = testing::check_gradients(l, {Shape{3, 4, 4}}, o);
    CHECK(r.worst_input_error < 2e-2);
    CHECK(r.worst_param_error < 2e-2);
  }
  SECTION("features") {
    BatchNorm2D l;
    const auto r = testing::check_gradients(l, {Shape{6}}, o);
    CHECK(r.worst_input_error < 2e-2);
    CHECK(r.worst_param_error < 2e-2);
  }
}

TEST_CASE("synchronised BatchNorm's calls against the one-rank calls on the CPU", "[batchnorm][data-parallel]") {
  // Over one rank the sums are the micro-batch's own: the same statistics, output and gradients.
  CpuBackend cpu(1);
  const Shape x_shape{5, 3, 4, 4};
  std::vector<float> x = testing::random_vector(x_shape.elements(), 1), dy = testing::random_vector(x_shape.elements(), 2);
  for (float& v : x) v = 3 * v + 1;  // a mean away from zero
  std::vector<float> gamma{1.5f, 0.5f, -1.f}, beta{0.1f, 0.2f, 0.3f};
  auto t = [](std::vector<float>& v, Shape s) { return Tensor{v.data(), s}; };
  const Shape c{3};
  std::vector<float> y1(x.size()), y2(x.size()), rm1{0, 0, 0}, rv1{1, 1, 1}, rm2 = rm1, rv2 = rv1, m1(3), s1(3), m2(3), s2(3);
  cpu.batchnorm_forward_training(t(x, x_shape), t(gamma, c), t(beta, c), t(y1, x_shape), t(rm1, c), t(rv1, c), 0.1f,
                                 1e-5f, t(m1, c), t(s1, c));
  const double count = 5.0 * 16;
  cpu.batchnorm_channel_sums(t(x, x_shape), t(m2, c));
  cpu.batchnorm_centered_squares(t(x, x_shape), t(m2, c), count, t(s2, c));
  cpu.batchnorm_forward_from_sums(t(x, x_shape), t(gamma, c), t(beta, c), t(y2, x_shape), t(rm2, c), t(rv2, c), 0.1f,
                                  1e-5f, count, t(m2, c), t(s2, c));
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(m2[i] == Approx(m1[i]).epsilon(1e-6));
    CHECK(s2[i] == Approx(s1[i]).epsilon(1e-6));
    CHECK(rv2[i] == Approx(rv1[i]).epsilon(1e-6));
  }
  CHECK(largest_difference(y1, y2) <= 1e-5);
  std::vector<float> dx1(x.size()), dx2(x.size()), dg(3, 0.f), db(3, 0.f), sums(6);
  cpu.batchnorm_backward(t(x, x_shape), t(dy, x_shape), t(gamma, c), t(m1, c), t(s1, c), 1e-5f, t(dx1, x_shape),
                         t(dg, c), t(db, c), false);
  cpu.batchnorm_backward_sums(t(x, x_shape), t(dy, x_shape), t(m1, c), t(s1, c), t(sums, Shape{6}));
  cpu.batchnorm_backward_from_sums(t(x, x_shape), t(dy, x_shape), t(gamma, c), t(m1, c), t(s1, c), t(sums, Shape{6}),
                                   count, t(dx2, x_shape), false);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(sums[i] == Approx(db[i]).epsilon(1e-5).margin(1e-5));
    CHECK(sums[3 + i] == Approx(dg[i]).epsilon(1e-5).margin(1e-5));
  }
  CHECK(largest_difference(dx1, dx2) <= 1e-5);
}
