#include "fit/detail/tensorboard_log.hpp"

#include <string>
#include <utility>
#include <vector>

namespace cnn::detail {

TensorBoardLog::TensorBoardLog(const std::filesystem::path& folder, std::optional<long> resumed_step)
    : events_(folder) {
  if (resumed_step) events_.start_session(*resumed_step);
}

FitCallbacks TensorBoardLog::callbacks() {
  FitCallbacks c;
  c.on_step = [this](const StepReport& r, FitControl& control) { step(r, control); };
  c.on_epoch_end = [this](const EpochRecord& e, FitControl& control) { epoch_end(e, control); };
  c.on_run_end = [this](const FitResult& result, FitControl& control) { run_end(result, control); };
  return c;
}

void TensorBoardLog::step(const StepReport& r, FitControl& control) {
  const RunProgress& p = control.progress();
  const double rate = p.seconds > 0 ? static_cast<double>(p.seen) / p.seconds : 0;
  const std::size_t reserved = control.trainer().memory_stack().statistics().current_bytes;
  events_.scalars(r.step, {{"train/loss", static_cast<float>(r.loss)},
                           {"train/accuracy", static_cast<float>(r.accuracy)},
                           {"learning_rate", r.learning_rate},
                           {"images_per_second", static_cast<float>(rate)},
                           {"memory/reserved_bytes", static_cast<float>(reserved)}});
  if (r.loss_scale > 0) events_.scalars(r.step, {{"train/loss_scale", r.loss_scale}});
}

void TensorBoardLog::epoch_end(const EpochRecord& e, FitControl& control) {
  std::vector<std::pair<std::string, float>> scalars = {
      {"epoch", static_cast<float>(e.epoch)},
      {"epoch/train_loss", static_cast<float>(e.train_loss)},
      {"epoch/train_accuracy", static_cast<float>(e.train_accuracy)},
      {"epoch/learning_rate", static_cast<float>(e.learning_rate)},
      {"epoch/images_per_second", static_cast<float>(e.images_per_second)}};
  if (e.data_wait_share) scalars.emplace_back("epoch/data_wait_share", static_cast<float>(*e.data_wait_share));
  if (e.loader_images_per_second)
    scalars.emplace_back("epoch/loader_images_per_second", static_cast<float>(*e.loader_images_per_second));
  if (e.validation_loss) {
    scalars.emplace_back("epoch/val_loss", static_cast<float>(*e.validation_loss));
    scalars.emplace_back("epoch/val_accuracy", static_cast<float>(e.validation_accuracy.value_or(0)));
    for (const auto& [name, value] : e.validation_scores)
      scalars.emplace_back("epoch/val_" + name, static_cast<float>(value));
  }
  if (e.test_loss) {
    scalars.emplace_back("epoch/test_loss", static_cast<float>(*e.test_loss));
    scalars.emplace_back("epoch/test_accuracy", static_cast<float>(e.test_accuracy.value_or(0)));
    for (const auto& [name, value] : e.test_scores)
      scalars.emplace_back("epoch/test_" + name, static_cast<float>(value));
  }
  events_.scalars(control.trainer().steps(), scalars);
}

void TensorBoardLog::run_end(const FitResult& result, FitControl& control) {
  if (!result.test) return;
  events_.scalars(control.trainer().steps(), {{"test/loss", static_cast<float>(result.test->loss)},
                                              {"test/accuracy", static_cast<float>(result.test->accuracy)}});
}

}  // namespace cnn::detail
