#pragma once
// The options that define a run, as its checkpoint keeps them (JSON keyed by the option's name):
// what --resume continues with. Device, threads, outputs and the like are not among them: a run
// may resume on another machine or write elsewhere.
#include <nlohmann/json.hpp>

#include "options.hpp"

namespace cnn::app {

nlohmann::json run_settings(const Options& o);
// For --resume: `o` takes the saved settings. An option the command line gave (o.given) with
// another value than the run's is a UsageError naming both; --epochs may only grow.
void apply_saved_settings(const nlohmann::json& saved, Options& o);

}  // namespace cnn::app
