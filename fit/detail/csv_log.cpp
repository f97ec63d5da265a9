#include "fit/detail/csv_log.hpp"

#include "fit/detail/run_log.hpp"

namespace cnn::detail {

FitCallbacks CsvLog::callbacks() {
  FitCallbacks c;
  c.on_epoch_end = [this](const EpochRecord&, FitControl& control) { write_csv(path_, control.progress().epochs); };
  return c;
}

}  // namespace cnn::detail
