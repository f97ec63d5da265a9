#include "train_command.hpp"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "cnnengine.hpp"
#include "data_identity.hpp"
#include "inference_commands.hpp"
#include "limited_dataset.hpp"
#include "memory_budget.hpp"
#include "output_paths.hpp"
#include "plan_report.hpp"
#include "plot.hpp"
#include "run_settings.hpp"
#include "stop_signal.hpp"
#include "training_loop.hpp"
#include "usage_error.hpp"

namespace cnn::app {
namespace {

using nlohmann::json;

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
    apply_saved_settings(r.settings, o);
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
    return data::open_dataset(o.data, target, o.seed, image_options(o, ranks.prefix()));
  } catch (const DataError& e) {
    if (!resumed || o.given.count("--data")) throw;
    throw DataError(std::string(e.what()) + " (the data set of the run being resumed: give --data where it is now)");
  }
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

DeviceChoice choose_device(const Options& o, Ranks& ranks) {
  DeviceRequest request;
  request.device = parse_device(o.device);
  // The cores this process may run on (taskset, mpirun's binding), shared by the machine's ranks
  // (asked of every rank: a collective call).
  const int fitting_threads = ranks.cpu_threads();
  request.threads = o.given.count("--threads") ? o.threads : fitting_threads;
  if (ranks.several()) request.cuda_device = ranks.local_rank();  // a GPU each
  request.tf32 = o.precision == "tf32";
  request.fast_start = o.fast_start;
  request.deterministic = o.deterministic;
  // Ranks on one machine share the file: each save merges what the file holds (atomically).
  request.algorithm_cache = algorithm_cache_of(o);
  DeviceChoice device = select_device(request);
  if (device.backend->kind() == DeviceKind::cpu)
    for (const char* option : {"--precision", "--fast-start", "--algo-cache"})
      if (o.given.count(option)) std::cout << "note: " << option << " applies to CUDA only: ignored on the CPU\n";
  return device;
}

// What must be alike on every rank of a data-parallel run, in words, a line each. Not where the
// data is (machines may mount it apart; its sizes and class names are compared) nor the budget
// (GPUs of different sizes may have their own).
std::string job_description(const Options& o, const ModelDescription& model, const data::Dataset& train_set,
                            const data::Dataset& test_set, const Backend& backend) {
  nlohmann::json settings = run_settings(o);
  settings.erase("--data");
  settings.erase("--memory-budget");
  std::string job = settings.dump(1) + "\nnetwork: " + model.network + "\ninput: " + model.input.str() +
                    "\nclasses:";
  for (const std::string& name : model.class_names) job += " " + name;
  job += "\ntraining samples: " + std::to_string(train_set.size()) + "\ntest samples: " +
         std::to_string(test_set.size()) + "\ndevice: " + to_string(backend.kind()) + "\n";
  return job;
}

// Refuses a batch, or a training set, that cannot train this network over these ranks; returns
// why each epoch's last batch must be left out (the order is shuffled: a different one each
// epoch), or "" when it trains.
// - BatchNorm over one value per channel needs two samples, on every rank (a rank's share of
//   none sits the step out, but a share of one cannot train).
// - Synchronised BatchNorm needs every batch shared evenly over the ranks.
std::string last_batch_left_out(const Options& o, const TrainingBatchNeed& need, std::size_t samples,
                                const Ranks& ranks) {
  const auto batch = static_cast<std::size_t>(o.batch), rank_count = static_cast<std::size_t>(ranks.count());
  const std::size_t least = static_cast<std::size_t>(need.samples) * rank_count;
  if (ranks.several() && (batch < rank_count || (need.samples > 1 && batch < least)))
    throw UsageError("--batch " + std::to_string(o.batch) + " over " + std::to_string(ranks.count()) +
                     " ranks leaves a rank too few samples" + (need.samples > 1 ? ": " + need.why : std::string()));
  if (need.samples > 1 && samples < least)
    throw ConfigError("the training set holds " + std::to_string(samples) + " sample(s), too few: " + need.why);
  const bool synchronised = o.sync_batchnorm && ranks.several();
  if (synchronised && samples < batch && samples % rank_count != 0)
    throw UsageError("--sync-batchnorm: the training set's " + std::to_string(samples) +
                     " samples make one batch, which cannot be shared evenly over the " +
                     std::to_string(ranks.count()) + " ranks (give --limit or --batch a multiple of them)");
  const std::size_t rest = samples % batch;
  if (samples <= batch || rest == 0) return "";
  if (need.samples > 1 && rest < least) return ", because " + need.why;
  if (synchronised && rest % rank_count != 0)
    return ": synchronised BatchNorm needs every batch shared evenly over the " + std::to_string(ranks.count()) +
           " ranks";
  return "";
}

// Options that would silently do nothing on this data.
void check_data_options(const Options& o, const data::DatasetSplits& splits) {
  if (splits.kind == "image-folder") return;
  const std::string holds = splits.kind == "idx" ? "IDX files" : "CIFAR binary files";
  for (const char* option : {"--image-size", "--channels", "--max-image-bytes", "--skip-corrupt"})
    if (o.given.count(option))
      throw UsageError(std::string(option) + " applies to image folders; " + o.data + " holds " + holds + " (" +
                       data::to_string(splits.train->shape()) + ")");
}

std::vector<PathUse> inputs_of(const Options& o, const data::DatasetSplits& splits) {
  std::vector<PathUse> inputs = data_inputs(splits, o.data);
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
    files.outputs.push_back({"--keep-best", best_path(o.save), OutputKind::checkpoint});
  if (!o.metrics_out.empty()) files.outputs.push_back({"--metrics-out", o.metrics_out, OutputKind::metrics});
  if (!o.trace.empty()) files.outputs.push_back({"--trace", o.trace, OutputKind::trace});
  if (!o.plot.empty()) files.outputs.push_back({"--plot", o.plot, OutputKind::plot});
  if (!o.export_onnx.empty()) files.outputs.push_back({"--export-onnx", o.export_onnx, OutputKind::onnx});
  if (o.given.count("--algo-cache") && !algorithm_cache_of(o).empty())
    files.outputs.push_back({"--algo-cache", algorithm_cache_of(o), OutputKind::algorithm_cache});
  files.inputs = inputs_of(o, splits);
  files.overwrite = o.overwrite;
  // A run saves over the checkpoint it starts from (a resumed run, by default).
  files.may_replace = {{"--save", "--load"}, {"--save", "--resume"}};
  return files;
}

// --normalize measures the training set; --mean and --std give the values; a resumed run has its own.
data::Normalization normalization_of(const Options& o, const std::optional<Resumed>& resumed,
                                     const data::Dataset& train_set) {
  if (resumed) return resumed->info.model.preprocessing.normalization;
  if (!o.mean.empty()) return data::Normalization{o.mean, o.std};
  if (!o.normalize) return {};
  data::Normalization n = data::measure_normalization(train_set);
  std::cout << "normalisation: mean";
  for (float m : n.mean) std::cout << " " << m;
  std::cout << ", standard deviation";
  for (float s : n.stddev) std::cout << " " << s;
  std::cout << " (measured on the training set)\n";
  return n;
}

Network build_network(const Options& o, const std::optional<Resumed>& resumed, const data::Dataset& train_set) {
  const data::SampleShape shape = train_set.shape();
  const Shape input{shape.channels, shape.height, shape.width};
  if (!resumed) return make_network(o.model, input, train_set.num_classes());
  const ModelDescription& model = resumed->info.model;
  if (!(model.input == input))
    throw UsageError("--resume " + o.resume + ": the run trained on " + model.input.str() + " samples, the data now gives " +
                     input.str());
  return checkpoint_network(resumed->info, o.resume, train_set.num_classes());
}

TrainerOptions trainer_options(const Options& o, std::size_t budget, std::size_t batches_per_epoch) {
  TrainerOptions t;
  t.batch = o.batch;
  t.micro_batch = o.micro_batch;
  t.accumulate = o.accumulate;
  t.memory.budget = budget;
  t.memory.strategy = memory::parse_strategy(o.allocator);
  t.memory.trace = o.trace;
  t.recompute = parse_recompute_policy(o.recompute);
  t.seed = o.seed;
  const auto batches = static_cast<double>(batches_per_epoch);
  t.total_steps = static_cast<long>(batches_per_epoch) * o.epochs;
  t.optimizer.kind = parse_optimizer_kind(o.optimizer);
  t.optimizer.learning_rate = o.lr;
  t.optimizer.weight_decay = o.weight_decay;
  t.optimizer.momentum = o.momentum;
  t.optimizer.nesterov = o.nesterov;
  t.schedule.kind = parse_schedule_kind(o.schedule);
  t.schedule.warmup_steps = static_cast<long>(o.warmup_epochs * batches);
  const double step_epochs = o.lr_step_epochs > 0 ? o.lr_step_epochs : std::max(1.0, o.epochs / 3.0);
  t.schedule.step_every = std::max(1L, static_cast<long>(step_epochs * batches));
  t.schedule.gamma = o.lr_step_factor;
  return t;
}

// Test hook: CNN_TRAIN_IMAGES_PAUSE_BEFORE_PLAN=S waits S seconds before planning, a slow phase
// outside the training loop (tests/train_images/check_signal_outside_loop.sh stops it).
void pause_before_planning() {
  if (const char* seconds = std::getenv("CNN_TRAIN_IMAGES_PAUSE_BEFORE_PLAN")) {
    std::cout << std::flush;  // what it printed so far, for the test to see where it is
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(seconds)));
  }
}

}  // namespace

data::ImageFolderOptions image_options(const Options& o, const std::string& warning_prefix) {
  data::ImageFolderOptions images;
  images.max_decoded_image_bytes = memory::parse_bytes(o.max_image_bytes);
  images.skip_corrupt = o.skip_corrupt;
  images.on_skipped = [prefix = warning_prefix](const std::string& warning) {
    std::cerr << prefix << "warning: " << warning << "\n";
  };
  return images;
}

int train(Options o, Ranks& ranks) {
  std::optional<Resumed> resumed = read_resumed(o, ranks);
  // Recorded as an absolute path: a resumed run finds its data from any working folder.
  o.data = std::filesystem::absolute(o.data).lexically_normal().string();
  if (!o.save.empty()) require_recordable(o);
  if (o.warmup_epochs > o.epochs)
    throw UsageError("--warmup-epochs " + std::to_string(o.warmup_epochs) + " is more than the run's " +
                     std::to_string(o.epochs) + " epochs");

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

  data::SampleShape target;
  if (o.image_size) target.height = target.width = o.image_size;
  target.channels = o.channels;  // 0: as the first image is
  data::DatasetSplits splits = open_data(o, resumed, target, ranks);
  const json data = data_identity(o.data, splits);
  if (resumed && !resumed->data.is_null()) require_same_data(resumed->data, resumed->data_folder, data, o.data);
  check_data_options(o, splits);
  if (!o.plot.empty()) check_plotting();
  if ((o.keep_best || o.early_stop > 0) && splits.test->size() == 0)
    throw UsageError(std::string(o.keep_best ? "--keep-best" : "--early-stop") + " needs a test set, and " + o.data +
                     " has none");
  // Every output, once the data's files are known and before any work, by rank 0 alone, which
  // writes them.
  if (ranks.writes()) check_run_files(files_of(o, splits));
  std::unique_ptr<data::Dataset> limited;
  const data::Dataset* train_set = splits.train.get();
  if (o.limit) {
    limited = std::make_unique<LimitedDataset>(*splits.train, o.limit);
    train_set = limited.get();
  }
  const bool has_test = splits.test->size() > 0;
  std::cout << "data: " << train_set->description() << "\n      test: "
            << (has_test ? splits.test->description() : "none (the test split is empty): no evaluation") << "\n";
  std::cout << "device: " << device.reason << "\n        " << backend.description() << "\n";
  if (communicator)
    std::cout << "ranks: " << communicator->describe() << "; each takes its share of every batch of " << o.batch
              << "; BatchNorm statistics " << (o.sync_batchnorm ? "over every rank's micro-batch" : "per rank (rank 0's kept)")
              << "\n";

  Network network = build_network(o, resumed, *train_set);
  std::cout << "model: " << (resumed ? "the network of " + o.resume : o.model) << "\n" << network.summary();
  ModelDescription model = resumed ? resumed->info.model : describe_model(network);
  if (!resumed) {
    model.class_names = train_set->class_names();
    model.preprocessing.normalization = normalization_of(o, resumed, *train_set);
  }
  data::check_normalization(model.preprocessing.normalization, train_set->shape().channels);
  // A class's label is its place in the list: the same names in another order would relabel them.
  if (resumed && !model.class_names.empty() && model.class_names != train_set->class_names())
    throw UsageError("--resume " + o.resume + ": the run's classes are " + joined(model.class_names) + "; " + o.data +
                     " has " + joined(train_set->class_names()));
  ranks.check_same_job(job_description(o, model, *train_set, *splits.test, backend));

  data::LoaderOptions train_options;
  train_options.batch = o.batch;
  train_options.rank = ranks.rank();
  train_options.ranks = ranks.count();
  train_options.seed = o.seed;
  train_options.augment_flip = o.augment;
  train_options.augment_crop_padding = o.crop_padding;
  train_options.normalization = model.preprocessing.normalization;
  data::LoaderOptions test_options = train_options;
  test_options.shuffle = false;
  test_options.augment_flip = false;
  test_options.augment_crop_padding = 0;
  const std::size_t samples = train_set->size(), rest = samples % static_cast<std::size_t>(o.batch);
  if (const std::string why = last_batch_left_out(o, network.training_batch_need(), samples, ranks); !why.empty()) {
    train_options.drop_last = true;
    std::cout << "note: each epoch's last batch (" << rest << " sample" << (rest > 1 ? "s" : "")
              << ") is left out, a different one each epoch" << why << "\n";
  }
  const std::size_t budget = memory_budget_of(o, backend, ranks.local_count(), ranks.writes());
  TrainerOptions t = trainer_options(o, budget, data::Loader::batches_per_epoch_for(*train_set, train_options));
  t.communicator = communicator;
  t.sync_batchnorm = o.sync_batchnorm;
  if (!ranks.writes()) t.memory.trace.clear();  // rank 0 writes the trace
  if (o.cuda_graph) {
    const std::string why_not = backend.capture_support();
    t.capture_graphs = why_not.empty();
    std::cout << "cuda graphs: " << (why_not.empty() ? "on" : "off (" + why_not + ")") << "\n";
  }
  pause_before_planning();

  // One memory stack from t.memory: one budget over the trainer's memory, the libraries'
  // workspaces and the loaders' staging, the strategy for step buffers, the trace (none for a
  // plan). The loaders are built after the trainer: their room is booked first, and the plan leaves it.
  memory::MemoryOptions stack_options = t.memory;
  if (o.plan_only) stack_options.trace.clear();
  memory::MemoryStack stack = memory_stack_for(backend, stack_options);
  data::Loader::book(stack, *train_set, train_options);
  data::Loader::book(stack, *splits.test, test_options);
  if (o.plan_only) return print_plan(network, backend, t, stack);

  Trainer trainer(network, backend, stack, t);
  data::Loader train_loader(*train_set, train_options, stack);
  data::Loader test_loader(*splits.test, test_options, stack);
  const std::size_t staging = stack.account().loader_staging();
  if (t.memory.strategy != memory::Strategy::planned)
    std::cout << "allocator: " << o.allocator
              << (t.memory.strategy == memory::Strategy::arena
                      ? " of " + memory::format_bytes(trainer.memory_stack().arena_capacity())
                      : std::string())
              << " for step buffers\n";
  trainer.on_recovery = [prefix = ranks.prefix()](const std::string& message) {
    std::cerr << "\n" << prefix << "recovered: " << message << "\n";
  };
  RunProgress progress;
  if (!o.load.empty()) {
    load_weights(o.load, network, trainer.parameters());
    trainer.synchronize_replicas();
  }
  if (resumed) {
    load_parameters(o.resume, network, trainer.parameters(), true);
    trainer.restore(resumed->info.training->trainer);
    progress = resumed->info.training->progress;
    trainer.synchronize_replicas();  // they read the same file; this makes sure
    std::cout << "resumed: epoch " << progress.epoch << ", batch " << progress.batches_done << ", step "
              << trainer.steps() << "\n";
  }
  const int share = share_of_batch(o.batch, 0, ranks.count()).size;  // rank 0's, the largest
  const int k = (share + trainer.micro_batch() - 1) / trainer.micro_batch();
  std::cout << "optimizer: " << trainer.optimizer().describe() << ", lr " << o.lr << ", " << o.schedule
            << " schedule; batch " << o.batch << " = "
            << (ranks.several() ? std::to_string(ranks.count()) + " ranks x " : std::string()) << k << " micro-batch"
            << (k > 1 ? "es" : "") << " of " << trainer.micro_batch() << "\n"
            << format_memory_table(trainer.memory());
  if (o.deterministic || backend.kind() != DeviceKind::cpu) std::cout << backend.determinism_report() << "\n";
  std::cout << std::flush;

  MetricsFile metrics(ranks.writes() ? o.metrics_out : std::string(), resumed ? resumed->metrics_bytes : 0);
  if (resumed && !metrics.kept()) write_history(metrics, progress, train_loader.batches_per_epoch());
  LoopSetup setup{o,       network,          backend, trainer, train_loader,
                  test_loader, has_test, model, json{{"options", run_settings(o)}, {"data", data}}, metrics,
                  staging, splits.train->host_bytes() + splits.test->host_bytes(), communicator, ranks.writes()};
  int code = 0;
  {
    const StepBoundaryStop stop_saves_first;
    code = run_epochs(setup, std::move(progress));
  }
  if (code == 0 && !o.export_onnx.empty() && ranks.writes()) {
    export_onnx(o.export_onnx, network, trainer.parameters(), model);
    std::cout << "exported the trained model to " << o.export_onnx << describe_onnx_export(network) << "\n";
  }
  trainer.finish();  // every byte given back, so the trace is whole when it is checked
  return code;
}

}  // namespace cnn::app
