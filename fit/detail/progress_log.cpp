#include "fit/detail/progress_log.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>

#include <cnnengine/engine/core/task_scores.hpp>
#include "fit/detail/run_text.hpp"

namespace cnn::detail {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What the memory stack holds now, the loaders' staging with it.
std::string memory_note(Trainer& trainer) {
  memory::MemoryStack& stack = trainer.memory_stack();
  return memory::format_bytes(stack.statistics().current_bytes + stack.account().loader_staging());
}

// ", " and the scores in words, where an evaluation has any beyond the loss and the accuracy.
std::string scores_of(const EvalResult& result) {
  const std::string words = describe_scores(result.scores);
  return words.empty() ? std::string() : ", " + words;
}

}  // namespace

FitCallbacks ProgressLog::callbacks() {
  FitCallbacks c;
  c.on_run_begin = [this](FitControl& control) { run_begin(control); };
  c.on_epoch_begin = [this](int epoch, FitControl& control) { epoch_begin(epoch, control); };
  c.on_step = [this](const StepReport& r, FitControl& control) {
    totals_.add(r);
    step(control);
  };
  c.on_evaluation_begin = [this](std::string_view split, std::size_t batches, FitControl&) {
    evaluation_begin(split, batches);
  };
  c.on_evaluation_batch = [this](std::string_view, std::size_t done, FitControl&) { evaluation_batch(done); };
  c.on_evaluation = [this](std::string_view split, const EvalResult& result, FitControl&) {
    evaluation(split, result);
  };
  c.on_epoch_end = [this](const EpochRecord& e, FitControl& control) { epoch_end(e, control); };
  c.on_run_end = [this](const FitResult& result, FitControl& control) { run_end(result, control); };
  return c;
}

void ProgressLog::run_begin(FitControl& control) { totals_.begin(control.trainer()); }

void ProgressLog::epoch_begin(int epoch, FitControl& control) {
  end_bar();
  bar_.emplace("epoch " + std::to_string(epoch) + "/" + std::to_string(control.epochs()), control.batches_per_epoch(),
               !settings_.bar);
  validated_.reset();
  tested_.reset();
}

void ProgressLog::step(FitControl& control) {
  if (!bar_) return;
  const RunProgress& p = control.progress();
  const double seen = static_cast<double>(p.seen);
  const double rate = p.seconds > 0 ? seen / p.seconds : 0;
  // What is left of the run: this epoch's batches and the later epochs', at this epoch's pace.
  const double per_batch = p.seconds / static_cast<double>(p.batches_done);
  const std::size_t per_epoch = control.batches_per_epoch();
  const double left = static_cast<double>(per_epoch - std::min(per_epoch, p.batches_done)) +
                      static_cast<double>(per_epoch) * static_cast<double>(control.epochs() - p.epoch);
  char loss[32], speed[48];
  std::snprintf(loss, sizeof loss, "loss %.4f", p.loss_sum / seen);
  std::snprintf(speed, sizeof speed, "%.0f img/s  acc %.3f", rate, p.correct / seen);
  bar_->update(p.batches_done, per_batch * left, {loss, speed, "mem " + memory_note(control.trainer())});
}

void ProgressLog::evaluation_begin(std::string_view split, std::size_t batches) {
  end_bar();
  bar_.emplace(std::string(split), batches, !settings_.bar, true);
  evaluation_batches_ = batches;
  evaluation_start_ = std::chrono::steady_clock::now();
}

void ProgressLog::evaluation_batch(std::size_t done) {
  if (!bar_ || done == 0) return;
  const double per_batch = seconds_since(evaluation_start_) / static_cast<double>(done);
  bar_->update(done, per_batch * static_cast<double>(evaluation_batches_ - done), {});
}

void ProgressLog::evaluation(std::string_view split, const EvalResult& result) {
  if (bar_) bar_->update(evaluation_batches_, 0, {});
  end_bar();
  (split == "validation" ? validated_ : tested_) = result;
}

void ProgressLog::end_bar() {
  if (bar_) bar_->finish();
  bar_.reset();
}

void ProgressLog::epoch_end(const EpochRecord& e, FitControl& control) {
  end_bar();
  // A regression has no accuracy: its scores (MAE, RMSE) say how close it is.
  const bool accurate = settings_.task != Task::regress;
  auto accuracy = [&](double value) { return accurate ? " acc " + fixed(value) : std::string(); };
  std::string line = "epoch " + std::to_string(e.epoch) + "/" + std::to_string(control.epochs()) + ": train loss " +
                     fixed(e.train_loss) + accuracy(e.train_accuracy);
  if (validated_)
    line += " | val loss " + fixed(validated_->loss) + accuracy(validated_->accuracy) + scores_of(*validated_);
  if (tested_) line += " | test loss " + fixed(tested_->loss) + accuracy(tested_->accuracy) + scores_of(*tested_);
  char tail[96];
  std::snprintf(tail, sizeof tail, " | %.1fs, %.0f img/s", e.seconds, e.images_per_second);
  if (e.data_wait_share) {
    const std::size_t used = std::strlen(tail);
    std::snprintf(tail + used, sizeof tail - used, ", data wait %.0f%%", 100 * *e.data_wait_share);
  }
  const Trainer& trainer = control.trainer();
  if (const float scale = trainer.loss_scale(); scale > 0) {  // fp16
    char scaled[32];
    std::snprintf(scaled, sizeof scaled, "%g", static_cast<double>(scale));
    line += std::string(" | loss scale ") + scaled + ", " + plural(trainer.skipped_steps(), "step") + " skipped so far";
  }
  std::cout << line << tail << "\n" << std::flush;
  validated_.reset();
  tested_.reset();
}

void ProgressLog::run_end(const FitResult& result, FitControl& control) {
  end_bar();
  Trainer& trainer = control.trainer();
  const RunProgress& progress = control.progress();
  if (result.signal) {
    std::cout << "\nstopped by signal " << result.signal << " at step " << trainer.steps() << " (epoch "
              << progress.epoch << ", batch " << progress.batches_done << ")";
    if (!settings_.save.empty()) std::cout << ": the run is saved in " << settings_.save.string();
    std::cout << "\n";
    return;
  }
  const int finished = finished_epochs(progress.epochs);
  if (result.epochs_trained == 0 && !result.stopped_because.size())
    std::cout << "the run had already trained its " << plural(finished, "epoch") << "; nothing to train\n";
  const std::string test_scores = result.test ? describe_scores(result.test->scores) : std::string();
  const bool accurate = settings_.task != Task::regress;  // a regression's scores are its MAE and RMSE
  if (result.test)
    std::cout << "test: loss " << fixed(result.test->loss)
              << (accurate ? " accuracy " + fixed(result.test->accuracy) : std::string())
              << (test_scores.empty() ? "" : ", " + test_scores) << " ("
              << plural(static_cast<long>(result.test->samples), "sample") << ", the model after epoch "
              << result.tested_epoch << (result.tested_epoch != finished ? ", the best, restored" : "") << ")\n";
  std::printf("done: %s after %s (%s this run) in %.1fs (%.0f img/s training)\n",
              !result.test ? "no test set"
              : accurate   ? ("test accuracy " + fixed(result.test->accuracy)).c_str()
                           : ("test " + test_scores).c_str(),
              plural(finished, "epoch").c_str(), std::to_string(result.epochs_trained).c_str(), result.seconds,
              images_per_second(progress.epochs));
  if (result.best_epoch > 0)
    std::cout << "best " << to_string(settings_.monitor) << ": " << fixed(*result.best_value) << " at epoch "
              << result.best_epoch
              << (result.best_checkpoint.empty() ? std::string() : ", kept in " + result.best_checkpoint.string())
              << "\n";
  if (settings_.distributed)
    std::printf("ranks: %d, each waited %.2f ms a step for the others (gradient sums after its backward)\n",
                trainer.ranks(), 1e3 * totals_.communication_seconds_per_step(trainer));
  if (trainer.capturing_graphs() || trainer.graph_replays() > 0)
    std::printf("cuda graphs: %ld micro-batches replayed\n", trainer.graph_replays());
  const auto stats = trainer.memory_stack().statistics();
  std::printf(
      "memory: reserved %s before step 1, peak %s, %s now; %zu upstream calls in total; the process's "
      "peak resident memory %s\n",
      memory::format_bytes(totals_.reserved_at_start()).c_str(), memory::format_bytes(stats.peak_bytes).c_str(),
      memory::format_bytes(stats.current_bytes).c_str(), stats.allocations,
      memory::format_bytes(peak_resident_bytes()).c_str());
  if (!settings_.save.empty())
    std::cout << "the run is saved in " << settings_.save.string() << " (weights, optimizer state and position)\n";
  std::cout << std::flush;
}

}  // namespace cnn::detail
