// train_images: train a convolutional network on an image folder or IDX files (Fashion-MNIST).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sys/resource.h>

#include "cnnengine/cnnengine.hpp"
#include "limited_dataset.hpp"
#include "metrics_file.hpp"
#include "options.hpp"
#include "plan_report.hpp"
#include "progress.hpp"

namespace {

using namespace cnn;
using app::Options;
using Clock = std::chrono::steady_clock;

HostBatch to_host_batch(const data::BatchView& b) { return HostBatch{b.images, b.labels, b.size}; }

// CPU seconds of the whole process (every thread), user and system: a machine shared with other
// work stretches an epoch's wall time, much less the CPU time it took.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// JSON null where there is no test set: 0 would read as a measured accuracy.
nlohmann::json test_value(bool has_test, double value) { return has_test ? nlohmann::json(value) : nlohmann::json(); }

int run(const Options& o) {
  if (o.doctor) {
    std::cout << environment_report();
    return 0;
  }
  if (!o.save.empty() && !o.plan_only) check_save_path(o.save);  // before training, not after an epoch
  const std::size_t budget = o.budget.empty() ? 0 : memory::parse_bytes(o.budget);

  data::SampleShape target;
  if (o.image_size) target.height = target.width = o.image_size;
  target.channels = o.channels;  // 0: as the first image is
  data::DatasetSplits splits = data::open_dataset(o.data, target, o.seed);
  std::unique_ptr<data::Dataset> limited;
  const data::Dataset* train_set = splits.train.get();
  if (o.limit) {
    limited = std::make_unique<app::LimitedDataset>(*splits.train, o.limit);
    train_set = limited.get();
  }
  const data::SampleShape shape = train_set->shape();
  const bool has_test = splits.test->size() > 0;
  std::cout << "data: " << train_set->description() << "\n      test: "
            << (has_test ? splits.test->description() : "none (the test split is empty): no evaluation") << "\n";

  Network network = make_network(o.model, Shape{shape.channels, shape.height, shape.width}, train_set->num_classes());
  DeviceRequest request;
  request.device = parse_device(o.device);
  request.threads = o.threads;
  request.tf32 = o.precision == "tf32";
  request.fast_start = o.fast_start;
  DeviceChoice device = select_device(request);
  Backend& backend = *device.backend;
  std::cout << "device: " << device.reason << "\n        " << backend.description() << "\n";
  std::cout << "model: " << o.model << "\n" << network.summary();

  data::LoaderOptions train_options;
  train_options.batch = o.batch;
  train_options.seed = o.seed;
  train_options.augment_flip = o.augment;
  data::LoaderOptions test_options = train_options;
  test_options.shuffle = false;
  test_options.augment_flip = false;
  // A last batch too small for the network to train on (BatchNorm over one value per channel
  // needs two samples) is left out of each epoch, with a note: the order is shuffled, so a
  // different sample each epoch.
  const TrainingBatchNeed need = network.training_batch_need();
  const std::size_t samples = train_set->size(), rest = samples % static_cast<std::size_t>(o.batch);
  if (need.samples > 1 && samples < static_cast<std::size_t>(need.samples))
    throw std::invalid_argument("the training set holds " + std::to_string(samples) + " sample(s), too few: " + need.why);
  if (samples > static_cast<std::size_t>(o.batch) && rest > 0 && rest < static_cast<std::size_t>(need.samples)) {
    train_options.drop_last = true;
    std::cout << "note: each epoch's last batch (" << rest << " sample" << (rest > 1 ? "s" : "")
              << ") is left out, a different one each epoch, because " << need.why << "\n";
  }
  memory::StatisticsAdaptor staging_stats(backend.staging_memory());
  data::Loader train_loader(*train_set, train_options, staging_stats);
  data::Loader test_loader(*splits.test, test_options, staging_stats);
  const std::size_t staging = train_loader.staging_bytes() + test_loader.staging_bytes();

  TrainerOptions t;
  t.batch = o.batch;
  t.micro_batch = o.micro_batch;
  t.accumulate = o.accumulate;
  t.memory.budget = budget;
  t.memory.strategy = memory::parse_strategy(o.allocator);
  t.memory.trace = o.trace;
  t.loader_staging = staging;
  t.seed = o.seed;
  t.total_steps = static_cast<long>(train_loader.batches_per_epoch()) * o.epochs;
  t.optimizer.kind = parse_optimizer_kind(o.optimizer);
  t.optimizer.learning_rate = o.lr;
  t.optimizer.weight_decay = o.weight_decay;
  t.optimizer.momentum = o.momentum;
  t.optimizer.nesterov = o.nesterov;
  t.schedule.kind = parse_schedule_kind(o.schedule);
  t.schedule.warmup_steps = static_cast<long>(o.warmup_epochs * static_cast<double>(train_loader.batches_per_epoch()));
  if (o.cuda_graph) {
    const std::string why_not = backend.capture_support();
    t.capture_graphs = why_not.empty();
    std::cout << "cuda graphs: " << (why_not.empty() ? "on" : "off (" + why_not + ")") << "\n";
  }

  if (o.plan_only) return app::print_plan(network, backend, t);
  // The trainer builds the memory stack from t.memory: the budget (less the loader's staging and
  // the libraries' workspaces) enforced, the strategy for step buffers, the trace.
  Trainer trainer(network, backend, t);
  if (t.memory.strategy != memory::Strategy::planned)
    std::cout << "allocator: " << o.allocator
              << (t.memory.strategy == memory::Strategy::arena
                      ? " of " + memory::format_bytes(trainer.memory_stack().arena_capacity())
                      : std::string())
              << " for step buffers\n";
  trainer.on_recovery = [](const std::string& message) { std::cerr << "\nrecovered: " << message << "\n"; };
  if (!o.load.empty()) load_weights(o.load, network, trainer.parameters());
  const int k = (o.batch + trainer.micro_batch() - 1) / trainer.micro_batch();
  std::cout << "optimizer: " << trainer.optimizer().describe() << ", lr " << o.lr << ", " << o.schedule
            << " schedule; batch " << o.batch << " = " << k << " micro-batch" << (k > 1 ? "es" : "") << " of "
            << trainer.micro_batch() << "\n"
            << format_memory_table(trainer.memory()) << std::flush;

  app::MetricsFile metrics(o.metrics_out);
  const memory::MemoryStack& stack = trainer.memory_stack();
  const std::size_t reserved_before_step1 = stack.statistics().current_bytes;
  auto memory_note = [&] { return memory::format_bytes(stack.statistics().current_bytes + staging); };
  double total_train_seconds = 0, last_accuracy = 0;
  std::size_t total_images = 0;
  const auto run_start = Clock::now();
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    train_loader.start_epoch(epoch);
    app::Progress progress(epoch, o.epochs, train_loader.batches_per_epoch(), o.quiet);
    double loss_sum = 0, correct = 0;
    std::size_t seen = 0, batches = 0;
    const auto epoch_start = Clock::now();
    const double epoch_cpu_start = process_cpu_seconds();
    while (auto batch = train_loader.next()) {
      const StepReport r = trainer.train_step(to_host_batch(*batch));
      loss_sum += r.loss * r.samples;
      correct += r.accuracy * r.samples;
      seen += static_cast<std::size_t>(r.samples);
      ++batches;
      const double seconds = std::chrono::duration<double>(Clock::now() - epoch_start).count();
      const double rate = seconds > 0 ? static_cast<double>(seen) / seconds : 0;
      progress.update(batches, rate, loss_sum / static_cast<double>(seen), correct / static_cast<double>(seen), memory_note());
      metrics.write({{"type", "step"}, {"epoch", epoch}, {"step", r.step}, {"loss", r.loss}, {"accuracy", r.accuracy},
                     {"lr", r.learning_rate}, {"micro_batch", r.micro_batch}, {"micro_batches", r.micro_batches},
                     {"images_per_second", rate}, {"reserved_bytes", stack.statistics().current_bytes}});
    }
    progress.finish();
    const double train_seconds = std::chrono::duration<double>(Clock::now() - epoch_start).count();
    const double train_cpu_seconds = process_cpu_seconds() - epoch_cpu_start;
    total_train_seconds += train_seconds;
    total_images += seen;
    EvalResult test;
    if (has_test) {
      test_loader.start_epoch(1);
      test = trainer.evaluate([&]() -> std::optional<HostBatch> {
        auto b = test_loader.next();
        if (!b) return std::nullopt;
        return to_host_batch(*b);
      });
      last_accuracy = test.accuracy;
    }
    const double rate = static_cast<double>(seen) / train_seconds;
    char test_text[64] = "no test set";
    if (has_test) std::snprintf(test_text, sizeof test_text, "test loss %.4f acc %.4f", test.loss, test.accuracy);
    std::printf("epoch %d/%d: train loss %.4f acc %.4f | %s | %.1fs, %.0f img/s\n", epoch, o.epochs,
                loss_sum / static_cast<double>(seen), correct / static_cast<double>(seen), test_text, train_seconds,
                rate);
    std::fflush(stdout);
    metrics.write({{"type", "epoch"}, {"epoch", epoch}, {"train_loss", loss_sum / static_cast<double>(seen)},
                   {"train_accuracy", correct / static_cast<double>(seen)}, {"test_loss", test_value(has_test, test.loss)},
                   {"test_accuracy", test_value(has_test, test.accuracy)}, {"seconds", train_seconds},
                   {"images_per_second", rate}, {"cpu_seconds", train_cpu_seconds}});
    if (!o.save.empty()) save_weights(o.save, network, trainer.parameters());
  }
  const auto stats = stack.statistics();
  const double wall = std::chrono::duration<double>(Clock::now() - run_start).count();
  const double rate = total_train_seconds > 0 ? static_cast<double>(total_images) / total_train_seconds : 0;
  if (has_test)
    std::printf("done: test accuracy %.4f after %d epochs in %.1fs (%.0f img/s training)\n", last_accuracy, o.epochs,
                wall, rate);
  else
    std::printf("done: no test set; %d epochs in %.1fs (%.0f img/s training)\n", o.epochs, wall, rate);
  if (trainer.capturing_graphs() || trainer.graph_replays() > 0)
    std::printf("cuda graphs: %ld micro-batches replayed\n", trainer.graph_replays());
  std::printf("memory: reserved %s before step 1, peak %s, %s now; %zu upstream calls in total\n",
              memory::format_bytes(reserved_before_step1).c_str(), memory::format_bytes(stats.peak_bytes).c_str(),
              memory::format_bytes(stats.current_bytes).c_str(), stats.allocations);
  std::cout << format_memory_table(trainer.memory());
  if (!o.save.empty()) std::cout << "weights saved to " << o.save << "\n";
  metrics.write({{"type", "summary"}, {"epochs", o.epochs}, {"test_accuracy", test_value(has_test, last_accuracy)},
                 {"images_per_second", rate}, {"seconds", wall}, {"batch", o.batch},
                 {"micro_batch", trainer.micro_batch()}, {"peak_reserved_bytes", stats.peak_bytes},
                 {"reserved_before_step1", reserved_before_step1}, {"upstream_allocations", stats.allocations},
                 {"library_reserved_bytes", backend.library_reserved_bytes()}, {"loader_staging_bytes", staging},
                 {"graph_replays", trainer.graph_replays()}});
  trainer.finish();  // every byte given back, so the trace is whole when it is checked
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  cnn::app::Options o;
  CLI::App app{"train_images: train a convolutional network on images (cnnengine)"};
  cnn::app::add_options(app, o);
  try {
    app.parse(argc, argv);
    cnn::app::check_combinations(o);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help or the error
    return code == 0 ? 0 : 2;
  }
  try {
    return run(o);
  } catch (const cnn::TrainingDiverged& e) {
    std::cerr << "error: " << e.what() << (o.save.empty() ? "" : "; " + o.save + " is unchanged") << "\n";
    return 1;
  } catch (const BudgetTooSmall& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
