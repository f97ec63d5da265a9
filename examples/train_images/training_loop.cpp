#include "training_loop.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <sys/resource.h>

#include "plot.hpp"
#include "progress.hpp"
#include "stop_signal.hpp"

namespace cnn::app {
namespace {

// The most resident memory the process has held (VmHWM), in bytes; 0 where /proc cannot say.
std::size_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return static_cast<std::size_t>(std::stoull(line.substr(6))) * 1024;
  return 0;
}

using Clock = std::chrono::steady_clock;

// CPU seconds of the whole process (every thread), user and system: a machine shared with other
// work stretches an epoch's wall time, much less the CPU time it took.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}
using nlohmann::json;

json optional_value(const std::optional<double>& value) { return value ? json(*value) : json(); }

json epoch_line(const EpochRecord& e) {
  return {{"type", "epoch"}, {"epoch", e.epoch}, {"train_loss", e.train_loss}, {"train_accuracy", e.train_accuracy},
          {"test_loss", optional_value(e.test_loss)}, {"test_accuracy", optional_value(e.test_accuracy)},
          {"seconds", e.seconds}, {"images_per_second", e.images_per_second}};
}

// Test hook: CNN_TRAIN_IMAGES_KILL_AT_STEP=N ends the process with SIGKILL right after step N
// (what a kill -9 there would leave); with CNN_TRAIN_IMAGES_KILL_RANK=R only rank R's.
// tests/train_images/check_resume.cmake uses it.
bool killed_after(long step, int rank) {
  static const long kill_step = [] {
    const char* text = std::getenv("CNN_TRAIN_IMAGES_KILL_AT_STEP");
    return text ? std::atol(text) : 0L;
  }();
  static const int kill_rank = [] {
    const char* text = std::getenv("CNN_TRAIN_IMAGES_KILL_RANK");
    return text ? std::atoi(text) : -1;
  }();
  return step == kill_step && (kill_rank < 0 || kill_rank == rank);
}

class Loop {
 public:
  Loop(LoopSetup& s, RunProgress progress) : s_(s), o_(s.options), progress_(std::move(progress)) {}

  int run() {
    const auto run_start = Clock::now();
    for (; progress_.epoch <= o_.epochs && !stopped_early(); ++progress_.epoch) {
      if (const int signal = train_epoch()) return stop(signal);
      if (const int signal = finish_epoch()) return stop(signal);
    }
    summary(std::chrono::duration<double>(Clock::now() - run_start).count());
    return 0;
  }

 private:
  // The epoch's batches from where the run stands; a signal's number when a stop was asked.
  // Steps are submitted without waiting for the device (Trainer::submit_step): a step's report
  // may come with the next one's submission, and the last one's is drained before anything
  // reads the trainer's state.
  int train_epoch() {
    const int epoch = progress_.epoch;
    s_.train_loader.start_epoch(epoch, progress_.batches_done);
    Progress bar(epoch, o_.epochs, s_.train_loader.batches_per_epoch(), o_.quiet);
    bar_ = &bar;
    seconds_before_ = progress_.seconds;
    epoch_start_ = Clock::now();
    const double cpu_start = process_cpu_seconds();
    while (auto batch = s_.train_loader.next()) {
      if (const std::optional<StepReport> r = s_.trainer.submit_step(*batch)) {
        record(*r);
        if (o_.save_every > 0 && r->step % o_.save_every == 0) save();
      }
      if (const int signal = agreed_stop()) {
        drain();
        bar.finish();
        bar_ = nullptr;
        return signal;
      }
    }
    drain();
    bar.finish();
    bar_ = nullptr;
    epoch_cpu_seconds_ = process_cpu_seconds() - cpu_start;
    return 0;
  }

  // One step's report into the run's progress, the progress bar and the metrics file.
  void record(const StepReport& r) {
    progress_.loss_sum += r.loss * r.samples;
    progress_.correct += r.accuracy * r.samples;
    progress_.seen += static_cast<std::size_t>(r.samples);
    ++progress_.batches_done;
    progress_.seconds = seconds_before_ + std::chrono::duration<double>(Clock::now() - epoch_start_).count();
    progress_.steps.push_back({static_cast<float>(r.loss), static_cast<float>(r.accuracy), r.learning_rate});
    const double rate = progress_.seconds > 0 ? static_cast<double>(progress_.seen) / progress_.seconds : 0;
    const double seen = static_cast<double>(progress_.seen);
    if (bar_) bar_->update(progress_.batches_done, rate, progress_.loss_sum / seen, progress_.correct / seen, memory_note());
    communication_seconds_ += r.communication_seconds;
    host_waits_ += r.host_waits;
    json line = {{"type", "step"}, {"epoch", progress_.epoch}, {"step", r.step}, {"loss", r.loss},
                 {"accuracy", r.accuracy}, {"lr", r.learning_rate}, {"micro_batch", r.micro_batch},
                 {"micro_batches", r.micro_batches}, {"images_per_second", rate}, {"host_waits", r.host_waits},
                 {"reserved_bytes", s_.trainer.memory_stack().statistics().current_bytes}};
    if (s_.communicator) line["communication_seconds"] = r.communication_seconds;
    s_.metrics.write(line);
    if (killed_after(r.step, s_.trainer.rank())) std::raise(SIGKILL);
  }

  // The step still pending (its loss on the way back), recorded: the trainer's state is then
  // the progress's.
  void drain() {
    if (const std::optional<StepReport> r = s_.trainer.drain()) record(*r);
  }

  // The epoch's evaluation, record and saves; a signal's number when a stop was asked during the
  // evaluation (on one process: over several, the ranks agree only at step boundaries), which is
  // left unfinished: the run is saved at the epoch's last step, and a resumed run evaluates it.
  int finish_epoch() {
    EvalResult test;
    if (s_.has_test) {
      s_.test_loader.start_epoch(1);
      test = s_.trainer.evaluate([&]() -> std::optional<Batch> {
        if (!s_.communicator && stop_requested()) return std::nullopt;
        return s_.test_loader.next();
      });
      if (!s_.communicator && stop_requested()) return stop_requested();
    }
    const double seen = static_cast<double>(progress_.seen);
    EpochRecord e;
    e.epoch = progress_.epoch;
    e.train_loss = progress_.loss_sum / seen;
    e.train_accuracy = progress_.correct / seen;
    if (s_.has_test) {
      e.test_loss = test.loss;
      e.test_accuracy = test.accuracy;
    }
    e.seconds = progress_.seconds;
    e.images_per_second = progress_.seconds > 0 ? seen / progress_.seconds : 0;
    char test_text[64] = "no test set";
    if (s_.has_test) std::snprintf(test_text, sizeof test_text, "test loss %.4f acc %.4f", test.loss, test.accuracy);
    std::printf("epoch %d/%d: train loss %.4f acc %.4f | %s | %.1fs, %.0f img/s\n", e.epoch, o_.epochs, e.train_loss,
                e.train_accuracy, test_text, e.seconds, e.images_per_second);
    std::fflush(stdout);
    json line = epoch_line(e);
    line["cpu_seconds"] = epoch_cpu_seconds_;  // every thread's, in this process, for this epoch's training
    s_.metrics.write(line);
    progress_.epochs.push_back(e);
    progress_.batches_done = 0;
    progress_.loss_sum = progress_.correct = progress_.seconds = 0;
    progress_.seen = 0;
    // The checkpoint names the next epoch: a run resumed from it starts there.
    ++progress_.epoch;
    save();
    if (o_.keep_best && best_epoch() == e.epoch && s_.writes) save_to(best_path(o_.save));
    --progress_.epoch;
    if (!o_.plot.empty() && s_.writes) write_plot(o_.plot, progress_, s_.train_loader.batches_per_epoch());
    return 0;
  }

  // The epoch of the best test accuracy so far (the first of equals); 0 without a test set.
  int best_epoch() const {
    int best = 0;
    double accuracy = -1;
    for (const EpochRecord& e : progress_.epochs)
      if (e.test_accuracy && *e.test_accuracy > accuracy) {
        accuracy = *e.test_accuracy;
        best = e.epoch;
      }
    return best;
  }

  // --early-stop N: N epochs have passed without a better test accuracy.
  bool stopped_early() const {
    if (o_.early_stop <= 0 || progress_.epochs.empty() || !s_.has_test) return false;
    const int best = best_epoch(), last = progress_.epochs.back().epoch;
    if (last - best < o_.early_stop) return false;
    std::printf("early stop: no better test accuracy for %d epochs (the best, %.4f, at epoch %d)\n", last - best,
                *progress_.epochs[static_cast<std::size_t>(best - progress_.epochs.front().epoch)].test_accuracy, best);
    return true;
  }

  void save() {
    drain();
    if (!o_.save.empty() && s_.writes) save_to(o_.save);
  }

  // A stop asked on any rank stops every rank at the same step (each rank gets the signal from
  // mpirun, but not necessarily between the same two steps).
  int agreed_stop() {
    if (!s_.communicator) return stop_requested();
    double signal[1] = {static_cast<double>(stop_requested())};
    s_.communicator->max_host(signal);
    return static_cast<int>(signal[0]);
  }

  void save_to(const std::string& path) {
    TrainingCheckpoint training;
    training.trainer = s_.trainer.state();
    training.progress = progress_;
    json settings = s_.settings;
    settings["metrics_bytes"] = s_.metrics.bytes();
    settings["ranks"] = s_.trainer.ranks();
    training.settings = settings.dump();
    save_checkpoint(path, s_.network, s_.trainer.parameters(), s_.model, &training);
  }

  int stop(int signal) {
    save();
    std::cout << "\nstopped by signal " << signal << " at step " << s_.trainer.steps() << " (epoch "
              << progress_.epoch << ", batch " << progress_.batches_done << ")";
    if (!o_.save.empty()) std::cout << ": the run is saved in " << o_.save << "; continue it with --resume " << o_.save;
    std::cout << "\n";
    return 128 + signal;
  }

  void summary(double wall) {
    const auto stats = s_.trainer.memory_stack().statistics();
    double seconds = 0, images = 0;
    for (const EpochRecord& e : progress_.epochs) {
      seconds += e.seconds;
      images += e.images_per_second * e.seconds;
    }
    const double rate = seconds > 0 ? images / seconds : 0;
    const std::optional<double> accuracy = progress_.epochs.empty() ? std::nullopt : progress_.epochs.back().test_accuracy;
    if (accuracy)
      std::printf("done: test accuracy %.4f after %d epochs in %.1fs (%.0f img/s training)\n", *accuracy, o_.epochs, wall,
                  rate);
    else
      std::printf("done: no test set; %d epochs in %.1fs (%.0f img/s training)\n", o_.epochs, wall, rate);
    const double steps_run = static_cast<double>(s_.trainer.steps() - steps_at_start_);
    const double communication_per_step = steps_run > 0 ? communication_seconds_ / steps_run : 0;
    if (s_.communicator)
      std::printf("ranks: %d, each waited %.2f ms a step for the others (gradient sums after its backward)\n",
                  s_.trainer.ranks(), 1e3 * communication_per_step);
    if (s_.trainer.capturing_graphs() || s_.trainer.graph_replays() > 0)
      std::printf("cuda graphs: %ld micro-batches replayed\n", s_.trainer.graph_replays());
    const std::size_t resident = peak_resident_bytes();
    std::printf("memory: reserved %s before step 1, peak %s, %s now; %zu upstream calls in total; the process's "
                "peak resident memory %s\n",
                memory::format_bytes(reserved_at_start_).c_str(), memory::format_bytes(stats.peak_bytes).c_str(),
                memory::format_bytes(stats.current_bytes).c_str(), stats.allocations,
                memory::format_bytes(resident).c_str());
    std::cout << format_memory_table(s_.trainer.memory());
    if (!o_.save.empty())
      std::cout << "the run is saved in " << o_.save << " (weights, optimizer state and position: --resume it)\n";
    s_.metrics.write({{"type", "summary"}, {"epochs", o_.epochs}, {"test_accuracy", optional_value(accuracy)},
                      {"images_per_second", rate}, {"seconds", wall}, {"batch", o_.batch},
                      {"micro_batch", s_.trainer.micro_batch()}, {"peak_reserved_bytes", stats.peak_bytes},
                      {"reserved_before_step1", reserved_at_start_}, {"upstream_allocations", stats.allocations},
                      {"library_reserved_bytes", s_.backend.library_reserved_bytes()},
                      {"loader_staging_bytes", s_.staging}, {"graph_replays", s_.trainer.graph_replays()},
                      {"peak_resident_bytes", resident}, {"data_set_host_bytes", s_.data_host_bytes},
                      {"ranks", s_.trainer.ranks()}, {"communication_seconds_per_step", communication_per_step},
                      {"host_waits", host_waits_}});
  }

  std::string memory_note() const {
    return memory::format_bytes(s_.trainer.memory_stack().statistics().current_bytes + s_.staging);
  }

  LoopSetup& s_;
  const Options& o_;
  RunProgress progress_;
  const std::size_t reserved_at_start_ = s_.trainer.memory_stack().statistics().current_bytes;
  const long steps_at_start_ = s_.trainer.steps();
  double communication_seconds_ = 0;  // this run's steps, waiting for the other ranks
  long host_waits_ = 0;               // this run's steps, waiting for the device (StepReport::host_waits)
  double epoch_cpu_seconds_ = 0;      // the last epoch's training loop
  // The epoch being trained: its progress bar, and where its clock started.
  Progress* bar_ = nullptr;
  double seconds_before_ = 0;
  Clock::time_point epoch_start_{};
};

}  // namespace

int run_epochs(LoopSetup& setup, RunProgress progress) { return Loop(setup, std::move(progress)).run(); }

std::string best_path(const std::string& save) {
  const std::filesystem::path path(save);
  std::filesystem::path best = path.parent_path() / path.stem();
  best += ".best" + path.extension().string();
  return best.string();
}

void write_history(MetricsFile& metrics, const RunProgress& progress, std::size_t batches_per_epoch) {
  std::size_t next_epoch = 0;
  for (std::size_t s = 0; s < progress.steps.size(); ++s) {
    const std::size_t epoch = batches_per_epoch ? s / batches_per_epoch + 1 : 1;
    while (next_epoch < progress.epochs.size() && static_cast<std::size_t>(progress.epochs[next_epoch].epoch) < epoch)
      metrics.write(epoch_line(progress.epochs[next_epoch++]));
    const StepRecord& r = progress.steps[s];
    metrics.write({{"type", "step"}, {"epoch", epoch}, {"step", s + 1}, {"loss", r.loss}, {"accuracy", r.accuracy},
                   {"lr", r.learning_rate}, {"from_checkpoint", true}});
  }
  while (next_epoch < progress.epochs.size()) metrics.write(epoch_line(progress.epochs[next_epoch++]));
}

}  // namespace cnn::app
