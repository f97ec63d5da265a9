#pragma once
// The options that define a run, as its checkpoint keeps them (JSON keyed by the option's name):
// what --resume continues with. The option table's on_resume column says which they are and
// what a resumed run does with each; device, threads, --save and the like are not among them: a
// run may resume on another machine.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "options.hpp"

namespace cnn::app {

nlohmann::json run_settings(const Options& o);
// For --resume: `o` takes the saved settings, which pass every check the command line's do (a
// CheckpointError names the first that fails). An option the command line gave (o.given) with
// another value than the run's is a UsageError naming both, except as its on_resume allows
// (--data may name the same data elsewhere: the caller checks it). Returns the records kept where
// the run wrote them ("--csv /runs/a.csv"), for the caller to say so.
std::vector<std::string> apply_saved_settings(const nlohmann::json& saved, Options& o);
// Before any work: a UsageError naming the first setting a checkpoint could not record (JSON
// holds UTF-8 text; a path on Linux is any bytes), so that no run trains and then fails to save.
void require_recordable(const Options& o);

// A number as a command line gives it: "0.1", not std::to_string's "0.100000".
std::string number_text(double value);

}  // namespace cnn::app
