#include "run_settings.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/error.hpp"
#include "base/utf8.hpp"
#include "usage_error.hpp"

namespace cnn::app {
namespace {

using nlohmann::json;

// One defining option: its name on the command line and where it lives in Options.
struct Setting {
  const char* name;
  json (*read)(const Options&);
  void (*copy)(const Options& from, Options& to);
};

// A float as the shortest decimal that reads back as it (0.01, not 0.009999999776482582): what a
// checkpoint records and a message shows of a rate given as 0.01.
json setting_value(float value) {
  char text[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(value));
    if (std::strtof(text, nullptr) == value) break;
  }
  return std::strtod(text, nullptr);
}
json setting_value(const std::optional<float>& value) { return value ? setting_value(*value) : json(); }
json setting_value(const std::vector<float>& values) {
  json list = json::array();
  for (float value : values) list.push_back(setting_value(value));
  return list;
}
template <typename T>
json setting_value(const T& value) {
  return json(value);
}

#define CNN_SETTING(name, member)                                                  \
  Setting {                                                                         \
    name, [](const Options& o) { return setting_value(o.member); },                \
        [](const Options& from, Options& to) { to.member = from.member; }           \
  }

const Setting kSettings[] = {
    CNN_SETTING("--data", data),           CNN_SETTING("--model", model),
    CNN_SETTING("--epochs", epochs),       CNN_SETTING("--batch", batch),
    CNN_SETTING("--micro-batch", micro_batch), CNN_SETTING("--accumulate", accumulate),
    CNN_SETTING("--lr", lr),               CNN_SETTING("--optimizer", optimizer),
    CNN_SETTING("--weight-decay", weight_decay),  // not given: the optimizer's default, null
    CNN_SETTING("--momentum", momentum),
    CNN_SETTING("--nesterov", nesterov),   CNN_SETTING("--schedule", schedule),
    CNN_SETTING("--warmup-epochs", warmup_epochs), CNN_SETTING("--seed", seed),
    CNN_SETTING("--limit", limit),         CNN_SETTING("--image-size", image_size),
    CNN_SETTING("--channels", channels),   CNN_SETTING("--augment", augment),
    CNN_SETTING("--memory-budget", budget), CNN_SETTING("--allocator", allocator),
    CNN_SETTING("--recompute", recompute), CNN_SETTING("--sync-batchnorm", sync_batchnorm),
    CNN_SETTING("--lr-step-epochs", lr_step_epochs), CNN_SETTING("--lr-step-factor", lr_step_factor),
    CNN_SETTING("--crop-padding", crop_padding), CNN_SETTING("--normalize", normalize),
    CNN_SETTING("--mean", mean),           CNN_SETTING("--std", std),
    CNN_SETTING("--keep-best", keep_best), CNN_SETTING("--early-stop", early_stop),
    CNN_SETTING("--max-image-bytes", max_image_bytes), CNN_SETTING("--skip-corrupt", skip_corrupt),
    CNN_SETTING("--validation-split", validation_split), CNN_SETTING("--monitor", monitor),
    CNN_SETTING("--limit-eval", limit_eval), CNN_SETTING("--test-each-epoch", test_each_epoch),
    CNN_SETTING("--class-names", class_names), CNN_SETTING("--restore-best", restore_best),
    CNN_SETTING("--plateau-patience", plateau_patience), CNN_SETTING("--plateau-factor", plateau_factor),
    CNN_SETTING("--task", task),           CNN_SETTING("--label-smoothing", label_smoothing),
    CNN_SETTING("--class-weights", class_weights), CNN_SETTING("--pos-weights", positive_weights),
    CNN_SETTING("--loss", regression_loss), CNN_SETTING("--huber-delta", huber_delta),
    CNN_SETTING("--threshold", threshold), CNN_SETTING("--precision", precision),
    // The run's own records: a resumed run goes on writing them where they are. Not --plot: a
    // checkpoint from elsewhere could name any PNG, which a plot replaces.
    CNN_SETTING("--metrics-out", metrics_out), CNN_SETTING("--csv", csv),
    CNN_SETTING("--tensorboard", tensorboard),
};

#undef CNN_SETTING

// The settings that are where a run writes its records, not how it trains.
bool is_output(const std::string& name) {
  return name == "--metrics-out" || name == "--csv" || name == "--tensorboard";
}

// Settings a resumed run may take from the command line instead of its own: more epochs; another
// budget (a run may move to a machine with less memory; the micro-batch follows it); the data
// under another path (the caller checks that it is the same data); another precision (weights and
// optimizer state are fp32 in every precision, so a run goes on in another, as on another device);
// its records written elsewhere.
bool may_differ(const std::string& name, const Options& given, const Options& run) {
  if (name == "--epochs") return given.epochs >= run.epochs;
  return name == "--memory-budget" || name == "--data" || name == "--precision" || is_output(name);
}

// A saved value as the command line would give it, "--name=value"; nothing for the default (a
// value the command line could not give either, such as --limit 0 for "all").
std::optional<std::string> as_argument(const Setting& s, const json& value) {
  if (value == s.read(Options{})) return std::nullopt;
  std::string word;
  if (value.is_string()) {
    word = value.get<std::string>();
  } else if (value.is_boolean()) {
    word = value.get<bool>() ? "true" : "false";
  } else if (value.is_number()) {
    word = value.dump();
  } else if (value.is_array() && std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_number(); })) {
    for (const json& v : value) word += (word.empty() ? "" : ",") + v.dump();
  } else {
    throw CheckpointError(std::string("its setting ") + s.name + " is " + value.dump() +
                          ", which no command line can give");
  }
  return std::string(s.name) + "=" + word;
}

// The saved settings read as a command line: every option's own check applies to them, and to
// their combination, as when the run was started.
Options parse_saved(const json& saved) {
  std::vector<std::string> arguments;
  for (const Setting& s : kSettings)
    if (saved.contains(s.name))
      if (auto argument = as_argument(s, saved.at(s.name))) arguments.push_back(*argument);
  Options run;
  CLI::App app;
  add_options(app, run);
  std::reverse(arguments.begin(), arguments.end());  // CLI11 takes a vector last word first
  try {
    app.parse(arguments);
    check_combinations(run);
  } catch (const CLI::ParseError& e) {
    throw CheckpointError(std::string("its settings hold what the command line refuses: ") + e.what());
  }
  return run;
}

}  // namespace

json run_settings(const Options& o) {
  json settings = json::object();
  for (const Setting& s : kSettings) settings[s.name] = s.read(o);
  return settings;
}

std::vector<std::string> apply_saved_settings(const json& saved, Options& o) {
  if (!saved.is_object()) throw CheckpointError("its settings are " + saved.dump(-1).substr(0, 80) + ", not options");
  const Options run = parse_saved(saved);
  std::vector<std::string> kept_outputs;
  for (const Setting& s : kSettings) {
    // A setting the run did not record (saved by an earlier version) keeps its default.
    if (!saved.contains(s.name)) continue;
    const std::string name = s.name;
    if (o.given.count(name) && s.read(o) != s.read(run)) {
      if (may_differ(name, o, run)) continue;
      throw UsageError(name + " " + s.read(o).dump() + " differs from the run being resumed (" + s.read(run).dump() +
                       "): a resumed run continues with its own settings" +
                       (name == "--epochs" ? " (--epochs may only grow)" : ""));
    }
    s.copy(run, o);
    if (is_output(name) && !o.given.count(name) && !s.read(o).get<std::string>().empty())
      kept_outputs.push_back(name + " " + s.read(o).get<std::string>());
  }
  return kept_outputs;
}

void require_recordable(const Options& o) {
  for (const Setting& s : kSettings) {
    const json value = s.read(o);
    if (!value.is_string() || is_utf8(value.get<std::string>())) continue;
    throw UsageError(std::string(s.name) + " " + escape_non_utf8(value.get<std::string>()) +
                     ": not UTF-8 text, which a checkpoint cannot record: rename it, or give a link to it whose "
                     "name is UTF-8");
  }
}

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace cnn::app
