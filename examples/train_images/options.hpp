#pragma once
// train_images' command line.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

namespace cnn::app {

struct Options {
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string model = "small";
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
  std::uint64_t seed = 1;
  int threads = 0;
  std::string device = "auto";
  std::string precision = "fp32";
  bool fast_start = false;
  bool cuda_graph = false;
  std::string budget;
  std::string metrics_out;
  std::string save;
  std::string load;
  std::size_t limit = 0;
  int image_size = 0;
  int channels = 0;
  bool augment = false;
  bool quiet = false;
  bool doctor = false;
  bool plan_only = false;
  std::string allocator = "planned";
  std::string recompute = "none";
  std::string trace;
};

// CPU threads beyond this are a typo, and would fail inside OpenMP with no message of ours.
inline constexpr int kMaxThreads = 256;

// Registers every option of `o` on `app`.
void add_options(CLI::App& app, Options& o);
// What no single option's check can see: throws CLI::ValidationError for conflicting options.
void check_combinations(const Options& o);

}  // namespace cnn::app
