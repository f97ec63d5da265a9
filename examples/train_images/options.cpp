#include "options.hpp"

#include <algorithm>

#include <cnnengine/cnnengine.hpp>
#include "validators.hpp"

namespace cnn::app {
namespace {

// --monitor: a metric parse_monitored_metric reads, its refusal the message.
CLI::Validator monitored_metric() {
  return CLI::Validator([](std::string& word) {
    try {
      parse_monitored_metric(word);
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  }, "");
}

// The network words --help lists after the options.
std::string network_words() {
  std::string words = "Presets:\n";
  for (const std::string& usage : preset_usages()) words += "  " + usage + "\n";
  words += "Network text, one layer per line (# starts a comment; as=NAME names a layer's output, "
           "in=NAME reads a named output):\n";
  for (const std::string& usage : layer_usages()) words += "  " + usage + "\n";
  return words;
}

// A row's library field and its feed: `target` = `value` (of Options o), in FitOptions for TO_FIT,
// else in LibraryOptions (loss, images, device).
#define TO_FIT(target, value) #target, [](const Options& o, LibraryOptions& l) { l.fit.target = value; }
#define TO_LIBRARY(target, value) #target, [](const Options& o, LibraryOptions& l) { l.target = value; }

// A row an option, in --help's order: flag, Options field, help, what --resume does with it, its
// check, and the library field it feeds with how (OptionRow). A row may end early: the rest is
// none (not kept, no check, feeds nothing).
std::vector<OptionRow> make_option_table() {
  using enum OnResume;
  return {
      {"--data", &Options::data, "IDX folder (Fashion-MNIST layout), CIFAR-10/100 binary folder or image folder (one "
       "sub-folder per class)", may_change},
      {"--model", &Options::model, "a preset (below) or a network text file (its words: below)", kept},
      {"--freeze", &Options::freeze, "fine-tuning: freeze the layers up to this node (its number in the model's "
       "summary), or 'backbone': all but the last layer with parameters; their parameters are not trained, they "
       "run as in inference (BatchNorm on its running statistics), and nothing is kept for their backward", kept},
      {"--freeze-mode", &Options::freeze_mode, "with --freeze: eval (the frozen layers run as in inference, PyTorch's "
       "eval() on them) or train (BatchNorm on each batch's statistics, updating its running ones; dropout drops)",
       kept, CLI::IsMember({"eval", "train"})},
      {"--unfreeze-at", &Options::unfreeze_at, "with --freeze: from this epoch on every layer trains (the plan is "
       "made again; the optimizer state of the layers that trained is kept)", kept, integer_between(1, 1000000, ""),
       TO_FIT(unfreeze_at, o.unfreeze_at)},
      {"--backbone-lr-scale", &Options::backbone_lr_scale, "fine-tuning: the backbone (--freeze's layers, else all "
       "but the head) trains at the rate times this (PyTorch's parameter groups)", kept,
       CLI::PositiveNumber, TO_FIT(optimizer.backbone_rate_scale, o.backbone_lr_scale)},
      {"--task", &Options::task, "classify, segment, multilabel or regress (default: what the data's layout holds: "
       "class folders or IDX/CIFAR files classify; images/ with masks/ segment; images/ with labels.csv: multilabel "
       "where every value is 0 or 1, else regress)", kept,
       CLI::IsMember({"classify", "segment", "multilabel", "regress"})},
      {"--label-smoothing", &Options::label_smoothing, "classify: PyTorch's label smoothing, in [0, 1)", kept,
       fraction_below_one(), TO_LIBRARY(loss.label_smoothing, o.label_smoothing)},
      {"--class-weights", &Options::class_weights, "segment: a weight a class in the per-pixel cross-entropy "
       "(comma-separated, one a class)", kept, {}, TO_LIBRARY(loss.class_weights, o.class_weights)},
      {"--pos-weights", &Options::positive_weights, "multilabel: a weight a class for its positive samples in the "
       "binary cross-entropy (PyTorch's pos_weight)", kept, {}, TO_LIBRARY(loss.positive_weights, o.positive_weights)},
      {"--loss", &Options::regression_loss, "regress: mse or huber", kept, CLI::IsMember({"mse", "huber"}),
       TO_LIBRARY(loss.regression, parse_regression_loss(o.regression_loss))},
      {"--huber-delta", &Options::huber_delta, "regress with --loss huber: where the loss turns linear", kept,
       positive_number(), TO_LIBRARY(loss.huber_delta, o.huber_delta)},
      {"--threshold", &Options::threshold, "multilabel: a class is predicted above this probability (the loss's "
       "accuracy, the metrics and --predict)", kept, fraction_between_zero_and_one(),
       TO_LIBRARY(loss.threshold, o.threshold)},
      {"--overlay", &Options::overlay, "--predict on a segmentation model: also write each mask over its image in "
       "colour (NAME.overlay.png)"},
      {"--predict-out", &Options::predict_out, "--predict on a segmentation model: the folder of the masks "
       "(NAME.mask.png: the class at each pixel)"},
      {"--epochs", &Options::epochs, "", may_grow, positive_integer(), TO_FIT(epochs, o.epochs)},
      {"--batch", &Options::batch, "samples per optimizer step", kept, positive_integer(),
       TO_FIT(batch, o.batch)},
      {"--micro-batch", &Options::micro_batch, "samples per forward/backward pass (default: largest that fits)", kept,
       positive_integer(), TO_FIT(micro_batch, o.micro_batch)},
      {"--accumulate", &Options::accumulate, "micro-batches per optimizer step", kept, positive_integer(),
       TO_FIT(accumulate, o.accumulate)},
      {"--lr", &Options::lr, "base learning rate", kept, positive_number(),
       TO_FIT(optimizer.learning_rate, o.lr)},
      {"--optimizer", &Options::optimizer, "", kept, CLI::IsMember({"sgd", "adamw"}),
       TO_FIT(optimizer.kind, parse_optimizer_kind(o.optimizer))},
      {"--weight-decay", &Options::weight_decay, "default: sgd 0, adamw 0.01", kept, non_negative_number(),
       TO_FIT(optimizer.weight_decay, o.weight_decay)},
      {"--momentum", &Options::momentum, "sgd, in [0, 1)", kept, fraction_below_one(),
       TO_FIT(optimizer.momentum, o.momentum)},
      {"--nesterov", &Options::nesterov, "", kept, {}, TO_FIT(optimizer.nesterov, o.nesterov)},
      {"--schedule", &Options::schedule, "cosine (default), constant, step, onecycle (PyTorch's OneCycleLR: up from "
       "lr/25 for 30% of the run, then down to lr/25e4) or plateau (lr x --plateau-factor after --plateau-patience "
       "epochs without a better --monitor value)", kept,
       CLI::IsMember({"constant", "step", "cosine", "onecycle", "plateau"}),
       TO_FIT(schedule.kind, parse_schedule_kind(o.schedule))},
      {"--plateau-patience", &Options::plateau_patience, "--schedule plateau: epochs without a better --monitor value "
       "before the rate drops", kept, integer_between(0, 1000000, ""),
       TO_FIT(schedule.plateau_patience, o.plateau_patience)},
      {"--plateau-factor", &Options::plateau_factor, "--schedule plateau: what each drop multiplies the rate by", kept,
       fraction_between_zero_and_one(), TO_FIT(schedule.plateau_factor, o.plateau_factor)},
      {"--warmup-epochs", &Options::warmup_epochs, "linear warm-up, in epochs (fractions allowed)", kept,
       non_negative_number(), TO_FIT(warmup_epochs, o.warmup_epochs)},
      {"--lr-step-epochs", &Options::lr_step_epochs, "--schedule step: epochs between drops (0: a third of the run)",
       kept, non_negative_number(),
       TO_FIT(step_every_epochs, o.lr_step_epochs > 0 ? o.lr_step_epochs : std::max(1.0, o.epochs / 3.0))},
      {"--lr-step-factor", &Options::lr_step_factor, "--schedule step: what each drop multiplies the rate by", kept,
       positive_number(), TO_FIT(schedule.gamma, o.lr_step_factor)},
      {"--seed", &Options::seed, "", kept, {}, TO_FIT(seed, o.seed)},
      {"--threads", &Options::threads, "CPU threads (default: the cores this process may run on, shared by its "
       "machine's ranks; 0: all cores)", not_kept, integer_between(0, kMaxThreads, "(0: all cores)"),
       TO_LIBRARY(device.threads, o.threads)},
      {"--device", &Options::device, "", not_kept, CLI::IsMember({"auto", "cpu", "cuda"}),
       TO_LIBRARY(device.device, parse_device(o.device))},
      {"--precision", &Options::precision, "how convolutions and dense layers multiply: fp32; tf32 (CUDA: cuDNN and "
       "cuBLAS may use tensor cores); bf16 (bfloat16 operands, float sums; on a CPU with AVX512-BF16 its "
       "instructions); fp16 (half operands, float sums, dynamic loss scaling; slower than fp32 on a CPU). Both store "
       "the values between layers in 16 bits where that is smaller. Weights, optimizer state and checkpoints stay "
       "fp32. On CUDA, 16 bits fit a larger batch and train at about tf32's speed", may_change,
       CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}), TO_LIBRARY(device.precision, parse_precision(o.precision))},
      {"--fast-start", &Options::fast_start, "CUDA: pick convolution algorithms by heuristics instead of measuring",
       not_kept, {}, TO_LIBRARY(device.fast_start, o.fast_start)},
      {"--channels-last", &Options::channels_last, "CUDA in bf16 and fp16: keep the images between layers channels "
       "last (NHWC), as cuDNN's tensor-core convolutions read them, where every layer takes them; faster on "
       "resnet18, slower on resnet50 at 224 so far", not_kept, {}, TO_LIBRARY(device.channels_last, o.channels_last)},
      {"--deterministic", &Options::deterministic, "CUDA: only cuDNN's deterministic convolution algorithms, so that "
       "the same seed gives the same bits (the CPU always does); the log says what it costs", not_kept, {},
       TO_LIBRARY(device.deterministic, o.deterministic)},
      {"--algo-cache", &Options::algo_cache,
       "CUDA: keep measured convolution algorithms in this file for later runs on the same GPU, driver and libraries "
       "(default: " + (default_algorithm_cache().empty() ? std::string("none") : default_algorithm_cache()) +
           "; none: measure every run)",
       not_kept, {}, TO_LIBRARY(device.algorithm_cache, algorithm_cache_of(o))},
      {"--cuda-graph", &Options::cuda_graph, "CUDA: record each micro-batch's kernels once as a CUDA graph and replay "
       "it (one launch a micro-batch); the default wherever it can run"},
      {"--no-cuda-graph", &Options::no_cuda_graph, "CUDA: launch every kernel of every step"},
      {"--memory-budget", &Options::budget, "hard cap on what the engine reserves, e.g. 512MiB", may_change,
       positive_size(), "memory_budget"},
      {"--metrics-out", &Options::metrics_out, "JSON lines: one per step, per epoch, and a summary", record, {},
       TO_FIT(metrics, o.metrics_out)},
      {"--tensorboard", &Options::tensorboard, "write TensorBoard event files into this folder: every step's loss, "
       "accuracy, rate, memory and images/s, each epoch's metrics (tensorboard --logdir FOLDER)", record, {},
       TO_FIT(tensorboard, o.tensorboard)},
      {"--csv", &Options::csv, "a CSV file of a row an epoch (epoch, train, validation and test loss and accuracy, "
       "rate, seconds, images/s)", record, {}, TO_FIT(csv, o.csv)},
      {"--save", &Options::save, "checkpoint the whole run here, atomically, after every epoch (and every "
       "--save-every steps, and when stopped by Ctrl-C or SIGTERM)", not_kept, {}, TO_FIT(save, o.save)},
      {"--save-every", &Options::save_every, "optimizer steps between checkpoints, beside each epoch's end", not_kept,
       positive_integer(LLONG_MAX), TO_FIT(save_every, o.save_every)},
      {"--overwrite", &Options::overwrite, "let an output replace an existing file that is not what it writes, or "
       "another run's checkpoint", not_kept, {}, TO_FIT(overwrite, o.overwrite)},
      {"--load", &Options::load, "start a new run from this model's weights (a checkpoint, or an ONNX model): without "
       "--model, its network, its head replaced where the data has other classes; with --model, the layers that "
       "match. With --evaluate, --predict or --export-onnx, the model; an ONNX model with --save and no --data: "
       "converted to a checkpoint", not_kept, {},
       TO_FIT(load, o.load)},
      {"--num-classes", &Options::num_classes, "with --load: a new head of this many classes (the data's: its "
       "default), initialised, even where the file's head has as many", not_kept, positive_integer(),
       TO_FIT(new_head, o.num_classes > 0)},
      {"--resume", &Options::resume, "continue the run saved in this checkpoint, exactly where it stopped, with its "
       "own settings (--save defaults to it)", not_kept, {}, TO_FIT(resume, o.resume)},
      {"--limit", &Options::limit, "train on the first N samples only", kept, positive_integer(LLONG_MAX),
       TO_FIT(limit, o.limit)},
      {"--class-names", &Options::class_names, "a file of the classes' names, one a line, in label order (IDX data: "
       "default classes.txt beside the files; Fashion-MNIST's own where it is the default folder)", kept},
      {"--image-size", &Options::image_size, "image folders: resize to NxN (default: the input of --load's model, "
       "else the first image's size); a conversion of an ONNX model of a symbolic size: the size to import it at",
       kept, positive_integer()},
      {"--channels", &Options::channels, "image folders: 1 (grey) or 3 (RGB) (default: the input of --load's model, "
       "else as the first image is)", kept, CLI::IsMember({1, 3})},
      {"--resize-shorter", &Options::resize_shorter, "image folders: resize each image's shorter side to N (its aspect "
       "kept), then crop --image-size from its centre (torchvision's Resize(N) + CenterCrop; default: the whole image "
       "stretched); recorded in the model, so --predict frames images alike", kept,
       integer_between(1, data::kMaxResizeShorterSide), TO_LIBRARY(images.resize_shorter_side, o.resize_shorter)},
      {"--max-image-bytes", &Options::max_image_bytes, "image folders: refuse an image that decodes to more, before "
       "decoding it", kept, positive_size(),
       TO_LIBRARY(images.max_decoded_image_bytes, memory::parse_bytes(o.max_image_bytes))},
      {"--skip-corrupt", &Options::skip_corrupt, "image folders: leave out images that do not read (a warning each) "
       "instead of stopping", kept, {}, TO_LIBRARY(images.skip_corrupt, o.skip_corrupt)},
      {"--augment", &Options::augment, "random augmentation: 'flip' (or --augment alone) flips images left-right at "
       "random (--crop-padding adds random crops); 'photo' is torchvision's recipe for photos: a random resized crop to "
       "--image-size (from the image as stored, decoded every epoch) and a flip, the images normalised by ImageNet's "
       "statistics (RGB; grey: measured) unless --normalize, --mean or --std says otherwise, and evaluated at the "
       "centre of their shorter side resized to --image-size / 0.875 unless --resize-shorter says otherwise", kept,
       CLI::IsMember({"flip", "photo"}), TO_FIT(loading.augment_flip, !o.augment.empty())},
      {"--crop-padding", &Options::crop_padding, "random crops of each image padded by this many pixels", kept,
       integer_between(0, 64, ""), TO_FIT(loading.augment_crop_padding, o.crop_padding)},
      {"--crop-scale", &Options::crop_scale, "with --augment photo: the random resized crop's share of the image's "
       "area, MIN,MAX (default 0.08,1; torchvision's scale)", kept, {},
       TO_FIT(loading.photo, photo_augmentation_of(o))},
      {"--color-jitter", &Options::color_jitter, "colour jitter (torchvision's ColorJitter): brightness, contrast and "
       "saturation factors drawn from [1 - F, 1 + F] for each image, F alone for all three or B,C,S", kept, {},
       TO_FIT(loading.photo, photo_augmentation_of(o))},
      {"--random-erasing", &Options::random_erasing, "erase a random rectangle of each image with this probability "
       "(torchvision's RandomErasing, after normalisation)", kept, fraction_up_to(1),
       TO_FIT(loading.photo, photo_augmentation_of(o))},
      {"--loader-threads", &Options::loader_threads, "threads that decode and augment the training images (default: "
       "the cores the training step leaves, at least 1)", not_kept, integer_between(1, data::kMaxLoaderThreads, ""),
       TO_FIT(loading.threads, std::max(1, o.loader_threads))},
      {"--cache", &Options::cache, "image folders decoded on load (--augment photo, or too large to hold decoded): "
       "keep each image decoded after its first read, at the evaluation's --resize-shorter on its shorter side (else "
       "the --image-size), 'memory' or in a file in this folder, kept from run to run and rebuilt when the data "
       "changes", may_change, {}, TO_LIBRARY(images.cache, cache_options_of(o))},
      {"--cache-size", &Options::cache_size, "with --cache: at most this much (the images beyond are decoded from "
       "their files every time)", may_change, positive_size(), TO_LIBRARY(images.cache, cache_options_of(o))},
      {"--benchmark-loader", &Options::benchmark_loader, "run the training loader alone over one epoch (each of "
       "--epochs where given) with the run's options (data, augmentation, batch, --loader-threads, --cache) and print "
       "its images/s as a JSON line an epoch; trains nothing"},
      {"--normalize", &Options::normalize, "normalise each channel (default: not): 'measured' (or --normalize alone) by "
       "the training set's mean and standard deviation, 'imagenet' by ImageNet's (torchvision's pretrained "
       "networks'); recorded in the model", kept, CLI::IsMember({"measured", "imagenet"})},
      {"--mean", &Options::mean, "per-channel means to subtract (one value, or one per channel)", kept},
      {"--std", &Options::std, "per-channel standard deviations to divide by", kept},
      {"--quiet", &Options::quiet, "no progress bars", not_kept, {}, TO_FIT(progress_bar, !o.quiet)},
      {"--doctor", &Options::doctor, "print the environment report (driver, CUDA, cuDNN, cuBLAS) and exit"},
      {"--plan", &Options::plan_only, "print the memory plan and exit (with --evaluate or --predict: the inference "
       "plan)"},
      {"--trace", &Options::trace, "record every device allocation and release to this file (memory::read_trace reads "
       "it, memory::replay runs it on any strategy)", not_kept, {}, TO_FIT(memory_trace, o.trace)},
      {"--plot", &Options::plot, "a PNG of the learning curves (gnuplot), rewritten after every epoch"},
      {"--keep-best", &Options::keep_best, "with --save: also keep the checkpoint of the epoch best by --monitor, as "
       "NAME.best.EXT", kept, {}, TO_FIT(keep_best, o.keep_best)},
      {"--restore-best", &Options::restore_best, "with --keep-best: at the end, the best epoch's weights are "
       "evaluated on the test set and exported (Keras's restore_best_weights); --save keeps the last epoch's run", kept,
       {}, TO_FIT(restore_best, o.restore_best)},
      {"--early-stop", &Options::early_stop, "stop after this many epochs without a better --monitor value", kept,
       integer_between(0, 1000000, "(0: never)"), TO_FIT(early_stop, o.early_stop)},
      {"--validation-split", &Options::validation_split, "hold out this fraction of each class of the training data "
       "for validation (stratified, by --seed; a resumed run holds out the same)", kept, fraction_up_to(0.99),
       TO_FIT(validation_split, o.validation_split)},
      {"--monitor", &Options::monitor, "what --keep-best and --early-stop watch: val_loss (default), val_accuracy, "
       "train_loss or train_accuracy, or a task's val_pixel_accuracy, val_mean_iou, val_mean_f1, "
       "val_mean_average_precision, val_mae or val_rmse (never the test set)", kept, monitored_metric(),
       TO_FIT(monitor, parse_monitored_metric(o.monitor))},
      {"--limit-eval", &Options::limit_eval, "evaluate on the first N samples of the validation and test sets only",
       kept, positive_integer(LLONG_MAX), TO_FIT(limit_eval, o.limit_eval)},
      {"--find-lr", &Options::find_lr, "the learning-rate range test instead of a run: 100 steps from 1e-7 to 10, the "
       "loss of each (and its curve with --plot), and a rate to start from"},
      {"--test-each-epoch", &Options::test_each_epoch, "evaluate the test set after every epoch (default: once, at "
       "the end; it never chooses the model)", kept, {}, TO_FIT(test_each_epoch, o.test_each_epoch)},
      {"--evaluate", &Options::evaluate, "with --load: test loss, accuracy, per-class precision and recall, and the "
       "confusion matrix on --data's test split"},
      {"--predict", &Options::predict, "with --load: classify these images or folders of images"},
      {"--export-onnx", &Options::export_onnx, "write the model as ONNX (opset 13, inference form): with --load and "
       "no --data, the loaded model; else the trained one, after the run"},
      {"--export-onnx-precision", &Options::export_onnx_precision, "--export-onnx: fp32, or fp16 (weights and every "
       "value between the layers in float16, half the file; the input and outputs stay float32)", not_kept,
       CLI::IsMember({"fp32", "fp16"})},
      {"--top", &Options::top, "--predict: the classes shown per image", not_kept, integer_between(1, 1000, "")},
      {"--allocator", &Options::allocator, "step buffers: planned (one arena, offsets fixed before step 1), arena, "
       "pool or direct (allocated as produced, freed after last use)", kept,
       CLI::IsMember({"planned", "arena", "pool", "direct"}),
       TO_FIT(memory_strategy, memory::parse_strategy(o.allocator))},
      {"--sync-batchnorm", &Options::sync_batchnorm, "over the ranks of mpirun -np N: BatchNorm's batch statistics "
       "over every rank's micro-batch (default: each rank its own, as PyTorch's DDP; the running statistics are rank "
       "0's)", kept, {}, TO_FIT(sync_batchnorm, o.sync_batchnorm)},
      {"--recompute", &Options::recompute, "during backward, recompute instead of keeping: none; cheap (element-wise "
       "and normalisation outputs); auto (under a budget, the least recomputation that fits, and the micro-batch "
       "expected fastest)", kept, CLI::IsMember({"none", "cheap", "auto"}),
       TO_FIT(recompute, parse_recompute_policy(o.recompute))},
  };
}

#undef TO_FIT
#undef TO_LIBRARY

}  // namespace

const std::vector<OptionRow>& option_table() {
  static const std::vector<OptionRow> table = make_option_table();
  return table;
}

std::string flag_of_library_field(const std::string& field) {
  for (const OptionRow& row : option_table())
    if (row.library_field && row.library_field == field) return row.flag;
  return {};
}

std::string with_flags(std::string message) {
  for (std::size_t open = message.find('`'); open != std::string::npos; open = message.find('`', open + 1)) {
    const std::size_t close = message.find('`', open + 1);
    if (close == std::string::npos) break;
    const std::string flag = flag_of_library_field(message.substr(open + 1, close - open - 1));
    if (!flag.empty()) message.replace(open, close - open + 1, flag);
    else open = close;
  }
  return message;
}

LibraryOptions library_options(const Options& o) {
  LibraryOptions library;
  for (const OptionRow& row : option_table())
    if (row.feed) row.feed(o, library);
  return library;
}

void add_options(CLI::App& app, Options& o) {
  app.option_defaults()->always_capture_default();
  for (const OptionRow& row : option_table()) {
    CLI::Option* option = std::visit(
        [&](auto member) {
          auto& value = o.*member;
          using Value = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<Value, bool>) return app.add_flag(row.flag, value, row.help);
          else if constexpr (std::is_same_v<Value, std::vector<float>>)
            return app.add_option(row.flag, value, row.help)->delimiter(',');
          else if constexpr (std::is_same_v<Value, std::vector<std::string>>)
            return app.add_option(row.flag, value, row.help)->expected(1, -1);
          else return app.add_option(row.flag, value, row.help);
        },
        row.field);
    if (row.check) option->check(*row.check);
  }
  app.get_option("--no-cuda-graph")->excludes(app.get_option("--cuda-graph"));
  app.get_option("--normalize")->expected(0, 1)->default_str("measured");  // a value or none
  app.get_option("--augment")->expected(0, 1)->default_str("flip");
  app.footer(network_words());
}

data::PhotoAugmentation photo_augmentation_of(const Options& o) {
  data::PhotoAugmentation photo;
  photo.crop.enabled = o.augment == "photo";
  if (o.crop_scale.size() == 2) {
    photo.crop.scale_min = o.crop_scale[0];
    photo.crop.scale_max = o.crop_scale[1];
  }
  if (o.color_jitter.size() == 1) {
    photo.jitter = {o.color_jitter[0], o.color_jitter[0], o.color_jitter[0]};
  } else if (o.color_jitter.size() == 3) {
    photo.jitter = {o.color_jitter[0], o.color_jitter[1], o.color_jitter[2]};
  }
  photo.erasing.probability = o.random_erasing;
  return photo;
}

data::DecodedCacheOptions cache_options_of(const Options& o) {
  data::DecodedCacheOptions cache;
  cache.enabled = !o.cache.empty();
  if (cache.enabled && o.cache != "memory") cache.folder = o.cache;
  cache.max_bytes = memory::parse_bytes(o.cache_size);
  return cache;
}

std::string algorithm_cache_of(const Options& o) {
  if (o.algo_cache == "none") return {};
  return o.algo_cache.empty() ? default_algorithm_cache() : o.algo_cache;
}

void record_given(const CLI::App& app, Options& o) {
  for (const CLI::Option* option : app.get_options())
    if (option->count() > 0) o.given.insert(option->get_name());
}

void check_combinations(const Options& o) {
  if (o.micro_batch > 0 && o.accumulate > 0)
    throw CLI::ValidationError("--micro-batch, --accumulate", "give --micro-batch or --accumulate, not both");
  if (!o.resume.empty() && !o.load.empty())
    throw CLI::ValidationError("--resume, --load", "give --resume (continue a run) or --load (start one from weights), "
                                                   "not both");
  if (o.save_every > 0 && o.save.empty() && o.resume.empty())
    throw CLI::ValidationError("--save-every", "--save-every needs --save: where would the checkpoints go?");
  const bool inference = o.evaluate || !o.predict.empty();
  if (o.num_classes > 0 && (o.load.empty() || inference))
    throw CLI::ValidationError("--num-classes", "--num-classes gives the network a run loads (--load) a new head to "
                                                "train: give --load and --data");
  if (inference && o.load.empty())
    throw CLI::ValidationError("--evaluate, --predict", "--evaluate and --predict need the model: give --load FILE");
  if (o.evaluate && !o.predict.empty())
    throw CLI::ValidationError("--evaluate, --predict", "give --evaluate or --predict, not both");
  if (inference && !o.export_onnx.empty())
    throw CLI::ValidationError("--export-onnx", "--export-onnx with --evaluate or --predict: give one command at a time");
  if (o.export_onnx.empty() && o.export_onnx_precision != "fp32")
    throw CLI::ValidationError("--export-onnx-precision", "--export-onnx-precision says how --export-onnx writes: give both");
  if (o.restore_best && !o.keep_best)
    throw CLI::ValidationError("--restore-best", "--restore-best restores the checkpoint --keep-best keeps: give both");
  if (o.keep_best && o.save.empty() && o.resume.empty())
    throw CLI::ValidationError("--keep-best", "--keep-best needs --save: the best checkpoint is kept beside it");
  if (o.find_lr && (!o.resume.empty() || !o.save.empty() || o.plan_only))
    throw CLI::ValidationError("--find-lr", "--find-lr is a short test that saves nothing: leave out --save, --resume "
                                            "and --plan");
  if (o.schedule == "onecycle" && o.warmup_epochs > 0)
    throw CLI::ValidationError("--schedule onecycle, --warmup-epochs", "--schedule onecycle warms up by itself (its "
                                                                       "first 30%): leave out --warmup-epochs");
  if (!o.normalize.empty() && (!o.mean.empty() || !o.std.empty()))
    throw CLI::ValidationError("--normalize, --mean, --std", "give --normalize or --mean and --std, not both");
  if (o.mean.empty() != o.std.empty())
    throw CLI::ValidationError("--mean, --std", "give --mean and --std together");
  if (!o.crop_scale.empty() && o.augment != "photo")
    throw CLI::ValidationError("--crop-scale", "--crop-scale sizes the random resized crop of --augment photo: give both");
  if (!o.crop_scale.empty() && o.crop_scale.size() != 2)
    throw CLI::ValidationError("--crop-scale", "give MIN,MAX: two shares of the image's area");
  if (!o.color_jitter.empty() && o.color_jitter.size() != 1 && o.color_jitter.size() != 3)
    throw CLI::ValidationError("--color-jitter", "give one factor for brightness, contrast and saturation, or B,C,S "
                                                 "(hue is not jittered)");
  if (o.augment == "photo" && o.crop_padding > 0)
    throw CLI::ValidationError("--augment photo, --crop-padding", "--augment photo crops at random already: leave out "
                                                                  "--crop-padding");
  if (o.given.count("--cache-size") && o.cache.empty())
    throw CLI::ValidationError("--cache-size", "--cache-size bounds the decoded cache of --cache: give both");
  if (o.benchmark_loader && (o.plan_only || o.find_lr || !o.save.empty() || !o.resume.empty()))
    throw CLI::ValidationError("--benchmark-loader", "--benchmark-loader runs the loader alone and trains nothing: "
                                                     "leave out --plan, --find-lr, --save and --resume");
  try {
    data::check_photo_augmentation(photo_augmentation_of(o));
  } catch (const Error& e) {
    throw CLI::ValidationError("--crop-scale, --color-jitter, --random-erasing", e.what());
  }
  if (o.cuda_graph) {  // the library's reasons, before any data is read
    if (const std::string why = graph_capture_blocked(library_options(o).fit); !why.empty())
      throw CLI::ValidationError("--cuda-graph", with_flags(why));
  }
}

}  // namespace cnn::app
