#pragma once
// What a Fit holds (Fit::State): the data it reads (after the validation split and the limits),
// the memory stack, the trainer and the loaders, the run's progress, and the callbacks its events
// go to: its outputs' and rules' (fit/detail/*_log.hpp, plateau_schedule.hpp, early_stopping.hpp),
// then the user's. Its parts: the setup (fit/fit.cpp), the run (fit/fit_run.cpp) and the plan it
// prints (fit/fit_report.cpp).
#include <chrono>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fit/detail/best_epoch.hpp"
#include "fit/detail/csv_log.hpp"
#include "fit/detail/early_stopping.hpp"
#include "fit/detail/metrics_log.hpp"
#include "fit/detail/plateau_schedule.hpp"
#include "fit/detail/progress_log.hpp"
#include "fit/detail/run_text.hpp"
#include "fit/detail/tensorboard_log.hpp"
#include <cnnengine/fit/fit.hpp>
#include <cnnengine/memory/memory_stack.hpp>

namespace cnn {
namespace detail {

using Clock = std::chrono::steady_clock;

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
  // The run's outputs and rules, each where the options ask for it; `callbacks` calls them.
  std::unique_ptr<detail::ProgressLog> progress_log;
  std::unique_ptr<detail::MetricsLog> metrics_log;
  std::unique_ptr<detail::TensorBoardLog> tensorboard_log;
  std::unique_ptr<detail::CsvLog> csv_log;
  std::unique_ptr<detail::PlateauSchedule> plateau;
  std::unique_ptr<detail::EarlyStopping> early_stopping;
  std::vector<FitCallbacks> callbacks;  // theirs in that order, the user's before early stopping's
  Communicator* communicator = nullptr;
  bool writes = true;  // rank 0 (the only one, alone) prints, writes metrics and checkpoints
  RunProgress progress_;

  // This run()'s state.
  std::string stop_reason;  // a callback's stop (early stopping's too)
  long saved_step = -1;     // the step of this run's last save to o.save; -1: none yet
  bool save_was_there = false;  // o.save held a file when the run started
  double seconds_before = 0;    // the epoch's training time before this run() (a resumed epoch's)
  detail::Clock::time_point epoch_start{}, run_start{};
  // This run()'s part of the epoch: the training loop's time waiting on the loader, and the
  // loader's statistics when it began.
  double data_wait_seconds = 0;
  data::LoaderStatistics loader_at_epoch_start;

  // FitControl
  void stop(const std::string& why) override { stop_reason = why.empty() ? "stopped by a callback" : why; }
  bool stopping() const override { return !stop_reason.empty(); }
  void set_learning_rate(float rate) override;
  Trainer& trainer() override { return *trainer_; }
  const RunProgress& progress() const override { return progress_; }
  int epochs() const override { return o.epochs; }
  std::size_t batches_per_epoch() const override { return train_loader->batches_per_epoch(); }

  void open_data(const FitData& data);
  void describe_model_of_run();
  void plan();
  void load_state();
  void unfreeze();
  void check_unfrozen_fits();
  void load_starting_weights();
  void build_callbacks();
  void print_start() const;

  // Calls `event` of every callback that has it.
  template <class Event, class... Args>
  void notify(Event FitCallbacks::*event, Args&&... args) {
    for (const FitCallbacks& c : callbacks)
      if (c.*event) (c.*event)(args...);
  }
  FitControl& control() { return *this; }

  FitResult run();
  int train_epoch();
  void record(const StepReport& r);
  void drain();
  std::optional<EvalResult> evaluate(data::Loader* loader, const char* split);
  int finish_epoch();
  void save();
  void save_to(const std::filesystem::path& path);
  // What a run that diverged left in o.save, for the end of its message: "" without a save.
  std::string saved_file_state() const;
  int agreed_stop();
};

}  // namespace cnn
