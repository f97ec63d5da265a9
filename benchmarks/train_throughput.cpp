// train_throughput: our training speed and memory measured as benchmarks/peers/torch_gpu.py
// measures PyTorch's, and the largest batch a memory budget holds.
//
// Throughput: one synthetic batch (seeded uniform pixels and targets for the network's task: a
// class a pixel for unet), in device memory
// (--synthetic, the default: as torch_gpu.py --data-on-gpu) or in pinned host memory copied in
// every step (--host-batch: as torch_gpu.py's default); warm-up steps, then timed steps
// submitted without waiting (Trainer::submit_step) and drained, the clock read after the
// device has finished. Largest batch (--largest-batch, with --memory-budget): the largest
// micro-batch the plan fits (the synthetic batch staged under the budget too), confirmed by
// training two steps at it and by the trainer refusing one sample more before step 1.
//
// One JSON line per measurement on stdout, appended to --json-out too: "engine": "cnnengine",
// "kind": "throughput" or "largest_batch". On CUDA each line also gives what the driver says the
// process holds on the device beyond a bare CUDA context ("driver_bytes_beyond_context").
//
//   train_throughput --model resnet18 --input 3x32x32 --batch 256 --precision tf32 [--cuda-graph]
//   train_throughput --model resnet18 --input 3x32x32 --largest-batch --memory-budget 2GiB
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <cnnengine/cnnengine.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include "backends/cpu/detail/winograd_conv.hpp"
#include "engine/plan/detail/largest_fitting.hpp"
#include "engine/plan/detail/step_plan.hpp"
#include "engine/train/planning_options.hpp"
#include "memory/buffer.hpp"

#if CNN_BENCH_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

using namespace cnn;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Settings {
  std::string device = "auto", model = "small", input = "1x28x28", precision = "fp32";
  std::string optimizer = "adamw", budget, json_out, algo_cache, recompute = "none";
  int classes = 10, batch = 256, micro_batch = 0, steps = 50, warmup = 10, most = 1 << 16;
  float lr = 1e-3f;
  bool cuda_graph = false, host_batch = false, deterministic = false, fast_start = false, largest = false;
  bool channels_last = false;
  bool no_winograd = false;
};

Shape parse_shape(const std::string& text) {
  int c = 0, h = 0, w = 0;
  char x1 = 0, x2 = 0;
  std::istringstream in(text);
  if (!(in >> c >> x1 >> h >> x2 >> w) || x1 != 'x' || x2 != 'x' || c < 1 || h < 1 || w < 1 || c > 64 || h > 4096 ||
      w > 4096)
    throw ConfigError("--input " + text + ": give CxHxW, e.g. 3x32x32");
  return Shape{c, h, w};
}

// What the driver says the device holds (every process's: the machine runs only this one);
// nothing without CUDA.
std::optional<std::size_t> device_used_bytes() {
#if CNN_BENCH_HAVE_CUDA
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) == cudaSuccess) return total - free;
#endif
  return std::nullopt;
}

std::optional<std::size_t> driver_used_bytes(const Backend& backend) {
  return backend.kind() == DeviceKind::cuda ? device_used_bytes() : std::nullopt;
}

// The device's use with a bare CUDA context and nothing of ours: what "beyond the context" is
// measured from. Made before the backend.
std::optional<std::size_t> bare_context_bytes(const Settings& s) {
#if CNN_BENCH_HAVE_CUDA
  if (s.device != "cpu" && cudaFree(nullptr) == cudaSuccess) return device_used_bytes();
#endif
  (void)s;
  return std::nullopt;
}

// One synthetic batch for the network's task, the same for a seed on every machine: uniform
// pixels and targets as the trainer takes them (base/batch.hpp): uniform labels (classify), a
// class a pixel (segment), 0 or 1 a class (multilabel) or uniform values (regress).
struct SyntheticBatch {
  std::vector<float> images;
  std::vector<unsigned char> targets;  // target_bytes() a sample: an int32 label, or the task's
  int size;
  bool classify;
  SyntheticBatch(const Network& net, int size_) : size(size_), classify(net.task() == Task::classify) {
    std::mt19937 random(1);
    std::uniform_real_distribution<float> pixel(0.f, 1.f);
    std::uniform_int_distribution<std::int32_t> label(0, net.num_classes() - 1);
    images.resize(net.input_shape().elements() * static_cast<std::size_t>(size));
    for (float& v : images) v = pixel(random);
    targets.resize(net.target_bytes() * static_cast<std::size_t>(size));
    auto fill = [&](auto* values, std::size_t count, auto&& value) {
      for (std::size_t i = 0; i < count; ++i) values[i] = value();
    };
    switch (net.task()) {
      case Task::classify:
        fill(reinterpret_cast<std::int32_t*>(targets.data()), targets.size() / sizeof(std::int32_t),
             [&] { return label(random); });
        break;
      case Task::segment:
        fill(targets.data(), targets.size(), [&] { return static_cast<unsigned char>(label(random)); });
        break;
      case Task::multilabel:
      case Task::regress:
        fill(reinterpret_cast<float*>(targets.data()), targets.size() / sizeof(float), [&] {
          return net.task() == Task::multilabel ? static_cast<float>(label(random) % 2) : pixel(random);
        });
        break;
    }
  }
  std::size_t bytes() const { return images.size() * sizeof(float) + targets.size(); }
};

// The batch where the trainer takes it from: its stack's device blocks (--synthetic) or its
// pinned staging (--host-batch), under its budget either way (its room booked in the stack
// before the trainer plans).
class StagedBatch {
 public:
  StagedBatch(Trainer& trainer, Backend& backend, const SyntheticBatch& batch, bool on_device)
      : images_(on_device ? trainer.memory_stack().blocks() : trainer.memory_stack().staging(),
                batch.images.size() * sizeof(float), memory::Category::data_staging),
        targets_(on_device ? trainer.memory_stack().blocks() : trainer.memory_stack().staging(), batch.targets.size(),
                 memory::Category::data_staging),
        classify_(batch.classify), on_device_(on_device), size_(batch.size) {
    backend.copy_to_device(batch.images.data(), images_.data(), images_.bytes());
    backend.copy_to_device(batch.targets.data(), targets_.data(), batch.targets.size());
  }
  Batch batch() const {
    Batch b{static_cast<const float*>(images_.data()), nullptr, size_};
    if (classify_) b.labels = static_cast<const std::int32_t*>(targets_.data());
    else b.targets = targets_.data();
    b.on_device = on_device_;
    return b;
  }

 private:
  memory::Buffer images_, targets_;
  bool classify_, on_device_;
  int size_;
};

TrainerOptions trainer_options(const Settings& s, int batch, int micro_batch) {
  TrainerOptions t;
  t.batch = batch;
  t.micro_batch = micro_batch;
  t.memory_budget = s.budget.empty() ? 0 : memory::parse_bytes(s.budget);
  t.capture_graphs = s.cuda_graph ? GraphCapture::always : GraphCapture::never;  // each mode measured as asked
  t.recompute = parse_recompute_policy(s.recompute);
  t.optimizer.kind = parse_optimizer_kind(s.optimizer);
  t.optimizer.learning_rate = s.lr;
  t.schedule.kind = ScheduleKind::constant;
  return t;
}

json base_record(const Settings& s, const Backend& backend) {
  // A training step's images: channels last where the backend and every layer take them (Note
  // [Channels-last images]), else NCHW (PyTorch's "contiguous").
  const Network net = make_network(s.model, parse_shape(s.input), s.classes);
  const char* format = channels_last_step(net, backend, true) ? "channels_last" : "contiguous";
  return {{"engine", "cnnengine"}, {"model", s.model}, {"input", s.input}, {"precision", s.precision},
          {"memory_format", format}, {"device", backend.description()}, {"deterministic", s.deterministic},
          {"recompute", s.recompute}};
}

void add_driver_bytes(json& record, const Backend& backend, std::optional<std::size_t> context) {
  const std::optional<std::size_t> used = driver_used_bytes(backend);
  if (used && context) record["driver_bytes_beyond_context"] = *used - *context;
  if (used) record["driver_bytes"] = *used;
  if (context) record["driver_bare_context_bytes"] = *context;
}

json throughput(const Settings& s, Backend& backend, const Shape& sample, std::optional<std::size_t> context) {
  Network net = make_network(s.model, sample, s.classes);
  const SyntheticBatch data(net, s.batch);
  const TrainerOptions t = trainer_options(s, s.batch, s.micro_batch);
  memory::MemoryStack stack = memory_stack_for(backend, t);
  stack.book_staging(data.bytes());  // the batch staged after the trainer plans
  Trainer trainer(net, backend, stack, t);
  const StagedBatch staged(trainer, backend, data, !s.host_batch);
  const Batch batch = staged.batch();
  // Where the libraries' own device memory (beyond what we reserve) appears: at start-up and
  // planning (handles, the algorithm search), or with the kernels the first step loads.
  backend.synchronize();
  const std::optional<std::size_t> used_after_plan = driver_used_bytes(backend);

  auto start = Clock::now();
  trainer.submit_step(batch);
  trainer.drain();
  const double first_step = std::chrono::duration<double>(Clock::now() - start).count();
  const std::optional<std::size_t> used_after_first_step = driver_used_bytes(backend);
  for (int i = 1; i < s.warmup; ++i) trainer.submit_step(batch);
  trainer.drain();

  long waits = 0;
  double loss = 0;
  start = Clock::now();
  // Reports come with the next step's submission where copies overlap compute, at once elsewhere.
  auto take = [&](const std::optional<StepReport>& r) {
    if (!r) return;
    waits += r->host_waits;
    loss = r->loss;
  };
  for (int i = 0; i < s.steps; ++i) take(trainer.submit_step(batch));
  take(trainer.drain());
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  json r = base_record(s, backend);
  r.update({{"kind", "throughput"}, {"mode", s.cuda_graph ? "graph" : "eager"},
            {"data", s.host_batch ? "pinned host -> device each step" : "on device"}, {"batch", s.batch},
            {"micro_batch", trainer.micro_batch()}, {"steps", s.steps},
            {"images_per_second", s.steps * s.batch / seconds}, {"step_ms", 1e3 * seconds / s.steps},
            {"first_step_seconds", first_step}, {"host_waits_per_step", static_cast<double>(waits) / s.steps},
            {"final_loss", loss}, {"graph_replays", trainer.graph_replays()},
            {"planned_bytes", trainer.memory().total()}, {"values", to_string(trainer.memory().values)},
            {"in_place_layers", trainer.memory().in_place_layers},
            {"fused_batchnorm_relu", trainer.memory().fused_relus},
            {"fused_batchnorm_add_relu", trainer.memory().fused_adds},
            {"reserved_bytes", trainer.memory_stack().statistics().peak_bytes + backend.library_reserved_bytes()},
            {"library_reserved_bytes", backend.library_reserved_bytes()}, {"determinism", backend.determinism_report()}});
  add_driver_bytes(r, backend, context);
  if (used_after_plan) r["driver_bytes_after_plan"] = *used_after_plan;
  if (used_after_first_step) r["driver_bytes_after_first_step"] = *used_after_first_step;
  return r;
}

json largest_batch(const Settings& s, Backend& backend, const Shape& sample, std::optional<std::size_t> context) {
  if (s.budget.empty()) throw ConfigError("--largest-batch needs --memory-budget");
  const std::size_t sample_bytes =
      sample.elements() * sizeof(float) + make_network(s.model, sample, s.classes).target_bytes();
  // The largest batch that trains as one micro-batch, with its own staging booked (the batch's
  // bytes grow with it; a batch split into micro-batches would plan the next one's copy ahead
  // too): the planners' search (largest_fitting_micro_batch) over the plans the run below
  // makes. A batch whose tensors the backend cannot hold (BatchPlanner refuses it) does not fit.
  auto fits = [&](int batch) {
    Network net = make_network(s.model, sample, s.classes);
    BatchPlanOptions planning = planning_options(trainer_options(s, batch, batch), net, backend);
    planning.account.add_loader_staging(sample_bytes * static_cast<std::size_t>(batch));
    try {
      return BatchPlanner(net, backend, planning).breakdown(batch).fits();
    } catch (const ConfigError&) {
      return false;
    }
  };
  const int largest = largest_fitting_micro_batch(1, s.most, fits);
  json r = base_record(s, backend);
  r.update({{"kind", "largest_batch"}, {"budget", s.budget}, {"budget_bytes", memory::parse_bytes(s.budget)},
            {"largest_batch", largest}, {"searched_up_to", s.most}});
  if (largest == 0) return r;

  // Confirmed by training at it: two steps, within the budget.
  const std::size_t staged_bytes = sample_bytes * static_cast<std::size_t>(largest);
  {
    Network net = make_network(s.model, sample, s.classes);
    const SyntheticBatch data(net, largest);
    const TrainerOptions t = trainer_options(s, largest, largest);
    memory::MemoryStack stack = memory_stack_for(backend, t);
    stack.book_staging(staged_bytes);  // the batch staged after the trainer plans
    Trainer trainer(net, backend, stack, t);
    const StagedBatch staged(trainer, backend, data, /*on_device=*/false);
    std::optional<StepReport> last;
    for (int i = 0; i < 2; ++i)
      if (auto report = trainer.submit_step(staged.batch())) last = report;
    if (auto report = trainer.drain()) last = report;
    r["trained_steps"] = last ? last->step : 0;
    r["trained_loss"] = last ? last->loss : 0.0;
    r["planned_bytes"] = trainer.memory().total();
    r["values"] = to_string(trainer.memory().values);
    r["reserved_bytes"] = trainer.memory_stack().statistics().peak_bytes + backend.library_reserved_bytes();
    add_driver_bytes(r, backend, context);
  }
  // ... and by the trainer refusing one sample more, before step 1.
  Network net = make_network(s.model, sample, s.classes);
  try {
    const TrainerOptions t = trainer_options(s, largest + 1, largest + 1);
    memory::MemoryStack stack = memory_stack_for(backend, t);
    stack.book_staging(staged_bytes + sample_bytes);  // the batch staged after the trainer plans
    Trainer trainer(net, backend, stack, t);
    r["one_more_refused"] = false;
  } catch (const BudgetTooSmall& e) {
    r["one_more_refused"] = true;
    r["one_more_refusal"] = std::string(e.what()).substr(0, std::string(e.what()).find('\n'));
  }
  return r;
}

// One line on stdout, and appended to --json-out.
void write_record(const Settings& s, const json& record) {
  std::cout << record.dump() << std::endl;
  if (s.json_out.empty()) return;
  std::ofstream out(s.json_out, std::ios::app);
  out << record.dump() << "\n";
  if (!out) throw Error("writing " + s.json_out + " failed");
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"train_throughput: our training throughput and memory, measured as the PyTorch peer measures its own"};
  app.add_option("--device", s.device)->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--model", s.model, "a preset or a network text file");
  app.add_option("--input", s.input, "CxHxW of one sample");
  app.add_option("--classes", s.classes)->check(CLI::Range(2, 100000));
  app.add_option("--batch", s.batch)->check(CLI::Range(1, 1 << 20));
  app.add_option("--micro-batch", s.micro_batch, "default: the largest that fits")->check(CLI::Range(0, 1 << 20));
  app.add_option("--precision", s.precision)->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
  app.add_option("--optimizer", s.optimizer)->check(CLI::IsMember({"adamw", "sgd"}));
  app.add_option("--lr", s.lr);
  app.add_option("--steps", s.steps, "timed steps")->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", s.warmup, "steps before the clock starts")->check(CLI::Range(1, 1000000));
  app.add_option("--memory-budget", s.budget);
  app.add_option("--most", s.most, "--largest-batch: the largest batch tried")->check(CLI::Range(1, 1 << 24));
  app.add_option("--algo-cache", s.algo_cache, "CUDA: the measured-algorithm cache file (default: none)");
  app.add_option("--json-out", s.json_out, "append the JSON lines here too");
  app.add_flag("--cuda-graph", s.cuda_graph);
  app.add_option("--recompute", s.recompute, "during backward, recompute instead of keeping (train_images' --recompute)")
      ->check(CLI::IsMember({"none", "cheap", "auto"}));
  bool synthetic_asked = false;  // the default: said for clarity
  CLI::Option* synthetic =
      app.add_flag("--synthetic", synthetic_asked,
                   "one synthetic batch in device memory, moved device to device into each step (the default)");
  app.add_flag("--host-batch", s.host_batch, "the synthetic batch in pinned host memory, copied in every step")
      ->excludes(synthetic);
  app.add_flag("--deterministic", s.deterministic);
  app.add_flag("--channels-last", s.channels_last, "CUDA in bf16 and fp16: images channels last between layers");
  app.add_flag("--fast-start", s.fast_start, "CUDA: convolution algorithms by heuristics");
  app.add_flag("--largest-batch", s.largest, "the largest batch --memory-budget holds, confirmed by running it");
  app.add_flag("--no-winograd", s.no_winograd, "CPU: 3x3 convolutions at stride 1 by im2col + GEMM (a comparison)");
  CLI11_PARSE(app, argc, argv);
  try {
    std::optional<cpu::WinogradOff> winograd_off;
    if (s.no_winograd) winograd_off.emplace();
    const Shape sample = parse_shape(s.input);
    const std::optional<std::size_t> context = bare_context_bytes(s);
    DeviceRequest request;
    request.device = parse_device(s.device);
    request.precision = parse_precision(s.precision);
    request.deterministic = s.deterministic;
    request.fast_start = s.fast_start;
    request.channels_last = s.channels_last;
    request.algorithm_cache = s.algo_cache;
    DeviceChoice device = select_device(request);
    const std::optional<std::size_t> used_after_backend = driver_used_bytes(*device.backend);
    json record = s.largest ? largest_batch(s, *device.backend, sample, context)
                            : throughput(s, *device.backend, sample, context);
    if (used_after_backend) record["driver_bytes_after_backend"] = *used_after_backend;
    if (s.no_winograd) record["winograd"] = false;
    write_record(s, record);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "train_throughput: " << e.what() << "\n";
    try {  // the report lists what failed, beside what was measured
      write_record(s, json{{"engine", "cnnengine"}, {"kind", "error"}, {"model", s.model}, {"input", s.input},
                           {"precision", s.precision}, {"mode", s.cuda_graph ? "graph" : "eager"},
                           {"largest_batch", s.largest}, {"error", e.what()}});
    } catch (const std::exception& again) {
      std::cerr << "train_throughput: " << again.what() << "\n";
    }
    return 1;
  }
}
