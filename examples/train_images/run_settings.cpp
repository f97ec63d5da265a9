#include "run_settings.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <cnnengine/base/error.hpp>
#include "base/utf8.hpp"
#include "usage_error.hpp"

namespace cnn::app {
namespace {

using nlohmann::json;

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

// The value `row` gives `o`, as a checkpoint records it.
json setting_of(const OptionRow& row, const Options& o) {
  return std::visit([&](auto member) { return setting_value(o.*member); }, row.field);
}

bool is_setting(const OptionRow& row) { return row.on_resume != OnResume::not_kept; }

// A saved value as the command line would give it, "--name=value"; nothing for the default (a
// value the command line could not give either, such as --limit 0 for "all").
std::optional<std::string> as_argument(const OptionRow& row, const json& value) {
  if (value == setting_of(row, Options{})) return std::nullopt;
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
    throw CheckpointError(std::string("its setting ") + row.flag + " is " + value.dump() +
                          ", which no command line can give");
  }
  return std::string(row.flag) + "=" + word;
}

// Settings as this version's options give them: --normalize was a flag (true: measured), and so
// was --augment (true: flip).
json as_now(json saved) {
  if (auto normalize = saved.find("--normalize"); normalize != saved.end() && normalize->is_boolean())
    *normalize = normalize->get<bool>() ? "measured" : "";
  if (auto augment = saved.find("--augment"); augment != saved.end() && augment->is_boolean())
    *augment = augment->get<bool>() ? "flip" : "";
  return saved;
}

// The saved settings read as a command line: every option's own check applies to them, and to
// their combination, as when the run was started.
Options parse_saved(const json& saved) {
  std::vector<std::string> arguments;
  for (const OptionRow& row : option_table())
    if (is_setting(row) && saved.contains(row.flag))
      if (auto argument = as_argument(row, saved.at(row.flag))) arguments.push_back(*argument);
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
  for (const OptionRow& row : option_table())
    if (is_setting(row)) settings[row.flag] = setting_of(row, o);
  return settings;
}

std::vector<std::string> apply_saved_settings(const json& recorded, Options& o) {
  if (!recorded.is_object())
    throw CheckpointError("its settings are " + recorded.dump(-1).substr(0, 80) + ", not options");
  const json saved = as_now(recorded);
  Options run = parse_saved(saved);
  std::vector<std::string> kept_outputs;
  for (const OptionRow& row : option_table()) {
    // A setting the run did not record (saved by an earlier version) keeps its default.
    if (!is_setting(row) || !saved.contains(row.flag)) continue;
    const std::string name = row.flag;
    const json given = setting_of(row, o), own = setting_of(row, run);
    if (o.given.count(name) && given != own) {
      if (row.on_resume == OnResume::may_change || row.on_resume == OnResume::record) continue;
      if (row.on_resume == OnResume::may_grow && given >= own) continue;
      throw UsageError(name + " " + given.dump() + " differs from the run being resumed (" + own.dump() +
                       "): a resumed run continues with its own settings" +
                       (row.on_resume == OnResume::may_grow ? " (" + name + " may only grow)" : ""));
    }
    std::visit([&](auto member) { o.*member = std::move(run.*member); }, row.field);
    if (row.on_resume == OnResume::record && !o.given.count(name) && !own.get<std::string>().empty())
      kept_outputs.push_back(name + " " + own.get<std::string>());
  }
  return kept_outputs;
}

void require_recordable(const Options& o) {
  for (const OptionRow& row : option_table()) {
    if (!is_setting(row)) continue;
    const json value = setting_of(row, o);
    if (!value.is_string() || is_utf8(value.get<std::string>())) continue;
    throw UsageError(std::string(row.flag) + " " + escape_non_utf8(value.get<std::string>()) +
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
