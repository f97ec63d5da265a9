#include "options.hpp"

#include "cnnengine.hpp"
#include "validators.hpp"

namespace cnn::app {

void add_options(CLI::App& app, Options& o) {
  app.option_defaults()->always_capture_default();
  app.add_option("--data", o.data,
                 "IDX folder (Fashion-MNIST layout), CIFAR-10/100 binary folder or image folder (one sub-folder per "
                 "class)");
  app.add_option("--model", o.model, "a preset (below) or a network text file (its words: below)");
  std::string words = "Presets:\n";
  for (const std::string& usage : preset_usages()) words += "  " + usage + "\n";
  words += "Network text, one layer per line (# starts a comment; as=NAME names a layer's output, "
           "in=NAME reads a named output):\n";
  for (const std::string& usage : layer_usages()) words += "  " + usage + "\n";
  app.footer(words);
  app.add_option("--task", o.task, "classify, segment, multilabel or regress (default: what the data's layout holds: "
                                   "class folders or IDX/CIFAR files classify; images/ with masks/ segment; images/ "
                                   "with labels.csv: multilabel where every value is 0 or 1, else regress)")
      ->check(CLI::IsMember({"classify", "segment", "multilabel", "regress"}));
  app.add_option("--label-smoothing", o.label_smoothing, "classify: PyTorch's label smoothing, in [0, 1)")
      ->check(fraction_below_one());
  app.add_option("--class-weights", o.class_weights, "segment: a weight a class in the per-pixel cross-entropy "
                                                     "(comma-separated, one a class)")
      ->delimiter(',');
  app.add_option("--pos-weights", o.positive_weights, "multilabel: a weight a class for its positive samples in the "
                                                      "binary cross-entropy (PyTorch's pos_weight)")
      ->delimiter(',');
  app.add_option("--loss", o.regression_loss, "regress: mse or huber")->check(CLI::IsMember({"mse", "huber"}));
  app.add_option("--huber-delta", o.huber_delta, "regress with --loss huber: where the loss turns linear")
      ->check(positive_number());
  app.add_option("--threshold", o.threshold, "multilabel: a class is predicted above this probability (the loss's "
                                             "accuracy, the metrics and --predict)")
      ->check(fraction_between_zero_and_one());
  app.add_flag("--overlay", o.overlay, "--predict on a segmentation model: also write each mask over its image in "
                                       "colour (NAME.overlay.png)");
  app.add_option("--predict-out", o.predict_out, "--predict on a segmentation model: the folder of the masks "
                                                 "(NAME.mask.png: the class at each pixel)");
  app.add_option("--epochs", o.epochs)->check(positive_integer());
  app.add_option("--batch", o.batch, "samples per optimizer step")->check(positive_integer());
  app.add_option("--micro-batch", o.micro_batch, "samples per forward/backward pass (default: largest that fits)")
      ->check(positive_integer());
  app.add_option("--accumulate", o.accumulate, "micro-batches per optimizer step")->check(positive_integer());
  app.add_option("--lr", o.lr, "base learning rate")->check(positive_number());
  app.add_option("--optimizer", o.optimizer)->check(CLI::IsMember({"sgd", "adamw"}));
  app.add_option("--weight-decay", o.weight_decay, "default: sgd 0, adamw 0.01")->check(non_negative_number());
  app.add_option("--momentum", o.momentum, "sgd, in [0, 1)")->check(fraction_below_one());
  app.add_flag("--nesterov", o.nesterov);
  app.add_option("--schedule", o.schedule, "cosine (default), constant, step, onecycle (PyTorch's OneCycleLR: up from "
                                           "lr/25 for 30% of the run, then down to lr/25e4) or plateau (lr x "
                                           "--plateau-factor after --plateau-patience epochs without a better "
                                           "--monitor value)")
      ->check(CLI::IsMember({"constant", "step", "cosine", "onecycle", "plateau"}));
  app.add_option("--plateau-patience", o.plateau_patience, "--schedule plateau: epochs without a better --monitor "
                                                           "value before the rate drops")
      ->check(integer_between(0, 1000000, ""));
  app.add_option("--plateau-factor", o.plateau_factor, "--schedule plateau: what each drop multiplies the rate by")
      ->check(fraction_between_zero_and_one());
  app.add_option("--warmup-epochs", o.warmup_epochs, "linear warm-up, in epochs (fractions allowed)")
      ->check(non_negative_number());
  app.add_option("--lr-step-epochs", o.lr_step_epochs, "--schedule step: epochs between drops (0: a third of the run)")
      ->check(non_negative_number());
  app.add_option("--lr-step-factor", o.lr_step_factor, "--schedule step: what each drop multiplies the rate by")
      ->check(positive_number());
  app.add_option("--seed", o.seed);
  app.add_option("--threads", o.threads, "CPU threads (default: the cores this process may run on, shared by its machine's ranks; 0: all cores)")
      ->check(integer_between(0, kMaxThreads, "(0: all cores)"));
  app.add_option("--device", o.device)->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--precision", o.precision,
                 "how convolutions and dense layers multiply: fp32; tf32 (CUDA: cuDNN and cuBLAS may use tensor "
                 "cores); bf16 (bfloat16 operands, float sums; on a CPU with AVX512-BF16 its instructions); fp16 "
                 "(half operands, float sums, dynamic loss scaling; slower than fp32 on a CPU). Both store the values "
                 "between layers in 16 bits where that is smaller. Weights, optimizer state and checkpoints stay fp32. "
                 "On CUDA, 16 bits fit a larger batch and train at about tf32's speed")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
  app.add_flag("--fast-start", o.fast_start, "CUDA: pick convolution algorithms by heuristics instead of measuring");
  app.add_flag("--deterministic", o.deterministic, "CUDA: only cuDNN's deterministic convolution algorithms, so that "
                                                   "the same seed gives the same bits (the CPU always does); the log "
                                                   "says what it costs");
  app.add_option("--algo-cache", o.algo_cache, "CUDA: keep measured convolution algorithms in this file for later "
                                               "runs on the same GPU, driver and libraries (default: " +
                                                   (default_algorithm_cache().empty() ? std::string("none")
                                                                                      : default_algorithm_cache()) +
                                                   "; none: measure every run)");
  auto* graph = app.add_flag("--cuda-graph", o.cuda_graph,
                             "CUDA: record each micro-batch's kernels once as a CUDA graph and replay it (one "
                             "launch a micro-batch); the default wherever it can run");
  app.add_flag("--no-cuda-graph", o.no_cuda_graph, "CUDA: launch every kernel of every step")->excludes(graph);
  app.add_option("--memory-budget", o.budget, "hard cap on what the engine reserves, e.g. 512MiB")
      ->check(positive_size());
  app.add_option("--metrics-out", o.metrics_out, "JSON lines: one per step, per epoch, and a summary");
  app.add_option("--tensorboard", o.tensorboard, "write TensorBoard event files into this folder: every step's loss, "
                                                 "accuracy, rate, memory and images/s, each epoch's metrics "
                                                 "(tensorboard --logdir FOLDER)");
  app.add_option("--csv", o.csv, "a CSV file of a row an epoch (epoch, train, validation and test loss and accuracy, "
                                 "rate, seconds, images/s)");
  app.add_option("--save", o.save, "checkpoint the whole run here, atomically, after every epoch (and every "
                                   "--save-every steps, and when stopped by Ctrl-C or SIGTERM)");
  app.add_option("--save-every", o.save_every, "optimizer steps between checkpoints, beside each epoch's end")
      ->check(positive_integer(LLONG_MAX));
  app.add_flag("--overwrite", o.overwrite, "let an output replace an existing file that is not what it writes, or "
                                           "another run's checkpoint");
  app.add_option("--load", o.load, "start a new run from these weights (a checkpoint of the same network)");
  app.add_option("--resume", o.resume, "continue the run saved in this checkpoint, exactly where it stopped, "
                                       "with its own settings (--save defaults to it)");
  app.add_option("--limit", o.limit, "train on the first N samples only")->check(positive_integer(LLONG_MAX));
  app.add_option("--class-names", o.class_names, "a file of the classes' names, one a line, in label order (IDX "
                                                 "data: default classes.txt beside the files; Fashion-MNIST's own "
                                                 "where it is the default folder)");
  app.add_option("--image-size", o.image_size, "image folders: resize to NxN (default: first image's size)")
      ->check(positive_integer());
  app.add_option("--channels", o.channels, "image folders: 1 (grey) or 3 (RGB)")->check(CLI::IsMember({1, 3}));
  app.add_option("--max-image-bytes", o.max_image_bytes, "image folders: refuse an image that decodes to more, "
                                                         "before decoding it")
      ->check(positive_size());
  app.add_flag("--skip-corrupt", o.skip_corrupt, "image folders: leave out images that do not read (a warning "
                                                 "each) instead of stopping");
  app.add_flag("--augment", o.augment, "random horizontal flips (only: --crop-padding adds random crops)");
  app.add_option("--crop-padding", o.crop_padding, "random crops of each image padded by this many pixels")
      ->check(integer_between(0, 64, ""));
  app.add_flag("--normalize", o.normalize, "normalise each channel by the training set's mean and standard deviation");
  app.add_option("--mean", o.mean, "per-channel means to subtract (one value, or one per channel)")->delimiter(',');
  app.add_option("--std", o.std, "per-channel standard deviations to divide by")->delimiter(',');
  app.add_flag("--quiet", o.quiet, "no progress bars");
  app.add_flag("--doctor", o.doctor, "print the environment report (driver, CUDA, cuDNN, cuBLAS) and exit");
  app.add_flag("--plan", o.plan_only,
               "print the memory plan and exit (with --evaluate or --predict: the inference plan)");
  app.add_option("--trace", o.trace, "record every device allocation and release to this file "
                                     "(memory::read_trace reads it, memory::replay runs it on any strategy)");
  app.add_option("--plot", o.plot, "a PNG of the learning curves (gnuplot), rewritten after every epoch");
  app.add_flag("--keep-best", o.keep_best, "with --save: also keep the checkpoint of the epoch best by --monitor, as "
                                          "NAME.best.EXT");
  app.add_flag("--restore-best", o.restore_best, "with --keep-best: at the end, the best epoch's weights are "
                                                "evaluated on the test set and exported (Keras's "
                                                "restore_best_weights); --save keeps the last epoch's run");
  app.add_option("--early-stop", o.early_stop, "stop after this many epochs without a better --monitor value")
      ->check(integer_between(0, 1000000, "(0: never)"));
  app.add_option("--validation-split", o.validation_split,
                 "hold out this fraction of each class of the training data for validation (stratified, by --seed; "
                 "a resumed run holds out the same)")
      ->check(fraction_up_to(0.99));
  app.add_option("--monitor", o.monitor, "what --keep-best and --early-stop watch: val_loss (default), val_accuracy, "
                                         "train_loss or train_accuracy, or a task's val_pixel_accuracy, val_mean_iou, "
                                         "val_mean_f1, val_mean_average_precision, val_mae or val_rmse (never the "
                                         "test set)")
      ->check([](const std::string& word) {
        try {
          parse_monitored_metric(word);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      });
  app.add_option("--limit-eval", o.limit_eval, "evaluate on the first N samples of the validation and test sets only")
      ->check(positive_integer(LLONG_MAX));
  app.add_flag("--find-lr", o.find_lr,
               "the learning-rate range test instead of a run: 100 steps from 1e-7 to 10, the loss of each (and its "
               "curve with --plot), and a rate to start from");
  app.add_flag("--test-each-epoch", o.test_each_epoch,
               "evaluate the test set after every epoch (default: once, at the end; it never chooses the model)");
  app.add_flag("--evaluate", o.evaluate, "with --load: test loss, accuracy, per-class precision and recall, and the "
                                         "confusion matrix on --data's test split");
  app.add_option("--predict", o.predict, "with --load: classify these images or folders of images")->expected(1, -1);
  app.add_option("--export-onnx", o.export_onnx, "write the model as ONNX (opset 13, inference form): with --load and "
                                                 "no --data, the loaded model; else the trained one, after the run");
  app.add_option("--export-onnx-precision", o.export_onnx_precision,
                 "--export-onnx: fp32, or fp16 (weights and every value between the layers in float16, half the file; "
                 "the input and outputs stay float32)")
      ->check(CLI::IsMember({"fp32", "fp16"}));
  app.add_option("--top", o.top, "--predict: the classes shown per image")->check(integer_between(1, 1000, ""));
  app.add_option("--allocator", o.allocator, "step buffers: planned (one arena, offsets fixed before step 1), "
                                             "arena, pool or direct (allocated as produced, freed after last use)")
      ->check(CLI::IsMember({"planned", "arena", "pool", "direct"}));
  app.add_flag("--sync-batchnorm", o.sync_batchnorm, "over the ranks of mpirun -np N: BatchNorm's batch statistics "
                                                    "over every rank's micro-batch (default: each rank its own, as "
                                                    "PyTorch's DDP; the running statistics are rank 0's)");
  app.add_option("--recompute", o.recompute, "during backward, recompute instead of keeping: none; cheap "
                                             "(element-wise and normalisation outputs); auto (under a budget, the "
                                             "least recomputation that fits, and the micro-batch expected fastest)")
      ->check(CLI::IsMember({"none", "cheap", "auto"}));
}

std::string algorithm_cache_of(const Options& o) {
  if (o.algo_cache == "none") return {};
  return o.algo_cache.empty() ? default_algorithm_cache() : o.algo_cache;
}

std::string settings_blocking_cuda_graphs(const Options& o) {
  if (o.sync_batchnorm)
    return "--sync-batchnorm sums over the ranks inside forward and backward, which a recorded graph cannot";
  if (memory::parse_strategy(o.allocator) != memory::Strategy::planned)
    return "--cuda-graph needs --allocator planned: other strategies move buffers between steps";
  return {};
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
  if (o.normalize && (!o.mean.empty() || !o.std.empty()))
    throw CLI::ValidationError("--normalize, --mean, --std", "give --normalize (measured) or --mean and --std, not both");
  if (o.mean.empty() != o.std.empty())
    throw CLI::ValidationError("--mean, --std", "give --mean and --std together");
  if (o.cuda_graph) {
    if (const std::string why = settings_blocking_cuda_graphs(o); !why.empty())
      throw CLI::ValidationError(why);
  }
}

}  // namespace cnn::app
