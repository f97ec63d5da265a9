#include "options.hpp"

#include "validators.hpp"

namespace cnn::app {

void add_options(CLI::App& app, Options& o) {
  app.add_option("--data", o.data, "IDX folder (Fashion-MNIST layout) or image folder (one sub-folder per class)");
  app.add_option("--model", o.model, "small, small-bn, resnet, resnet18, or a network text file");
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
  app.add_option("--schedule", o.schedule)->check(CLI::IsMember({"constant", "step", "cosine"}));
  app.add_option("--warmup-epochs", o.warmup_epochs, "linear warm-up, in epochs (fractions allowed)")
      ->check(non_negative_number());
  app.add_option("--seed", o.seed);
  app.add_option("--threads", o.threads, "CPU threads (0: all cores)")
      ->check(integer_between(0, kMaxThreads, "(0: all cores)"));
  app.add_option("--device", o.device)->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--precision", o.precision, "CUDA: fp32, or tf32 (cuDNN and cuBLAS may use tensor cores)")
      ->check(CLI::IsMember({"fp32", "tf32"}));
  app.add_flag("--fast-start", o.fast_start, "CUDA: pick convolution algorithms by heuristics instead of measuring");
  app.add_flag("--cuda-graph", o.cuda_graph, "CUDA: record each micro-batch's kernels once as a CUDA graph and "
                                             "replay it (one launch a micro-batch)");
  app.add_option("--memory-budget", o.budget, "hard cap on what the engine reserves, e.g. 512MiB")
      ->check(positive_size());
  app.add_option("--metrics-out", o.metrics_out, "JSON lines: one per step, per epoch, and a summary");
  app.add_option("--save", o.save, "write the weights here after every epoch (atomically)");
  app.add_option("--load", o.load, "start from these weights");
  app.add_option("--limit", o.limit, "train on the first N samples only")->check(positive_integer(LLONG_MAX));
  app.add_option("--image-size", o.image_size, "image folders: resize to NxN (default: first image's size)")
      ->check(positive_integer());
  app.add_option("--channels", o.channels, "image folders: 1 (grey) or 3 (RGB)")->check(CLI::IsMember({1, 3}));
  app.add_flag("--augment", o.augment, "random horizontal flips");
  app.add_flag("--quiet", o.quiet, "no progress bar");
  app.add_flag("--doctor", o.doctor, "print the environment report (driver, CUDA, cuDNN, cuBLAS) and exit");
  app.add_flag("--plan", o.plan_only, "print the memory plan and exit");
  app.add_option("--trace", o.trace, "record every device allocation and release to this file "
                                     "(memory::read_trace reads it, memory::replay runs it on any strategy)");
  app.add_option("--allocator", o.allocator, "step buffers: planned (one arena, offsets fixed before step 1), "
                                             "arena, pool or direct (allocated as produced, freed after last use)")
      ->check(CLI::IsMember({"planned", "arena", "pool", "direct"}));
  app.add_option("--recompute", o.recompute, "during backward, recompute instead of keeping: none; cheap "
                                             "(element-wise and normalisation outputs); auto (under a budget, the "
                                             "least recomputation that fits, and the micro-batch expected fastest)")
      ->check(CLI::IsMember({"none", "cheap", "auto"}));
}

void check_combinations(const Options& o) {
  if (o.micro_batch > 0 && o.accumulate > 0)
    throw CLI::ValidationError("--micro-batch, --accumulate", "give --micro-batch or --accumulate, not both");
  if (o.cuda_graph && o.allocator != "planned")
    throw CLI::ValidationError("--cuda-graph, --allocator",
                               "--cuda-graph needs --allocator planned: other strategies move buffers between steps");
}

}  // namespace cnn::app
