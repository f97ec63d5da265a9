#pragma once
// What a Fit holds (Fit::State): the data it reads (after the validation split and the limits),
// the memory stack, the trainer and the loaders, the run's progress and logs. Its parts: the setup
// (fit/fit.cpp), the run (fit/fit_run.cpp) and what it prints (fit/fit_report.cpp), with the small
// text helpers they share.
#include <chrono>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "fit/detail/event_file.hpp"
#include "fit/detail/progress_bar.hpp"
#include "fit/fit.hpp"
#include "fit/metrics_file.hpp"
#include "memory/memory_stack.hpp"

namespace cnn {
namespace detail {

using Clock = std::chrono::steady_clock;

// The value a float stands for in decimal (0.01f is 0.01, not 0.009999999776482582): what the
// logs show of a rate.
double decimal(float value);
// "0.1", "1e-05": a number as one would write it.
std::string number(double value);
// With `digits` decimals: "0.9312".
std::string fixed(double value, int digits = 4);
// "1 epoch", "3 epochs".
std::string plural(long count, const std::string& word);
bool lower_is_better(MonitoredMetric metric);

}  // namespace detail

struct Fit::State final : FitControl {
  State(Network& n, Backend& b, FitOptions options) : network(n), backend(b), o(std::move(options)) {}

  Network& network;
  Backend& backend;
  FitOptions o;
  ModelDescription model;
  nlohmann::json settings;  // the application's and the run's own
  std::optional<CheckpointInfo> resumed;
  nlohmann::json resumed_settings;  // what the resumed run kept

  // The data as read: the validation split and the limits applied.
  std::unique_ptr<data::Dataset> split_train, split_validation, limited_train, limited_validation, limited_test;
  const data::Dataset* train = nullptr;
  const data::Dataset* validation = nullptr;
  const data::Dataset* test = nullptr;

  data::LoaderOptions train_options, eval_options;
  std::unique_ptr<memory::MemoryStack> stack;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<data::Loader> train_loader, validation_loader, test_loader;
  std::unique_ptr<MetricsFile> metrics;
  std::unique_ptr<detail::EventFile> events;  // TensorBoard's
  Communicator* communicator = nullptr;
  bool writes = true;  // rank 0 (the only one, alone) prints, writes metrics and checkpoints
  RunProgress progress_;

  // This run()'s figures.
  std::size_t reserved_at_start = 0;
  long steps_at_start = 0;
  double communication_seconds = 0;
  long host_waits = 0;
  double epoch_cpu_seconds = 0;
  std::string stop_reason;  // a callback's stop
  long saved_step = -1;     // the step of this run's last save to o.save; -1: none yet
  bool save_was_there = false;  // o.save held a file when the run started
  detail::ProgressBar* bar = nullptr;
  double seconds_before = 0;
  detail::Clock::time_point epoch_start{}, run_start{};

  // FitControl
  void stop(const std::string& why) override { stop_reason = why.empty() ? "stopped by a callback" : why; }
  void set_learning_rate(float rate) override;
  Trainer& trainer() override { return *trainer_; }
  const RunProgress& progress() const override { return progress_; }
  int epochs() const override { return o.epochs; }
  std::size_t batches_per_epoch() const override { return train_loader->batches_per_epoch(); }

  void open_data(const FitData& data);
  void describe_model_of_run();
  void plan();
  void load_state();
  void load_starting_weights();
  void print_start() const;

  FitResult run();
  int train_epoch();
  void record(const StepReport& r);
  void drain();
  std::optional<EvalResult> evaluate(data::Loader* loader, const char* split);
  int finish_epoch(FitResult& result);
  bool stopped_early(FitResult& result) const;
  void best_of(FitResult& result) const;
  void reduce_on_plateau();
  void save();
  void save_to(const std::filesystem::path& path);
  // What a run that diverged left in o.save, for the end of its message: "" without a save.
  std::string saved_file_state() const;
  int agreed_stop();
  void summary(const FitResult& result);
  std::string memory_note() const;
  bool show_bar() const { return o.progress && o.progress_bar && writes; }
};

}  // namespace cnn
