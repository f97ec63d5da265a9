// What a run prints at its start: the data, the optimizer, the augmentation, the watch and the plan.
// (Its epochs and summary: fit/detail/progress_log.hpp.)
#include <iostream>

#include <cnnengine/base/batch.hpp>
#include <cnnengine/engine/core/task_scores.hpp>
#include "fit/detail/fit_state.hpp"

namespace cnn {

using detail::decimal;
using detail::number;
using detail::lower_is_better;
using detail::plural;

void Fit::State::print_start() const {
  if (!o.progress || !writes) return;
  std::cout << "data: " << train->description() << "\n";
  std::cout << "      validation: " << (validation ? validation->description() : "none") << "\n";
  std::cout << "      test: "
            << (test ? test->description() + (o.test_each_epoch ? " (every epoch)" : " (evaluated at the end)")
                     : std::string("none"))
            << "\n";
  if (resumed) {
    std::cout << "resumed: epoch " << progress_.epoch << ", batch " << progress_.batches_done << ", step "
              << trainer_->steps() << "\n";
    // A run given more epochs stretches a schedule that follows its length: say what the rate does.
    const long before = resumed_settings.value("total_steps", 0L);
    if (before > 0 && before != o.total_steps && !progress_.steps.empty())
      std::cout << "note: the " << to_string(o.schedule.kind) << " schedule now runs over "
                << o.total_steps << " steps (" << plural(o.epochs, "epoch") << "), not the run's " << before
                << ": the rate goes from " << decimal(progress_.steps.back().learning_rate) << " at step "
                << trainer_->steps() << " to " << decimal(trainer_->learning_rate()) << " at step "
                << trainer_->steps() + 1 << "\n";
  }
  const int ranks = communicator ? communicator->ranks() : 1;
  const int share = share_of_batch(o.batch, 0, ranks).size;  // rank 0's, the largest
  const int micro = trainer_->micro_batch(), count = (share + micro - 1) / micro, last = share - (count - 1) * micro;
  const OptimizerConfig& opt = o.optimizer;
  const std::string backbone = opt.backbone_through > 0 && opt.backbone_rate_scale != 1
                                   ? " (nodes 1 to " + std::to_string(opt.backbone_through) + ": " +
                                         number(decimal(opt.backbone_rate_scale)) + " x it)"
                                   : std::string();
  std::cout << "optimizer: " << trainer_->optimizer().describe() << ", lr " << decimal(opt.learning_rate) << backbone
            << ", " << to_string(o.schedule.kind) << " schedule; batch " << o.batch << " = "
            << (ranks > 1 ? std::to_string(ranks) + " ranks x " : std::string()) << count << " micro-batch"
            << (count > 1 ? "es" : "") << " of " << micro
            << (last != micro ? " (the last one " + std::to_string(last) + ")" : std::string()) << "\n";
  std::cout << "augmentation: " << data::describe_augmentation(train_options) << "; loaded on "
            << plural(train_options.threads, "thread") << "\n";
  const bool plateau = o.schedule.kind == ScheduleKind::plateau;
  if (o.keep_best || o.early_stop > 0 || plateau)
    std::cout << "watching " << to_string(o.monitor) << " ("
              << (lower_is_better(o.monitor) ? "lower" : "higher") << " is better)"
              << (plateau ? "; the rate x " + detail::number(o.schedule.plateau_factor) + " after " +
                                plural(o.schedule.plateau_patience + 1, "epoch") + " without a better one"
                          : std::string())
              << (o.keep_best ? "; the best epoch kept in " + best_checkpoint_path(o.save).string() : std::string())
              << (o.early_stop > 0 ? "; stopping after " + plural(o.early_stop, "epoch") + " without a better one"
                                   : std::string())
              << "\n";
  std::cout << format_memory_table(trainer_->memory()) << std::flush;
}

}  // namespace cnn
