#include "fit/detail/run_log.hpp"

#include <cstdio>
#include <optional>
#include <string>

#include "base/atomic_file.hpp"

namespace cnn::detail {
namespace {

using nlohmann::json;

json optional_value(const std::optional<double>& value) { return value ? json(*value) : json(); }

}  // namespace

json epoch_line(const EpochRecord& e) {
  json line = {{"type", "epoch"},
          {"epoch", e.epoch},
          {"train_loss", e.train_loss},
          {"train_accuracy", e.train_accuracy},
          {"val_loss", optional_value(e.validation_loss)},
          {"val_accuracy", optional_value(e.validation_accuracy)},
          {"test_loss", optional_value(e.test_loss)},
          {"test_accuracy", optional_value(e.test_accuracy)},
          {"lr", e.learning_rate},
          {"seconds", e.seconds},
          {"images_per_second", e.images_per_second}};
  if (e.data_wait_share) line["data_wait_share"] = *e.data_wait_share;
  if (e.loader_images_per_second) line["loader_images_per_second"] = *e.loader_images_per_second;
  for (const auto& [name, value] : e.validation_scores) line["val_" + name] = value;
  for (const auto& [name, value] : e.test_scores) line["test_" + name] = value;
  return line;
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

void write_csv(const std::filesystem::path& path, const std::vector<EpochRecord>& epochs) {
  auto cell = [](const std::optional<double>& value) {
    if (!value) return std::string();
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", *value);
    return std::string(text);
  };
  std::string text = "epoch,train_loss,train_accuracy,val_loss,val_accuracy,test_loss,test_accuracy,lr,seconds,"
                     "images_per_second\n";
  for (const EpochRecord& e : epochs) {
    text += std::to_string(e.epoch);
    for (const std::optional<double>& value :
         {std::optional<double>(e.train_loss), std::optional<double>(e.train_accuracy), e.validation_loss,
          e.validation_accuracy, e.test_loss, e.test_accuracy, std::optional<double>(e.learning_rate),
          std::optional<double>(e.seconds), std::optional<double>(e.images_per_second)})
      text += "," + cell(value);
    text += "\n";
  }
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace cnn::detail
