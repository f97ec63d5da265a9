#include "run_settings.hpp"

#include "cnnengine/base/error.hpp"
#include "usage_error.hpp"

namespace cnn::app {
namespace {

using nlohmann::json;

// One defining option: its name on the command line and where it lives in Options.
struct Setting {
  const char* name;
  json (*read)(const Options&);
  void (*write)(Options&, const json&);
};

#define CNN_SETTING(name, member)                                               \
  Setting {                                                                      \
    name, [](const Options& o) { return json(o.member); },                      \
        [](Options& o, const json& j) { j.get_to(o.member); }                    \
  }

const Setting kSettings[] = {
    CNN_SETTING("--data", data),           CNN_SETTING("--model", model),
    CNN_SETTING("--epochs", epochs),       CNN_SETTING("--batch", batch),
    CNN_SETTING("--micro-batch", micro_batch), CNN_SETTING("--accumulate", accumulate),
    CNN_SETTING("--lr", lr),               CNN_SETTING("--optimizer", optimizer),
    Setting{"--weight-decay",  // not given: the optimizer's default, null
            [](const Options& o) { return o.weight_decay ? json(*o.weight_decay) : json(); },
            [](Options& o, const json& j) { o.weight_decay = j.is_null() ? std::nullopt : std::optional(j.get<float>()); }},
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
};

#undef CNN_SETTING

}  // namespace

json run_settings(const Options& o) {
  json settings = json::object();
  for (const Setting& s : kSettings) settings[s.name] = s.read(o);
  return settings;
}

void apply_saved_settings(const json& saved, Options& o) {
  try {
    for (const Setting& s : kSettings) {
      // A setting the run did not record (saved by an earlier version) keeps its default.
      if (!saved.contains(s.name)) continue;
      const json& value = saved.at(s.name);
      const std::string name = s.name;
      if (o.given.count(name) && s.read(o) != value) {
        if (name == "--epochs" && o.epochs >= value.get<int>()) continue;  // more epochs: the run goes on
        throw UsageError(name + " " + s.read(o).dump() + " differs from the run being resumed (" + value.dump() +
                         "): a resumed run continues with its own settings" +
                         (name == "--epochs" ? " (--epochs may only grow)" : ""));
      }
      s.write(o, value);
    }
  } catch (const json::exception& e) {
    throw CheckpointError(std::string("the checkpoint's settings cannot be read: ") + e.what());
  }
}

}  // namespace cnn::app
