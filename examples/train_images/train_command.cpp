#include "train_command.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sched.h>

#include <cnnengine/cnnengine.hpp>
#include "data_identity.hpp"
#include "device_choice.hpp"
#include <cnnengine/engine/core/backend.hpp>
#include "fit/metrics_file.hpp"
#include "inference_commands.hpp"
#include "memory_budget.hpp"
#include "plan_report.hpp"
#include "plot.hpp"
#include "run_settings.hpp"
#include "usage_error.hpp"

namespace cnn::app {
namespace {

using nlohmann::json;

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// The run being resumed: its checkpoint, and what train_images keeps in it.
struct Resumed {
  CheckpointInfo info;
  json settings;            // run_settings() of the run
  std::uint64_t metrics_bytes = 0;
  json data;                // data_identity() of the run's data; null from an earlier version
  std::string data_folder;  // where it was
};

std::optional<Resumed> read_resumed(Options& o, const Ranks& ranks) {
  if (o.resume.empty()) return std::nullopt;
  Resumed r{read_checkpoint(o.resume), {}, 0, {}, {}};
  if (!r.info.training)
    throw UsageError("--resume " + o.resume + ": a file of weights only, with no run to continue; start a new run from "
                     "it with --load");
  try {
    const json saved = json::parse(r.info.training->settings);
    r.settings = saved.at("options");
    r.metrics_bytes = saved.at("metrics_bytes").get<std::uint64_t>();
    r.data = saved.value("data", json());
    if (!r.data.is_null() && !r.data.is_object())
      throw CheckpointError(o.resume + ": corrupt (the data it records is " + r.data.dump() + ")");
    r.data_folder = r.settings.value("--data", std::string());
    const std::string run_budget = r.settings.value("--memory-budget", std::string());
    if (o.given.count("--memory-budget") && o.budget != run_budget)
      std::cout << "note: --memory-budget " << o.budget << " instead of the run's own ("
                << (run_budget.empty() ? "none" : run_budget) << "): the micro-batch follows the budget, and the "
                << "losses may differ from an uninterrupted run in their last digits\n";
    const int trained_over = saved.value("ranks", 1);
    if (trained_over != ranks.count())
      throw UsageError("--resume " + o.resume + ": the run trained over " + std::to_string(trained_over) +
                       " process(es); continue it with as many (mpirun -np " + std::to_string(trained_over) +
                       "), not " + std::to_string(ranks.count()));
  } catch (const json::exception& e) {
    throw CheckpointError(o.resume + ": the run's settings cannot be read: " + e.what());
  }
  try {
    const std::vector<std::string> kept = apply_saved_settings(r.settings, o);
    if (!kept.empty()) std::cout << "the run's records go on where they are: " << joined(kept) << "\n";
  } catch (const CheckpointError& e) {
    throw CheckpointError("--resume " + o.resume + ": " + e.what());
  }
  // A checkpoint of an earlier version does not say what its data was: only its path identifies it.
  if (r.data.is_null() && o.given.count("--data") && o.data != r.data_folder)
    throw UsageError("--data " + o.data + " differs from the run being resumed (" + r.data_folder +
                     "): its checkpoint does not identify its data, so the data must be where it was");
  if (o.save.empty()) o.save = o.resume;  // a resumed run keeps saving where it came from
  return r;
}

// The data set; the run's own, when resumed without --data, with where it was looked for.
data::DatasetSplits open_data(const Options& o, const std::optional<Resumed>& resumed, data::SampleShape target,
                              const Ranks& ranks) {
  try {
    // A resumed run's task is its own (its settings give --task only where it was given).
    std::optional<Task> task;
    if (resumed) task = resumed->info.model.loss.task;
    else if (!o.task.empty()) task = parse_task(o.task);
    return data::open_dataset(o.data, target, o.seed, image_options(o, ranks.prefix()), task);
  } catch (const UsageError&) {
    throw;
  } catch (const ConfigError& e) {  // a task the folder does not hold
    if (o.task.empty()) throw;
    throw UsageError(std::string("--task: ") + e.what());
  } catch (const DataError& e) {
    // Only where the run's data is no longer where it was: data that is there and does not read
    // would not read from anywhere else either.
    std::error_code ec;
    if (!resumed || o.given.count("--data") || std::filesystem::exists(o.data, ec)) throw;
    throw DataError(std::string(e.what()) + " (the data set of the run being resumed is no longer at " + o.data +
                    ": give --data where it is now)");
  }
}

DeviceChoice choose_device(const Options& o, Ranks& ranks) {
  // Ranks on one machine share --algo-cache's file: each save merges what the file holds (atomically).
  DeviceRequest request = library_options(o).device;
  // The cores this process may run on (taskset, mpirun's binding), shared by the machine's ranks
  // (asked of every rank: a collective call).
  const int fitting_threads = ranks.cpu_threads();
  if (!o.given.count("--threads")) request.threads = fitting_threads;
  if (ranks.several()) request.cuda_device = ranks.local_rank();  // a GPU each
  DeviceChoice device = select_device_for(o.device, request);
  if (device.backend->kind() == DeviceKind::cpu) {
    for (const char* option : {"--fast-start", "--algo-cache", "--channels-last"})
      if (o.given.count(option)) std::cout << "note: " << option << " applies to CUDA only: ignored on the CPU\n";
    if (o.precision == "tf32") std::cout << "note: --precision tf32 applies to CUDA only: fp32 on the CPU\n";
  } else if (o.channels_last && !device.backend->takes_channels_last()) {
    std::cout << "note: --channels-last applies to bf16 and fp16: ignored in " << o.precision << "\n";
  }
  return device;
}

// What must be alike on every rank of a data-parallel run, in words, a line each. Not where the
// data is (machines may mount it apart; its sizes and class names are compared), the budget
// (GPUs of different sizes may have their own) nor the records (rank 0 alone writes them).
std::string job_description(const Options& o, const ModelDescription& model, const data::Dataset& train_set,
                            const data::Dataset& test_set, const Backend& backend) {
  nlohmann::json settings = run_settings(o);
  for (const char* own : {"--data", "--memory-budget", "--metrics-out", "--csv", "--tensorboard"})
    settings.erase(own);
  std::string job = settings.dump(1) + "\nnetwork: " + model.network + "\ninput: " + model.input.str() +
                    "\nclasses:";
  for (const std::string& name : model.class_names) job += " " + name;
  job += "\ntraining samples: " + std::to_string(train_set.size()) + "\ntest samples: " +
         std::to_string(test_set.size()) + "\ndevice: " + to_string(backend.kind()) + "\n";
  return job;
}

// Refuses a batch that leaves a rank too few samples: none, or one where BatchNorm needs two on
// every rank (a rank's share of none sits the step out, but a share of one cannot train). The run
// (Fit) leaves out an epoch's last batch where it is too small, and refuses a training set that is.
void check_batch_over_ranks(const Options& o, const TrainingBatchNeed& need, const Ranks& ranks) {
  const auto batch = static_cast<std::size_t>(o.batch), rank_count = static_cast<std::size_t>(ranks.count());
  const std::size_t least = static_cast<std::size_t>(need.samples) * rank_count;
  if (ranks.several() && (batch < rank_count || (need.samples > 1 && batch < least)))
    throw UsageError("--batch " + std::to_string(o.batch) + " over " + std::to_string(ranks.count()) +
                     " ranks leaves a rank too few samples" + (need.samples > 1 ? ": " + need.why : std::string()));
}

// --load of a network on other samples: the flags that would bring this data to them.
void check_load_input(const Options& o, const CheckpointInfo& loaded, const data::DatasetSplits& splits) {
  const Shape wanted = loaded.model.input;
  const data::SampleShape have = splits.train->shape();
  if (wanted == Shape{have.channels, have.height, have.width}) return;
  std::string how;
  if (splits.kind == "idx" || splits.kind.rfind("cifar", 0) == 0)
    how = "--channels and --image-size resize image folders only, and " + o.data + " holds " + splits.kind + " data";
  else if (wanted.rank != 3 || wanted[1] != wanted[2])
    how = "--image-size makes square images only";
  else
    how = "give --channels " + std::to_string(wanted[0]) + " --image-size " + std::to_string(wanted[1]) +
          " to bring the images to them";
  throw UsageError("--load " + o.load + ": its network takes " + wanted.str() + " samples, and " + o.data +
                   " gives " + data::to_string(have) + ": " + how);
}

// Options that would silently do nothing on this data.
void check_data_options(const Options& o, const data::DatasetSplits& splits) {
  if (splits.kind != "idx" && splits.kind.rfind("cifar", 0) != 0) return;  // folders of images
  const std::string holds = splits.kind == "idx" ? "IDX files" : "CIFAR binary files";
  for (const char* option : {"--image-size", "--channels", "--resize-shorter", "--max-image-bytes", "--skip-corrupt"})
    if (o.given.count(option))
      throw UsageError(std::string(option) + " applies to image folders; " + o.data + " holds " + holds + " (" +
                       data::to_string(splits.train->shape()) + ")");
}

std::vector<PathUse> inputs_of(const Options& o, const data::DatasetSplits& splits) {
  std::vector<PathUse> inputs = data_inputs(splits, "--data");
  if (!o.class_names.empty()) inputs.push_back({"--class-names", o.class_names});
  std::error_code ec;
  if (std::filesystem::exists(o.model, ec)) inputs.push_back({"--model", o.model});
  if (!o.load.empty()) inputs.push_back({"--load", o.load});
  if (!o.resume.empty()) inputs.push_back({"--resume", o.resume});
  return inputs;
}

RunFiles files_of(const Options& o, const data::DatasetSplits& splits) {
  RunFiles files;
  if (!o.save.empty()) files.outputs.push_back({"--save", o.save, OutputKind::checkpoint});
  if (!o.save.empty() && o.keep_best)
    files.outputs.push_back({"--keep-best", best_checkpoint_path(o.save).string(), OutputKind::checkpoint});
  if (!o.metrics_out.empty()) files.outputs.push_back({"--metrics-out", o.metrics_out, OutputKind::metrics});
  if (!o.trace.empty()) files.outputs.push_back({"--trace", o.trace, OutputKind::trace});
  if (!o.plot.empty()) files.outputs.push_back({"--plot", o.plot, OutputKind::plot});
  if (!o.csv.empty()) files.outputs.push_back({"--csv", o.csv, OutputKind::csv});
  if (!o.tensorboard.empty()) files.outputs.push_back({"--tensorboard", o.tensorboard, OutputKind::folder});
  if (!o.cache.empty() && o.cache != "memory") files.outputs.push_back({"--cache", o.cache, OutputKind::folder});
  if (!o.export_onnx.empty()) files.outputs.push_back({"--export-onnx", o.export_onnx, OutputKind::onnx});
  if (o.given.count("--algo-cache") && !algorithm_cache_of(o).empty())
    files.outputs.push_back({"--algo-cache", algorithm_cache_of(o), OutputKind::algorithm_cache});
  files.inputs = inputs_of(o, splits);
  files.overwrite = o.overwrite;
  // A run saves over the checkpoint it starts from (a resumed run, by default).
  files.may_replace = {{"--save", "--load"}, {"--save", "--resume"}};
  if (!o.resume.empty()) files.own_checkpoints = {o.resume, best_checkpoint_path(o.resume)};
  return files;
}

// --normalize measured measures the training set, imagenet takes ImageNet's; --mean and --std
// give the values; a resumed run has its own.
data::Normalization normalization_of(const Options& o, const std::optional<Resumed>& resumed,
                                     const data::Dataset& train_set) {
  if (resumed) return resumed->info.model.preprocessing.normalization;
  if (!o.mean.empty()) return data::Normalization{o.mean, o.std};
  // --augment photo normalises as torchvision's recipe does, unless told otherwise.
  const std::string normalize = !o.normalize.empty() || o.augment != "photo" ? o.normalize
                                : train_set.shape().channels == 3         ? "imagenet"
                                                                          : "measured";
  if (normalize.empty()) return {};
  if (normalize == "imagenet") {
    if (train_set.shape().channels != 3)
      throw UsageError("--normalize imagenet: ImageNet's statistics are of RGB images, and " + o.data + " gives " +
                       data::to_string(train_set.shape()) + " samples (--channels 3 converts an image folder's)");
    std::cout << "normalisation: ImageNet's, mean 0.485 0.456 0.406, standard deviation 0.229 0.224 0.225\n";
    return data::imagenet_normalization();
  }
  data::Normalization n = data::measure_normalization(train_set);
  std::cout << "normalisation: mean";
  for (float m : n.mean) std::cout << " " << m;
  std::cout << ", standard deviation";
  for (float s : n.stddev) std::cout << " " << s;
  std::cout << " (measured on the training set)\n";
  return n;
}

// An option of another task than the run's would silently do nothing.
void check_task_options(const Options& o, Task task) {
  const struct {
    const char* option;
    Task task;
  } owned[] = {{"--label-smoothing", Task::classify}, {"--class-weights", Task::segment},
               {"--pos-weights", Task::multilabel},   {"--threshold", Task::multilabel},
               {"--loss", Task::regress},             {"--huber-delta", Task::regress}};
  for (const auto& [option, owner] : owned)
    if (o.given.count(option) && owner != task)
      throw UsageError(std::string(option) + " applies to --task " + to_string(owner) + "; this run's task is " +
                       to_string(task));
  if (o.given.count("--huber-delta") && o.regression_loss != "huber")
    throw UsageError("--huber-delta applies to --loss huber; this run's loss is " + o.regression_loss);
}

// --load: the preprocessing the file records (what its network was trained on, or what a conversion
// recorded) for what the options leave open: the image folder's size and channels (its network's
// input, where square), the shorter side it was framed by and its normalisation. Written into the
// options, the run's settings record them and a resumed run opens its data alike. Returns what
// was taken, to show (empty for nothing): the image folders' options, then the normalisation.
struct Adopted {
  std::string images, normalization;
};
Adopted adopt_loaded_preprocessing(Options& o, const CheckpointInfo& loaded) {
  const data::Preprocessing& pre = loaded.model.preprocessing;
  const Shape& input = loaded.model.input;
  Adopted taken;
  auto take = [&](const std::string& what) { taken.images += (taken.images.empty() ? "" : ", ") + what; };
  if (input.rank == 3 && input[1] == input[2] && !o.given.count("--image-size")) {
    o.image_size = input[1];
    take("--image-size " + std::to_string(o.image_size));
  }
  if (input.rank == 3 && (input[0] == 1 || input[0] == 3) && !o.given.count("--channels")) {
    o.channels = input[0];
    take("--channels " + std::to_string(o.channels));
  }
  if (pre.resize_shorter_side > 0 && !o.given.count("--resize-shorter")) {
    o.resize_shorter = pre.resize_shorter_side;
    take("--resize-shorter " + std::to_string(o.resize_shorter));
  }
  const bool normalised = o.given.count("--normalize") || o.given.count("--mean") || o.given.count("--std");
  if (!pre.normalization.empty() && !normalised) {
    o.mean = pre.normalization.mean;
    o.std = pre.normalization.stddev;
    auto values = [](const std::vector<float>& v) {
      std::string text;
      for (float x : v) text += (text.empty() ? "" : ",") + number_text(x);
      return text;
    };
    taken.normalization = "--mean " + values(o.mean) + " --std " + values(o.std);
  }
  return taken;
}

// --load with no --model: the saved network (a checkpoint's, an ONNX model's), its head replaced
// where the data has other classes; the run loads the layers that match (the rest initialised).
Network loaded_network(const Options& o, const CheckpointInfo& info, const data::Dataset& train_set) {
  require_network(info, o.load);
  if (info.model.loss.task != train_set.task())
    throw UsageError("--load " + o.load + ": its network is trained to " + to_string(info.model.loss.task) +
                     ", and " + o.data + " is " + to_string(train_set.task()) + " data: give --model");
  FineTuningNetwork loaded = [&] {
    try {
      return network_for_fine_tuning(info, o.load, train_set.num_classes(), o.num_classes > 0);
    } catch (const ShapeError& e) {
      throw UsageError(std::string("--load: ") + e.what() + "; give --model");
    }
  }();
  LossOptions loss = library_options(o).loss;
  loss.task = train_set.task();
  loaded.network.set_loss(loss);
  if (!loaded.new_head.empty())
    std::cout << "new head for " << train_set.num_classes() << " classes: " << loaded.new_head << "\n";
  return std::move(loaded.network);
}

// The backbone's last node: --freeze's (a node number, or "backbone": all before the last layer
// with parameters, the head), or without it the head's predecessor.
int backbone_through(const Options& o, const Network& network) {
  const std::string word = o.freeze.empty() ? "backbone" : o.freeze;
  const std::string option = o.freeze.empty() ? "--backbone-lr-scale" : "--freeze " + o.freeze;
  int through = -1;
  if (word == "backbone") {
    through = network.head() - 1;
    if (through < 1) throw UsageError(option + ": the network has no layers before its head");
    return through;
  }
  const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), through);
  if (error != std::errc() || end != word.data() + word.size())
    throw UsageError(option + ": give a node number of the model's summary, or 'backbone'");
  return through;
}

// --freeze: the backbone frozen, running in --freeze-mode.
void freeze(const Options& o, Network& network) {
  if (o.freeze.empty()) {
    if (o.given.count("--freeze-mode") || o.unfreeze_at > 0)
      throw UsageError(std::string(o.unfreeze_at > 0 ? "--unfreeze-at" : "--freeze-mode") +
                       " applies to frozen layers: give --freeze");
    return;
  }
  network.set_frozen_mode(o.freeze_mode == "train" ? FrozenMode::train : FrozenMode::eval);
  const int through = backbone_through(o, network);
  try {
    network.freeze_through(through);
  } catch (const ConfigError& e) {
    throw UsageError("--freeze " + o.freeze + ": " + e.what());
  }
}

Network build_network(const Options& o, const std::optional<Resumed>& resumed, const CheckpointInfo* loaded,
                      const data::Dataset& train_set) {
  const data::SampleShape shape = train_set.shape();
  const Shape input{shape.channels, shape.height, shape.width};
  if (!resumed) {
    const Task task = train_set.task();
    check_task_options(o, task);
    if (loaded && !o.given.count("--model")) return loaded_network(o, *loaded, train_set);
    Network network = make_network(o.model, input, train_set.num_classes());
    LossOptions loss = library_options(o).loss;
    loss.task = task;
    network.set_loss(loss);
    try {
      network.check_loss();
    } catch (const Error& e) {
      throw UsageError("--model " + o.model + " on " + to_string(task) + " data (" + data::to_string(shape) + ", " +
                       std::to_string(train_set.num_classes()) + (task == Task::regress ? " targets" : " classes") +
                       "): " + e.what() + (task == Task::segment ? " (the unet preset segments)" : ""));
    }
    return network;
  }
  const ModelDescription& model = resumed->info.model;
  if (!(model.input == input))
    throw UsageError("--resume " + o.resume + ": the run trained on " + model.input.str() + " samples, the data now gives " +
                     input.str());
  return checkpoint_network(resumed->info, o.resume, train_set.num_classes());
}

// `first` and then `then`, where each is set.
template <typename... Args>
std::function<void(Args...)> in_turn(std::function<void(Args...)> first, std::function<void(Args...)> then) {
  if (!first || !then) return first ? first : then;
  return [first, then](Args... args) {
    first(args...);
    then(args...);
  };
}

// The run's own callbacks, then `extra`'s.
FitCallbacks in_turn(const FitCallbacks& own, const FitCallbacks& extra) {
  FitCallbacks both;
  both.on_start = in_turn(own.on_start, extra.on_start);
  both.on_run_begin = in_turn(own.on_run_begin, extra.on_run_begin);
  both.on_epoch_begin = in_turn(own.on_epoch_begin, extra.on_epoch_begin);
  both.on_step = in_turn(own.on_step, extra.on_step);
  both.on_evaluation_begin = in_turn(own.on_evaluation_begin, extra.on_evaluation_begin);
  both.on_evaluation_batch = in_turn(own.on_evaluation_batch, extra.on_evaluation_batch);
  both.on_evaluation = in_turn(own.on_evaluation, extra.on_evaluation);
  both.on_epoch_end = in_turn(own.on_epoch_end, extra.on_epoch_end);
  both.on_run_end = in_turn(own.on_run_end, extra.on_run_end);
  return both;
}

// --find-lr: the range test's table, its suggestion, its curve (--plot) and JSON lines.
int find_learning_rate_command(const Options& o, Network& network, Backend& backend, const data::Dataset& training,
                               const FitOptions& fit) {
  std::cout << "learning-rate range test: " << o.batch << " samples a step, the rate from 1e-7 to 10 over 100 steps"
            << (o.limit ? " (the first " + std::to_string(o.limit) + " samples)" : std::string()) << "\n";
  const LearningRateRange range = find_learning_rate(network, backend, training, fit);
  MetricsFile metrics = MetricsFile::written_whole(o.metrics_out);
  std::printf("%12s  %s\n", "rate", "smoothed loss");
  for (std::size_t i = 0; i < range.rates.size(); ++i) {
    if (i % 10 == 0 || i + 1 == range.rates.size())
      std::printf("%12.3g  %.4f\n", static_cast<double>(range.rates[i]), range.losses[i]);
    metrics.write({{"type", "lr_range"}, {"step", i + 1}, {"lr", range.rates[i]}, {"loss", range.losses[i]}});
  }
  metrics.write({{"type", "lr_suggestion"}, {"steepest", range.suggestion}, {"lowest_loss", range.lowest_loss_rate},
                 {"ended", range.ended}});
  metrics.commit();
  if (!o.plot.empty()) write_range_plot(o.plot, range.rates, range.losses, range.suggestion);
  std::printf("ended at %s; the loss falls fastest at %.3g, and is lowest at %.3g: try --lr %.3g (or %.3g, a tenth of "
              "the lowest's)\n",
              range.ended.c_str(), static_cast<double>(range.suggestion), static_cast<double>(range.lowest_loss_rate),
              static_cast<double>(range.suggestion), static_cast<double>(range.lowest_loss_rate) / 10);
  return 0;
}

// --augment photo evaluates as torchvision's recipe does: the shorter side resized to the crop's
// size / 0.875, rounded down as timm does (256 for 224), the centre cropped; unless
// --resize-shorter says otherwise.
void apply_photo_framing(Options& o) {
  if (o.augment != "photo" || o.given.count("--resize-shorter") || o.image_size <= 0 || o.resize_shorter > 0) return;
  o.resize_shorter = static_cast<int>(std::floor(o.image_size / 0.875));
}

// --cache DIR: made where missing, before the data opens (and fills it); never the data's folder
// or inside it, whose files a run only reads.
void prepare_cache_folder(const Options& o) {
  if (o.cache.empty() || o.cache == "memory") return;
  std::error_code ec;
  const std::filesystem::path cache = std::filesystem::weakly_canonical(o.cache, ec);
  const std::filesystem::path data = std::filesystem::weakly_canonical(o.data, ec);
  const auto [end, _] = std::mismatch(data.begin(), data.end(), cache.begin(), cache.end());
  if (end == data.end())
    throw UsageError("--cache " + o.cache + ": inside the data's folder " + o.data + ", which a run only reads: give "
                     "a folder elsewhere");
  std::filesystem::create_directories(o.cache, ec);
  if (ec) throw UsageError("--cache " + o.cache + ": cannot make the folder: " + ec.message());
}

// The cores the training step leaves the loader: of the cores this process may run on (taskset, a
// container) shared by the machine's ranks, the step's threads (--threads, else all of them) on
// the CPU, one for a GPU's step. At least 1, at most 8. --benchmark-loader has no step: every core.
int loader_threads_for(const Options& o, DeviceKind device, int local_ranks) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const int affinity = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 1;
  const int cores = std::max(1, affinity / std::max(1, local_ranks));
  const int step = o.benchmark_loader ? 0 : device != DeviceKind::cpu ? 1 : o.threads > 0 ? o.threads : cores;
  return std::clamp(cores - step, 1, 8);
}

// --benchmark-loader: the training loader over one epoch as the run would draw it, timed alone; a
// JSON line an epoch, over --epochs where given (a decoded cache's later epochs read it).
int benchmark_loader_command(const Options& o, const data::Dataset& training, Backend& backend,
                             const FitOptions& fit) {
  data::LoaderOptions options = loader_options(fit, fit.loading);
  options.normalization = fit.model ? fit.model->preprocessing.normalization : fit.loading.normalization;
  // Its staging under the run's budget, as a run's (Fit's) loader takes it.
  memory::MemoryOptions stack_options = memory_options(fit);
  stack_options.trace.clear();
  memory::MemoryStack stack = memory_stack_for(backend, stack_options);
  data::Loader::book(stack, training, options);
  data::Loader loader(training, options, stack);
  std::cout << "loader: " << loader.batches_per_epoch() << " batches of " << options.batch << " from "
            << training.description() << " on " << options.threads << (options.threads == 1 ? " thread" : " threads")
            << std::endl;
  const int epochs = o.given.count("--epochs") ? o.epochs : 1;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    std::size_t images = 0;
    loader.start_epoch(epoch);
    while (const auto batch = loader.next()) images += static_cast<std::size_t>(batch->size);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const json line{{"loader_images_per_second", seconds > 0 ? static_cast<double>(images) / seconds : 0.0},
                    {"epoch", epoch + 1},
                    {"images", images},
                    {"seconds", seconds},
                    {"threads", options.threads},
                    {"batch", options.batch},
                    {"augmentation", data::describe_augmentation(options)}};
    std::cout << line.dump() << std::endl;
  }
  return 0;
}

}  // namespace

bool numbered_classes(const std::vector<std::string>& names) {
  for (std::size_t c = 0; c < names.size(); ++c)
    if (names[c] != std::to_string(c)) return false;
  return true;
}

void name_the_classes(const Options& o, data::DatasetSplits& splits) {
  if (o.class_names.empty()) return;
  try {
    data::name_classes(splits, o.class_names);
  } catch (const DataError& e) {
    throw DataError(std::string("--class-names: ") + e.what());
  }
}

data::ImageFolderOptions image_options(const Options& o, const std::string& warning_prefix) {
  data::ImageFolderOptions images = library_options(o).images;
  // The random resized crop takes its window from the image as the file stores it.
  if (o.augment == "photo") images.eager_decode_limit = 0;
  images.on_skipped = [prefix = warning_prefix](const std::string& warning) {
    std::cerr << prefix << "warning: " << warning << "\n";
  };
  return images;
}

int train(Options o, Ranks& ranks, const FitCallbacks& extra) {
  std::optional<Resumed> resumed = read_resumed(o, ranks);
  // Recorded as absolute paths: a resumed run finds its data, and its records, from any working folder.
  o.data = std::filesystem::absolute(o.data).lexically_normal().string();
  for (std::string* record : {&o.metrics_out, &o.csv, &o.tensorboard})
    if (!record->empty()) *record = std::filesystem::absolute(*record).lexically_normal().string();
  if (!o.cache.empty() && o.cache != "memory") o.cache = std::filesystem::absolute(o.cache).lexically_normal().string();
  if (!o.save.empty()) require_recordable(o);
  if (o.warmup_epochs > o.epochs)
    throw UsageError("--warmup-epochs " + number_text(o.warmup_epochs) + " is more than the run's " +
                     std::to_string(o.epochs) + (o.epochs == 1 ? " epoch" : " epochs"));

  if (!o.export_onnx.empty()) require_onnx_export();

  // The device before the data: --device cuda without a GPU fails before anything is read.
  DeviceChoice device = choose_device(o, ranks);
  Backend& backend = *device.backend;
  ranks.agree_on_device(backend.kind());
  // Over several ranks: the sums reach the device's memory (NCCL on GPUs, MPI on the CPU).
  std::unique_ptr<Communicator> device_sums;
  Communicator* communicator = ranks.world();
  if (communicator) {
    device_sums = make_device_communicator(backend, *communicator);
    if (device_sums) communicator = device_sums.get();
  }
  if (o.sync_batchnorm && !communicator)
    throw UsageError("--sync-batchnorm synchronises BatchNorm over the ranks of mpirun -np N: this run has one");

  // --load's file, read once; what it records of its images is the default of the data's.
  std::optional<CheckpointInfo> loaded;
  Adopted adopted;
  if (!o.load.empty()) {
    loaded = read_checkpoint(o.load);
    adopted = adopt_loaded_preprocessing(o, *loaded);
  }
  apply_photo_framing(o);
  data::SampleShape target;
  if (o.image_size) target.height = target.width = o.image_size;
  target.channels = o.channels;  // 0: as the first image is
  if (o.resize_shorter > 0) {
    try {
      data::check_framing(target, o.resize_shorter);
    } catch (const ConfigError& e) {
      throw UsageError("--resize-shorter " + std::to_string(o.resize_shorter) + ": " + e.what() + " (--image-size)");
    }
  }
  prepare_cache_folder(o);
  data::DatasetSplits splits = open_data(o, resumed, target, ranks);
  name_the_classes(o, splits);
  const json data = data_identity(o.data, splits);
  if (resumed && !resumed->data.is_null()) require_same_data(resumed->data, resumed->data_folder, data, o.data);
  check_data_options(o, splits);
  if (!o.plot.empty()) check_plotting();
  // Every output, once the data's files are known and before any work, by rank 0 alone, which
  // writes them.
  if (ranks.writes()) check_command_files(files_of(o, splits));
  std::cout << "device: " << device.reason << "\n        " << backend.description() << "\n";
  if (communicator)
    std::cout << "ranks: " << communicator->describe() << "; each takes its share of every batch of " << o.batch
              << "; BatchNorm statistics "
              << (o.sync_batchnorm ? "over every rank's micro-batch" : "per rank (rank 0's kept)") << "\n";

  const bool folders = splits.kind != "idx" && splits.kind.rfind("cifar", 0) != 0;
  if (!adopted.images.empty() && folders) std::cout << "images as " << o.load << " takes them: " << adopted.images << "\n";
  if (!adopted.normalization.empty())
    std::cout << "normalisation as " << o.load << " records it: " << adopted.normalization << "\n";
  if (loaded) check_load_input(o, *loaded, splits);
  if (o.num_classes > 0 && o.num_classes != splits.train->num_classes())
    throw UsageError("--num-classes " + std::to_string(o.num_classes) + ": " + o.data + " holds " +
                     std::to_string(splits.train->num_classes()) + " classes, the head's outputs");
  Network network = build_network(o, resumed, loaded ? &*loaded : nullptr, *splits.train);
  freeze(o, network);
  const bool from_load = !resumed && !o.load.empty() && !o.given.count("--model");
  std::cout << "model: " << (resumed ? "the network of " + o.resume : from_load ? "the network of " + o.load : o.model)
            << "\n" << network.summary();
  ModelDescription model = resumed ? resumed->info.model : describe_model(network);
  if (!resumed) {
    model.class_names = splits.train->class_names();
    model.preprocessing.normalization = normalization_of(o, resumed, *splits.train);
    model.preprocessing.resize_shorter_side = splits.train->resize_shorter_side();
  }
  data::check_normalization(model.preprocessing.normalization, splits.train->shape().channels);
  ranks.check_same_job(job_description(o, model, *splits.train, *splits.test, backend));
  check_batch_over_ranks(o, network.training_batch_need(), ranks);

  FitOptions fit = library_options(o).fit;
  if (o.backbone_lr_scale != 1) fit.optimizer.backbone_through = backbone_through(o, network);
  fit.memory_budget = memory_budget_of(o, backend, ranks.local_count(), ranks.writes());
  fit.communicator = communicator;
  if (!ranks.writes()) fit.memory_trace.clear();  // rank 0 writes the trace
  if (o.augment == "flip" && o.crop_padding == 0 && !resumed)
    std::cout << "note: --augment flips the images at random, nothing more; --crop-padding N adds random crops, "
                 "--augment photo random resized crops\n";
  if (!o.given.count("--loader-threads"))
    fit.loading.threads = loader_threads_for(o, backend.kind(), ranks.local_count());
  fit.model = model;
  fit.settings = json{{"options", run_settings(o)}, {"data", data}}.dump();
  // Graphs wherever they can run, the library's default (faster on an H100 in every case
  // measured: README); where --cuda-graph asked for them and the settings keep them off,
  // check_combinations refused.
  if (o.no_cuda_graph) {
    fit.capture_graphs = GraphCapture::never;
  } else if (o.cuda_graph || backend.kind() == DeviceKind::cuda) {
    const std::string why_not = graph_capture_blocked(fit, backend);
    std::cout << "cuda graphs: " << (why_not.empty() ? "on" : "off (" + with_flags(why_not) + ")") << "\n";
  }

  if (o.plan_only) {
    // The memory stack a run builds: one budget over the trainer's memory, the libraries'
    // workspaces and the loaders' staging (booked first: the plan leaves them their room).
    memory::MemoryOptions stack_options = memory_options(fit);
    stack_options.trace.clear();
    memory::MemoryStack stack = memory_stack_for(backend, stack_options);
    book_fit_loaders(stack, FitData(splits), fit);
    return print_plan(network, backend, fit, stack);
  }

  if (o.find_lr) return find_learning_rate_command(o, network, backend, *splits.train, fit);
  if (o.benchmark_loader) return benchmark_loader_command(o, *splits.train, backend, fit);

  fit.callbacks.on_start = [&](Trainer& trainer) {
    if (fit.memory_strategy != memory::Strategy::planned)
      std::cout << "allocator: " << o.allocator
                << (fit.memory_strategy == memory::Strategy::arena
                        ? " of " + memory::format_bytes(trainer.memory_stack().arena_capacity())
                        : std::string())
                << " for step buffers\n";
    trainer.on_recovery = [prefix = ranks.prefix()](const std::string& message) {
      std::cerr << "\n" << prefix << "recovered: " << message << "\n";
    };
    if (o.deterministic || backend.kind() != DeviceKind::cpu) std::cout << backend.determinism_report() << "\n";
    std::cout << std::flush;
  };
  if (!o.plot.empty() && ranks.writes())
    fit.callbacks.on_epoch_end = [&](const EpochRecord&, FitControl& control) {
      write_plot(o.plot, control.progress(), control.batches_per_epoch());
    };

  fit.callbacks = in_turn(fit.callbacks, extra);
  Fit run(network, backend, splits, fit);
  const FitResult result = run.run();
  if (result.signal) {
    if (!o.save.empty()) std::cout << "continue it with --resume " << o.save << "\n";
    return 128 + result.signal;
  }
  if (!o.export_onnx.empty() && ranks.writes()) {
    const OnnxExportReport report =
        export_onnx(o.export_onnx, network, run.trainer().parameters(), run.model(), onnx_export_options(o));
    std::cout << "exported the trained model to " << o.export_onnx << describe_onnx_export(network, onnx_export_options(o))
              << "\n";
    warn_of_saturation(report);
  }
  run.trainer().finish();  // every byte given back, so the trace is whole when it is checked
  return 0;
}

}  // namespace cnn::app
