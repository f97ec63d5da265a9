// cpu_profile: where a CPU training run spends its time, epoch by epoch.
//
// Trains a preset on an IDX data set (Fashion-MNIST) as train_images does, through a backend
// that times every kernel call, and prints per epoch: images/s, the seconds and calls of each
// kind of kernel, the convolutions' GFLOP/s, and the subnormal floats in the parameter,
// gradient and optimizer-state blocks and (sampled steps) in what each kernel wrote. With
// --gemm-peak it first measures the SGEMM peak of our own product (backends/cpu/detail/gemm) on
// large square matrices, one thread and all threads, and reports the convolutions' share of it.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include <cnnengine/cnnengine.hpp>
#include "timing_backend.hpp"

namespace {

using namespace cnn;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// GFLOP/s of C[n x n] = A B with our gemm: the best of `reps` runs, on `threads` threads.
double gemm_gflops(int threads, std::size_t n, int reps) {
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (std::size_t i = 0; i < n * n; ++i) {
    a[i] = static_cast<float>(i % 13) * 0.01f;
    b[i] = static_cast<float>(i % 7) * 0.02f;
  }
  const std::size_t floats = threads == 1 ? cpu::gemm_packing_floats(n, n, n) : cpu::parallel_gemm_packing_floats(threads, n, n, n);
  float* packing = static_cast<float*>(std::aligned_alloc(64, cpu::aligned_floats(floats) * sizeof(float)));
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    if (threads == 1)
      cpu::gemm(n, n, n, {a.data(), n}, {b.data(), n}, {c.data(), n}, {packing, floats});
    else
      cpu::parallel_gemm(threads, n, n, n, {a.data(), n}, {b.data(), n}, {c.data(), n}, {packing, floats});
    best = std::max(best, 2.0 * static_cast<double>(n) * n * n / seconds_since(start) / 1e9);
  }
  std::free(packing);
  return best;
}

struct BlockCount {
  std::size_t floats = 0, subnormal = 0, zero = 0;
};
BlockCount scan(const Tensor& t) {
  BlockCount c;
  c.floats = t.elements();
  for (std::size_t i = 0; i < c.floats; ++i) {
    const int k = std::fpclassify(t.data[i]);
    c.subnormal += k == FP_SUBNORMAL;
    c.zero += k == FP_ZERO;
  }
  return c;
}

// The optimizer update on the trained state, once as it is and once with its subnormals set to
// zero (what a flushing update would have left), alternately; each run starts from the same
// copy. Best of `reps` milliseconds each.
json time_update(CpuBackend& cpu, Trainer& trainer, int reps) {
  ParameterStore& params = trainer.parameters();
  const int slots = trainer.optimizer().state_slots();
  std::vector<Tensor> blocks{params.trainable(), params.gradients()};
  for (int s = 0; s < slots; ++s) blocks.push_back(params.optimizer_slot(s));
  std::vector<std::vector<float>> as_trained, flushed;
  std::size_t subnormal = 0;
  for (const Tensor& b : blocks) {
    as_trained.emplace_back(b.data, b.data + b.elements());
    flushed.push_back(as_trained.back());
    for (float& v : flushed.back())
      if (std::fpclassify(v) == FP_SUBNORMAL) v = 0.f, ++subnormal;
  }
  auto restore = [&](const std::vector<std::vector<float>>& from) {
    for (std::size_t i = 0; i < blocks.size(); ++i) std::copy(from[i].begin(), from[i].end(), blocks[i].data);
  };
  double best[2] = {1e9, 1e9};
  for (int r = 0; r < reps; ++r)
    for (int which = 0; which < 2; ++which) {
      restore(which == 0 ? as_trained : flushed);
      const auto start = Clock::now();
      if (slots == 2)
        cpu.adamw_update(blocks[0], blocks[1], blocks[2], blocks[3], AdamWConfig{}, 1e-3f, 1000, nullptr);
      else
        cpu.sgd_update(blocks[0], blocks[1], slots ? blocks[2] : Tensor{}, SgdConfig{}, 1e-3f, nullptr);
      best[which] = std::min(best[which], seconds_since(start) * 1e3);
    }
  restore(as_trained);
  std::printf("\noptimizer update on the trained state (%zu subnormal floats): %.3f ms; the same with them zero: %.3f ms "
              "(best of %d, alternately)\n",
              subnormal, best[0], best[1], reps);
  return {{"subnormal_floats", subnormal}, {"ms_as_trained", best[0]}, {"ms_subnormals_zeroed", best[1]}, {"reps", reps}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cpu_profile: per-epoch kernel times and subnormal counts of a CPU training run"};
  std::string data_dir = "/usr/share/datasets/fashion-mnist", model = "small", optimizer = "adamw", json_out;
  std::string precision = "fp32";
  int epochs = 3, batch = 64, threads = 2, count_every = 50, gemm_reps = 10;
  float lr = 0.001f;
  std::size_t limit = 0;
  std::uint64_t seed = 1;
  int update_reps = 0;
  bool gemm_peak = false, no_train = false;
  app.add_option("--data", data_dir);
  app.add_option("--model", model);
  app.add_option("--epochs", epochs);
  app.add_option("--batch", batch);
  app.add_option("--threads", threads);
  app.add_option("--precision", precision, "fp32, or bf16 (convolutions' and dense layers' products)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--optimizer", optimizer)->check(CLI::IsMember({"sgd", "adamw"}));
  app.add_option("--lr", lr);
  app.add_option("--seed", seed);
  app.add_option("--limit", limit, "train on the first N samples only");
  app.add_option("--count-every", count_every, "count the subnormals kernels write every N steps (0: never)");
  app.add_flag("--gemm-peak", gemm_peak, "measure the SGEMM peak of our gemm first");
  app.add_option("--gemm-reps", gemm_reps);
  app.add_flag("--no-train", no_train, "only the SGEMM peak");
  app.add_option("--update-reps", update_reps,
                 "after training, time the optimizer update on the state as trained and on the same state with its "
                 "subnormals set to zero, alternately, best of N");
  app.add_option("--json-out", json_out);
  CLI11_PARSE(app, argc, argv);

  json report = {{"benchmark", "cpu_profile"}, {"model", model}, {"optimizer", optimizer}, {"batch", batch},
                 {"threads", threads}, {"lr", lr}, {"seed", seed}, {"instruction_set", CpuBackend::instruction_set()},
                 {"precision", precision}};
  CpuBackend cpu(threads, parse_precision(precision));
  std::cout << cpu.description() << "\n";
  report["backend"] = cpu.description();

  if (gemm_peak || no_train) {
    json peak = json::object();
    for (int t : {1, threads}) {
      double best = 0;
      for (std::size_t n : {512, 1024, 2048}) best = std::max(best, gemm_gflops(t, n, gemm_reps));
      peak[std::to_string(t)] = best;
      std::printf("SGEMM peak (our gemm, square 512..2048, best of %d): %d thread%s %.1f GFLOP/s\n", gemm_reps, t,
                  t == 1 ? "" : "s", best);
      if (t == threads) break;
    }
    report["sgemm_peak_gflops"] = peak;
  }
  if (no_train) {
    if (!json_out.empty()) std::ofstream(json_out) << report.dump(2) << "\n";
    return 0;
  }

  data::DatasetSplits splits = data::open_dataset(data_dir, {}, seed);
  const data::SampleShape shape = splits.train->shape();
  Network network = make_network(model, Shape{shape.channels, shape.height, shape.width}, splits.train->num_classes());
  bench::TimingBackend backend(cpu);
  data::LoaderOptions train_options;
  train_options.batch = batch;
  train_options.seed = seed;
  data::LoaderOptions test_options = train_options;
  test_options.shuffle = false;
  data::Loader train_loader(*splits.train, train_options, backend.staging_memory());
  data::Loader test_loader(*splits.test, test_options, backend.staging_memory());
  const std::size_t batches = limit ? (limit + static_cast<std::size_t>(batch) - 1) / static_cast<std::size_t>(batch)
                                    : train_loader.batches_per_epoch();

  TrainerOptions t;
  t.batch = batch;
  t.seed = seed;
  t.total_steps = static_cast<long>(batches) * epochs;
  t.optimizer.kind = parse_optimizer_kind(optimizer);
  t.optimizer.learning_rate = lr;
  Trainer trainer(network, backend, t);
  const int slots = trainer.optimizer().state_slots();

  json epochs_out = json::array();
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    backend.totals = {};
    backend.best_conv.clear();
    train_loader.start_epoch(epoch);
    std::size_t seen = 0, step = 0;
    const auto start = Clock::now();
    while (step < batches) {
      auto b = train_loader.next();
      if (!b) break;
      backend.count_subnormals = count_every > 0 && step % static_cast<std::size_t>(count_every) == 0;
      trainer.train_step(*b);
      seen += static_cast<std::size_t>(b->size);
      ++step;
    }
    backend.count_subnormals = false;
    const double train_seconds = seconds_since(start);
    const bench::Totals train_totals = backend.totals;
    // One step's convolutions at their fastest: the best call of each pass and size that ran in
    // every step (not the epoch's smaller last batch).
    double best_flops = 0, best_seconds = 0;
    for (const auto& [key, value] : backend.best_conv)
      if (value.second > 1) best_flops += key.second, best_seconds += value.first;
    const double best_conv_gflops = best_seconds > 0 ? best_flops / best_seconds / 1e9 : 0;

    json blocks = json::object();
    auto block = [&](const char* name, const Tensor& x) {
      const BlockCount c = scan(x);
      blocks[name] = {{"floats", c.floats}, {"subnormal", c.subnormal}, {"zero", c.zero}};
      return c;
    };
    ParameterStore& params = trainer.parameters();
    block("parameters", params.trainable());
    block("gradients", params.gradients());
    for (int s = 0; s < slots; ++s) block(slots == 1 ? "velocity" : (s == 0 ? "adam_m" : "adam_v"), params.optimizer_slot(s));
    // Where the first optimizer slot's subnormals are: per parameter tensor (same offsets as
    // in the parameter block).
    json by_tensor = json::object();
    for (int id = 1; slots > 0 && id < network.size(); ++id) {
      const auto tensors = params.params(id);
      for (std::size_t k = 0; k < tensors.size() && k < params.grads(id).size(); ++k) {
        const std::size_t offset = static_cast<std::size_t>(tensors[k].data - params.trainable().data);
        const BlockCount c = scan(Tensor{params.optimizer_slot(0).data + offset, tensors[k].shape});
        by_tensor[network.node(id).name + "." + std::to_string(k)] = {{"floats", c.floats}, {"subnormal", c.subnormal}};
      }
    }

    const auto eval_start = Clock::now();
    test_loader.start_epoch(1);
    const EvalResult test = trainer.evaluate([&] { return test_loader.next(); });
    const double eval_seconds = seconds_since(eval_start);

    double conv_seconds = 0, conv_flops = 0, kernel_seconds = 0;
    json kernels = json::object();
    for (std::size_t k = 0; k < bench::kKernels; ++k) {
      const bench::KernelTotals& s = train_totals[k];
      if (!s.calls) continue;
      kernel_seconds += s.seconds;
      if (bench::is_conv(k)) conv_seconds += s.seconds, conv_flops += s.flops;
      kernels[bench::kernel_name(k)] = {{"calls", s.calls}, {"seconds", s.seconds}, {"gflops", s.flops / 1e9},
                                        {"written_counted", s.written}, {"subnormal_written", s.subnormal}};
    }
    const double ips = static_cast<double>(seen) / train_seconds;
    std::printf("\nepoch %d: %.1f images/s (%.2f s training, %.2f s evaluation), test accuracy %.4f\n", epoch, ips,
                train_seconds, eval_seconds, test.accuracy);
    std::printf("  %-24s %7s %9s %8s %12s %12s\n", "kernel", "calls", "seconds", "share", "subnormal", "of written");
    for (std::size_t k = 0; k < bench::kKernels; ++k) {
      const bench::KernelTotals& s = train_totals[k];
      if (!s.calls) continue;
      std::printf("  %-24s %7ld %9.3f %7.1f%% %12zu %12zu\n", bench::kernel_name(k), s.calls, s.seconds,
                  100.0 * s.seconds / train_seconds, s.subnormal, s.written);
    }
    std::printf("  outside kernels (loader wait, trainer): %.3f s\n", train_seconds - kernel_seconds);
    std::printf("  convolutions: %.1f GFLOP/s over the epoch, %.1f GFLOP/s in their fastest calls\n",
                conv_flops / conv_seconds / 1e9, best_conv_gflops);
    for (auto& [name, c] : blocks.items())
      std::printf("  block %-12s %9zu floats: %8zu subnormal, %8zu zero\n", name.c_str(), c["floats"].get<std::size_t>(),
                  c["subnormal"].get<std::size_t>(), c["zero"].get<std::size_t>());
    for (auto& [name, c] : by_tensor.items())
      if (c["subnormal"].get<std::size_t>())
        std::printf("    slot 0 of %-14s %9zu floats: %8zu subnormal\n", name.c_str(), c["floats"].get<std::size_t>(),
                    c["subnormal"].get<std::size_t>());
    std::fflush(stdout);
    json e = {{"epoch", epoch},         {"images_per_second", ips},    {"train_seconds", train_seconds},
              {"eval_seconds", eval_seconds}, {"test_accuracy", test.accuracy}, {"kernels", kernels},
              {"conv_gflops", conv_flops / conv_seconds / 1e9}, {"conv_seconds", conv_seconds},
              {"conv_gflops_fastest_calls", best_conv_gflops},
              {"blocks", blocks},
              {"slot0_subnormal_by_tensor", by_tensor}};
    if (report.contains("sgemm_peak_gflops")) {
      const double peak = report["sgemm_peak_gflops"][std::to_string(threads)].get<double>();
      e["conv_fraction_of_sgemm_peak"] = conv_flops / conv_seconds / 1e9 / peak;
      e["conv_fraction_of_sgemm_peak_fastest_calls"] = best_conv_gflops / peak;
      std::printf("  convolutions reach %.1f%% of the %d-thread SGEMM peak (%.1f GFLOP/s) over the epoch, %.1f%% in "
                  "their fastest calls\n",
                  100.0 * conv_flops / conv_seconds / 1e9 / peak, threads, peak, 100.0 * best_conv_gflops / peak);
    }
    epochs_out.push_back(e);
  }
  report["epochs"] = epochs_out;
  if (update_reps > 0) report["optimizer_update"] = time_update(cpu, trainer, update_reps);
  if (!json_out.empty()) std::ofstream(json_out) << report.dump(2) << "\n";
  trainer.finish();
  return 0;
}
