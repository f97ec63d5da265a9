// Training and evaluating the tasks beyond classification on the CPU: each learns synthetic data
// it can see, gives the same parameters whatever the micro-batch, evaluates alike on a trainer and
// a predictor, and refuses a network or targets that do not suit it.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/engine/core/task_scores.hpp>
#include <cnnengine/engine/infer/predictor.hpp>
#include "engine/plan/batch_planner.hpp"
#include "engine/plan/detail/step_plan.hpp"
#include "engine/train/planning_options.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/step_buffers.hpp"
#include "tests/engine/test_networks.hpp"
#include "tests/engine/thread_ranks.hpp"
#include "tests/heap_counter.hpp"
#include "tests/relative_error.hpp"

using namespace cnn;
using cnn::testing::relative_error;

namespace {

const Shape kImage{1, 8, 8};

// Images whose targets are visible in them. segment: a pixel above 0.5 is class 1 + (its row
// >= 4), others class 0, and a band of ignored pixels on the left; multilabel: label k is on where
// quadrant k is bright; regress: the image's mean and its top half's mean.
struct TaskData {
  Task task;
  int samples;
  std::vector<float> images;
  std::vector<std::uint8_t> masks;
  std::vector<float> values;

  TaskData(Task t, int n, std::uint64_t seed) : task(t), samples(n) {
    const std::size_t pixels = kImage.elements();
    images.resize(static_cast<std::size_t>(n) * pixels);
    for (int i = 0; i < n; ++i) {
      const auto quadrants = splitmix64(seed + static_cast<std::uint64_t>(i)) % 16;
      for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 8; ++x) {
          const int q = (y >= 4) * 2 + (x >= 4);
          const float noise = 0.3f * cnn::uniform01(seed * 31 + static_cast<std::uint64_t>(i), static_cast<std::size_t>(y * 8 + x));
          images[static_cast<std::size_t>(i) * pixels + static_cast<std::size_t>(y * 8 + x)] =
              noise + ((quadrants >> q) & 1 ? 0.6f : 0.0f);
        }
    }
    if (t == Task::segment) {
      masks.resize(static_cast<std::size_t>(n) * pixels);
      for (std::size_t k = 0; k < masks.size(); ++k) {
        const auto p = k % pixels;
        const int y = static_cast<int>(p / 8), x = static_cast<int>(p % 8);
        masks[k] = x == 0 ? kIgnoreMask : images[k] > 0.5f ? static_cast<std::uint8_t>(1 + (y >= 4)) : 0;
      }
    } else if (t == Task::multilabel) {
      for (int i = 0; i < n; ++i) {
        const auto quadrants = splitmix64(seed + static_cast<std::uint64_t>(i)) % 16;
        for (int q = 0; q < 4; ++q) values.push_back(static_cast<float>((quadrants >> q) & 1));
      }
    } else {
      for (int i = 0; i < n; ++i) {
        const float* img = images.data() + static_cast<std::size_t>(i) * pixels;
        double all = 0, top = 0;
        for (std::size_t k = 0; k < pixels; ++k) (k < pixels / 2 ? top : all) += img[k];
        all += top;
        values.push_back(static_cast<float>(all / pixels));
        values.push_back(static_cast<float>(top / (pixels / 2)));
      }
    }
  }
  std::size_t target_bytes() const { return task == Task::segment ? kImage.elements() : (task == Task::multilabel ? 16 : 8); }
  Batch batch(int first, int size) const {
    Batch b;
    b.images = images.data() + static_cast<std::size_t>(first) * kImage.elements();
    b.size = size;
    const char* targets = task == Task::segment ? reinterpret_cast<const char*>(masks.data())
                                                : reinterpret_cast<const char*>(values.data());
    b.targets = targets + static_cast<std::size_t>(first) * target_bytes();
    return b;
  }
};

Network task_network(Task task) {
  LossOptions loss;
  loss.task = task;
  Network net = task == Task::segment
                    ? parse_network("conv 8 3 pad=1\nrelu\nconv 8 3 pad=1\nrelu\nconv 3 1\n", kImage, 0)
                    : parse_network("conv 8 3 pad=1\nrelu\nmaxpool 2\nflatten\ndense 16\nrelu\ndense " +
                                        std::to_string(task == Task::multilabel ? 4 : 2) + "\n",
                                    kImage, 0);
  net.set_loss(loss);
  return net;
}

TrainerOptions adamw(int batch) {
  TrainerOptions o;
  o.batch = batch;
  o.optimizer.learning_rate = 0.01f;
  o.schedule.kind = ScheduleKind::constant;
  return o;
}

NextBatch batches_of(const TaskData& data, int batch) {
  auto first = std::make_shared<int>(0);
  return [&data, batch, first]() -> std::optional<Batch> {
    if (*first >= data.samples) return std::nullopt;
    const int n = std::min(batch, data.samples - *first);
    const Batch b = data.batch(*first, n);
    *first += n;
    return b;
  };
}

}  // namespace

TEST_CASE("each task learns what its targets show, and its scores say so", "[tasks][trainer]") {
  for (Task task : {Task::segment, Task::multilabel, Task::regress}) {
    INFO(to_string(task));
    CpuBackend backend(2);
    Network net = task_network(task);
    Trainer trainer(net, backend, memory::host_resource(), adamw(16));
    const TaskData train(task, 256, 3), test(task, 64, 99);
    const EvalResult before = trainer.evaluate(batches_of(test, 32));
    for (int epoch = 0; epoch < 10; ++epoch)
      for (int first = 0; first < train.samples; first += 16) trainer.train_step(train.batch(first, 16));
    const EvalResult after = trainer.evaluate(batches_of(test, 32));
    CHECK(after.samples == 64);
    CHECK(after.loss < 0.5 * before.loss);
    CHECK(after.scores.task == task);
    if (task == Task::segment) {
      // Through two 3x3 convolutions rows 2 to 5 see no padding: their half of the image shows only
      // where the quadrants in view differ, so about 0.9 is as far as this network gets.
      CHECK(after.accuracy > 0.88);
      CHECK(after.scores.pixel_accuracy == Approx(after.accuracy).epsilon(1e-5));
      CHECK(after.scores.iou.size() == 3);
      CHECK(after.scores.mean_iou > 0.7);
    } else if (task == Task::multilabel) {
      CHECK(after.accuracy > 0.9);
      CHECK(after.scores.mean_f1 > 0.85);
      CHECK(after.scores.mean_average_precision > 0.9);
    } else {
      CHECK(after.accuracy == 0);
      CHECK(after.scores.mae.size() == 2);
      CHECK(after.scores.mean_mae < 0.05);
      CHECK(after.scores.mean_rmse >= after.scores.mean_mae);
    }
    // The headline figures, by name, for a line, a JSON line and a watched metric.
    CHECK(headline_scores(after.scores).size() == 2);
    CHECK_FALSE(describe_scores(after.scores).empty());
  }
}

TEST_CASE("a task's step gives the same parameters at any micro-batch", "[tasks][trainer][accumulate]") {
  for (Task task : {Task::segment, Task::multilabel, Task::regress}) {
    INFO(to_string(task));
    const TaskData data(task, 48, 5);
    auto train = [&](int micro_batch) {
      CpuBackend backend(1);
      Network net = task_network(task);
      TrainerOptions o = cnn::testing::constant_sgd(16);
      o.micro_batch = micro_batch;
      Trainer trainer(net, backend, memory::host_resource(), o);
      std::vector<double> losses;
      for (int first = 0; first < data.samples; first += 16) losses.push_back(trainer.train_step(data.batch(first, 16)).loss);
      return std::make_pair(trainer.parameters().download(), losses);
    };
    const auto [whole, whole_losses] = train(16);
    const auto [parts, part_losses] = train(4);
    CHECK(relative_error(whole, parts) < 1e-5);
    for (std::size_t s = 0; s < whole_losses.size(); ++s) CHECK(whole_losses[s] == Approx(part_losses[s]).epsilon(1e-5));
  }
}

TEST_CASE("a predictor evaluates a task as the trainer does", "[tasks][inference]") {
  for (Task task : {Task::segment, Task::multilabel, Task::regress}) {
    INFO(to_string(task));
    CpuBackend backend(2);
    Network net = task_network(task);
    Trainer trainer(net, backend, memory::host_resource(), adamw(16));
    const TaskData train(task, 64, 7), test(task, 40, 8);
    for (int first = 0; first < train.samples; first += 16) trainer.train_step(train.batch(first, 16));
    const EvalResult trained = trainer.evaluate(batches_of(test, 20));
    const std::vector<float> params = trainer.parameters().download();

    InferenceOptions io;
    io.max_batch = 20;
    Predictor predictor(net, backend, memory::host_resource(), io);
    predictor.parameters().upload(ParameterStore::Block::parameters, 0, params.size(), params.data());
    const EvalResult predicted = predictor.evaluate(batches_of(test, 20));
    CHECK(predicted.loss == Approx(trained.loss).epsilon(1e-5));
    CHECK(predicted.accuracy == Approx(trained.accuracy).epsilon(1e-5));
    const auto a = headline_scores(trained.scores), b = headline_scores(predicted.scores);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].second == Approx(b[i].second).epsilon(1e-5));
    // Its outputs: a segmentation's are a class score a pixel.
    std::vector<float> out(static_cast<std::size_t>(3) * net.output_shape().elements());
    predictor.logits(test.images.data(), 3, out.data());
    CHECK(std::isfinite(out.back()));
  }
}

TEST_CASE("a task refuses a network and targets that do not suit it", "[tasks][trainer]") {
  CpuBackend backend(1);
  SECTION("a segmentation's output must be [K, H, W] at the input's size") {
    Network net = parse_network("conv 4 3\n", kImage, 0);  // 6x6, not 8x8
    LossOptions loss;
    loss.task = Task::segment;
    net.set_loss(loss);
    CHECK_THROWS_WITH(Trainer(net, backend, memory::host_resource(), adamw(4)),
                      Catch::Contains("[classes, 8, 8]") && Catch::Contains("4x6x6"));
  }
  SECTION("weights of another count, a smoothing out of range") {
    Network net = task_network(Task::segment);
    LossOptions loss = net.loss();
    loss.class_weights = {1, 2};
    net.set_loss(loss);
    CHECK_THROWS_AS(Trainer(net, backend, memory::host_resource(), adamw(4)), ConfigError);
    Network classifier = parse_network("flatten\ndense 3\n", kImage, 3);
    LossOptions smoothing;
    smoothing.label_smoothing = 1.5f;
    classifier.set_loss(smoothing);
    CHECK_THROWS_WITH(Trainer(classifier, backend, memory::host_resource(), adamw(4)), Catch::Contains("smoothing"));
  }
  SECTION("a mask value that is not a class, a multi-label value outside [0, 1], a regression's NaN") {
    for (Task task : {Task::segment, Task::multilabel, Task::regress}) {
      Network net = task_network(task);
      Trainer trainer(net, backend, memory::host_resource(), adamw(4));
      TaskData data(task, 4, 1);
      if (task == Task::segment) data.masks[5] = 7;
      else data.values[1] = task == Task::multilabel ? 2.0f : std::nanf("");
      CHECK_THROWS_AS(trainer.train_step(data.batch(0, 4)), DataError);
      Batch labelled = data.batch(0, 4);
      labelled.targets = nullptr;
      CHECK_THROWS_WITH(trainer.train_step(labelled), Catch::Contains("without"));
    }
  }
}

TEST_CASE("the plan counts a segmentation's masks in the input slots", "[tasks][plan]") {
  CpuBackend backend(1);
  Network net = task_network(Task::segment);
  Network classifier = parse_network("conv 8 3 pad=1\nrelu\nconv 8 3 pad=1\nrelu\nconv 3 1\n", kImage, 0);
  CHECK(net.target_bytes() == 64);
  CHECK(classifier.target_bytes() == 4);
  // The target slot holds a mask of 64 bytes a sample instead of a label of 4, for the whole step.
  const StepPlan masks = plan_step(net, backend, 8, true, std::size_t{1} << 20);
  const StepPlan labels = plan_step(classifier, backend, 8, true, std::size_t{1} << 20);
  CHECK(masks.requests[static_cast<std::size_t>(masks.labels)].bytes == 8u * 64u);
  CHECK(labels.requests[static_cast<std::size_t>(labels.labels)].bytes == 8u * 4u);
  // And the input stager's packed copy, where copies overlap compute, counts them too.
  TrainerOptions o = adamw(8);
  o.micro_batch = 8;
  const MemoryBreakdown planned = BatchPlanner(net, backend, planning_options(o, net, backend)).breakdown(8);
  CHECK(planned.arena_bytes >= masks.arena_bytes());
}

TEST_CASE("a task's training step and evaluation make no allocation", "[tasks][trainer][memory]") {
  for (Task task : {Task::segment, Task::multilabel, Task::regress}) {
    INFO(to_string(task));
    CpuBackend backend(2);
    Network net = task_network(task);
    TrainerOptions o = adamw(16);
    o.micro_batch = 8;
    Trainer trainer(net, backend, memory::host_resource(), o);
    const TaskData data(task, 64, 4);
    trainer.train_step(data.batch(0, 16));  // warm-up: lazily built thread pools
    const long before = testing::heap_allocations();
    for (int first = 16; first < 64; first += 16) trainer.train_step(data.batch(first, 16));
    CHECK(testing::heap_allocations() == before);
  }
}

TEST_CASE("two ranks train and evaluate a task as one process does", "[tasks][trainer][data_parallel]") {
  for (Task task : {Task::segment, Task::multilabel, Task::regress}) {
    INFO(to_string(task));
    const TaskData train(task, 64, 12), test(task, 32, 13);
    TrainerOptions o = cnn::testing::constant_sgd(16);
    o.micro_batch = 8;
    // One process, at the micro-batch a rank's share runs.
    CpuBackend backend(1);
    Network net = task_network(task);
    Trainer one(net, backend, memory::host_resource(), o);
    for (int first = 0; first < train.samples; first += 16) one.train_step(train.batch(first, 16));
    const std::vector<float> whole = one.parameters().download();
    const EvalResult whole_eval = one.evaluate(batches_of(test, 16));

    cnn::testing::ThreadRanks group(2);
    std::vector<std::vector<float>> params(2);
    std::vector<EvalResult> evals(2);
    group.run([&](int r) {
      CpuBackend rank_backend(1);
      Network rank_net = task_network(task);
      TrainerOptions mine = o;
      mine.communicator = &group.rank(r);
      Trainer trainer(rank_net, rank_backend, memory::host_resource(), mine);
      auto share = [&](const TaskData& data, int first, int batch) {
        const RankShare s = share_of_batch(batch, r, 2);
        Batch b = data.batch(first + s.first, s.size);
        b.first = s.first;
        b.global_size = batch;
        return b;
      };
      for (int first = 0; first < train.samples; first += 16) trainer.train_step(share(train, first, 16));
      params[static_cast<std::size_t>(r)] = trainer.parameters().download();
      int next = 0;
      evals[static_cast<std::size_t>(r)] = trainer.evaluate([&]() -> std::optional<Batch> {
        if (next >= test.samples) return std::nullopt;
        const Batch b = share(test, next, 16);
        next += 16;
        return b;
      });
    });
    CHECK(params[0] == params[1]);
    CHECK(relative_error(whole, params[0]) < 1e-5);
    for (const EvalResult& e : evals) {
      CHECK(e.samples == whole_eval.samples);
      CHECK(e.loss == Approx(whole_eval.loss).epsilon(1e-5));
      CHECK(e.accuracy == Approx(whole_eval.accuracy).epsilon(1e-5));
      // The counts add up over the ranks; average precision is each rank's own.
      const auto a = headline_scores(whole_eval.scores), b = headline_scores(e.scores);
      for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].first != "mean_average_precision") CHECK(b[i].second == Approx(a[i].second).epsilon(1e-5));
    }
  }
}

TEST_CASE("an out-of-memory failure during a task's evaluation counts the replayed batch's scores once",
          "[tasks][recovery]") {
  for (Task task : {Task::segment, Task::multilabel}) {
    INFO(to_string(task));
    CpuBackend backend(2);
    cnn::testing::StepBufferStack buffers(memory::host_resource());
    memory::FaultInjectionAdaptor& faults = buffers.faults();
    Network net = task_network(task);
    TrainerOptions o = cnn::testing::constant_sgd(16);
    o.micro_batch = 8;  // two micro-batches a batch
    const TaskData train(task, 64, 21), test(task, 64, 22);
    Trainer trainer(net, backend, buffers.stack(), o);
    int recoveries = 0;
    trainer.on_recovery = [&](const std::string&) { ++recoveries; };
    for (int first = 0; first < train.samples; first += 16) trainer.train_step(train.batch(first, 16));
    const std::uint64_t before = faults.requests_seen();
    const EvalResult clean = trainer.evaluate(batches_of(test, 16));
    const std::uint64_t per_batch = (faults.requests_seen() - before) / 4;
    REQUIRE(per_batch > 1);
    // A request of the third batch's second micro-batch: the first one's scores were counted
    // before the failure, and must not be counted again when the batch is replayed.
    faults.fail_on({faults.requests_seen() + 2 * per_batch + per_batch * 3 / 4});
    const EvalResult replayed = trainer.evaluate(batches_of(test, 16));
    CHECK(faults.injected_failures() == 1);
    CHECK(recoveries == 1);
    CHECK(replayed.samples == clean.samples);
    CHECK(replayed.accuracy == Approx(clean.accuracy).epsilon(1e-6));
    const auto a = headline_scores(clean.scores), b = headline_scores(replayed.scores);
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i].second == Approx(a[i].second).epsilon(1e-6));
  }
}
