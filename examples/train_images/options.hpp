#pragma once
// train_images' command line: the options it fills, and the table of them (one row an option).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <cnnengine/backends/device/device.hpp>
#include <cnnengine/base/task.hpp>
#include <cnnengine/data/dataset.hpp>
#include <cnnengine/fit/fit.hpp>

namespace cnn::app {

// What the command line gave, a field an option: its row in options.cpp says what it means.
struct Options {
  std::string data = std::string(data::kFashionMnistFolder);
  std::string class_names;
  std::string model = "small";
  std::string freeze;  // a node number, or "backbone"; empty: nothing frozen
  std::string freeze_mode = "eval";
  int unfreeze_at = 0;
  float backbone_lr_scale = 1;
  std::string task;  // empty: what the data's layout holds
  float label_smoothing = 0;
  std::vector<float> class_weights, positive_weights;
  std::string regression_loss = "mse";
  float huber_delta = 1;
  float threshold = 0.5f;
  bool overlay = false;
  std::string predict_out = "predictions";
  int epochs = 8;
  int batch = 64;
  int micro_batch = 0;  // 0: not given
  int accumulate = 0;   // 0: not given
  float lr = 1e-3f;
  std::string optimizer = "adamw";
  std::optional<float> weight_decay;  // not given: the optimizer's default
  float momentum = 0.9f;
  bool nesterov = false;
  std::string schedule = "cosine";
  double warmup_epochs = 0.0;
  double lr_step_epochs = 0.0;  // 0: a third of the run
  float lr_step_factor = 0.1f;
  int plateau_patience = 10;  // PyTorch's and Keras's default
  float plateau_factor = 0.1f;
  std::uint64_t seed = 1;
  int threads = 0;
  std::string device = "auto";
  std::string precision = "fp32";
  bool fast_start = false;
  bool deterministic = false;
  bool channels_last = false;
  std::string algo_cache;      // empty: default_algorithm_cache(); "none": no file
  bool cuda_graph = false;     // asked for: refused where it cannot run
  bool no_cuda_graph = false;  // otherwise graphs are on wherever they can run
  std::string budget;
  std::string metrics_out;
  std::string save;
  long save_every = 0;  // 0: at the end of each epoch only
  bool overwrite = false;
  std::string load;
  int num_classes = 0;  // with --load: a new head of this many classes
  std::string resume;
  std::size_t limit = 0;
  int image_size = 0;
  int channels = 0;
  int resize_shorter = 0;  // 0: images stretched to --image-size
  std::string max_image_bytes = "256MiB";
  bool skip_corrupt = false;
  std::string augment;  // "flip", "photo"; empty: none
  int crop_padding = 0;
  std::vector<float> crop_scale;    // --augment photo: MIN,MAX of the area (empty: 0.08,1)
  std::vector<float> color_jitter;  // F, or B,C,S (empty: none)
  float random_erasing = 0;
  int loader_threads = 0;  // 0: the cores the step leaves (loader_threads_for)
  std::string cache;  // "memory" or a folder; empty: none
  std::string cache_size = "4GiB";
  bool benchmark_loader = false;
  std::string normalize;  // "measured", "imagenet"; empty: none
  std::vector<float> mean, std;
  bool quiet = false;
  bool doctor = false;
  bool plan_only = false;
  std::string allocator = "planned";
  std::string recompute = "none";
  bool sync_batchnorm = false;
  std::string trace;
  std::string plot;
  bool keep_best = false;
  bool restore_best = false;
  int early_stop = 0;  // 0: never
  double validation_split = 0;
  std::string monitor = "val_loss";
  std::size_t limit_eval = 0;
  bool test_each_epoch = false;
  bool find_lr = false;
  std::string tensorboard;
  std::string csv;
  // The other commands, with --load: evaluate it, classify images, or export it.
  bool evaluate = false;
  std::vector<std::string> predict;
  int top = 3;
  std::string export_onnx;
  std::string export_onnx_precision = "fp32";

  // The options given on the command line, by name ("--lr"): a resumed run refuses those that
  // differ from its own settings.
  std::set<std::string> given;
};

// CPU threads beyond this are a typo, and would fail inside OpenMP with no message of ours.
inline constexpr int kMaxThreads = 256;

// What --resume does with an option the run's checkpoint records (run_settings.cpp).
enum class OnResume {
  not_kept,    // not the run's: the device, the threads, where it saves; each run gives its own
  kept,        // the run's own: given with another value, refused
  may_grow,    // the run's own, or given larger (--epochs: the run goes on for longer)
  may_change,  // the run's own unless given (another budget, precision, or the data elsewhere)
  record,      // where the run writes a record: it goes on writing there unless given elsewhere
};

// The library's options, as the command line's options feed them (the table's last column).
struct LibraryOptions {
  FitOptions fit;
  LossOptions loss;  // its task is the data's
  data::ImageFolderOptions images;
  DeviceRequest device;  // a data-parallel run's ranks may take other threads and GPUs
};

// The field of Options an option fills.
using OptionField =
    std::variant<std::string Options::*, int Options::*, long Options::*, unsigned long Options::*,
                 float Options::*, double Options::*, bool Options::*, std::optional<float> Options::*,
                 std::vector<float> Options::*, std::vector<std::string> Options::*>;

// One option of the command line, a row of the table (options.cpp): its flag, the field it fills,
// its --help line, whether a resumed run keeps it, its check, and what it feeds in the library.
struct OptionRow {
  const char* flag;
  OptionField field;
  std::string help;
  OnResume on_resume = OnResume::not_kept;
  std::optional<CLI::Validator> check;
  // The library option it feeds, as the library's OptionError names it ("batch"), and how
  // it goes there.
  const char* library_field = nullptr;
  void (*feed)(const Options&, LibraryOptions&) = nullptr;
};

// Every option, in the order --help lists them.
const std::vector<OptionRow>& option_table();
// The flag whose option feeds the library's `field`; empty where none does.
std::string flag_of_library_field(const std::string& field);
// A library message with each field it quotes in backticks (`validation_split`) named by the flag
// that feeds it, where one does.
std::string with_flags(std::string message);
// The library's options as the table's rows feed them from `o`.
LibraryOptions library_options(const Options& o);

// --augment photo, --crop-scale, --color-jitter, --random-erasing as the loader takes them.
data::PhotoAugmentation photo_augmentation_of(const Options& o);

// --cache and --cache-size as the image folders take them.
data::DecodedCacheOptions cache_options_of(const Options& o);

// The file --algo-cache names: its default where not given, empty for "none".
std::string algorithm_cache_of(const Options& o);


// Registers every option of the table, bound to `o`, on `app`.
void add_options(CLI::App& app, Options& o);
// After parsing: the names of the options the command line gave, into o.given.
void record_given(const CLI::App& app, Options& o);
// What no single option's check can see: throws CLI::ValidationError for conflicting options.
void check_combinations(const Options& o);

}  // namespace cnn::app
