#pragma once
// train_images' command line.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace cnn::app {

struct Options {
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string model = "small";
  int epochs = 8;
  int batch = 64;
  int micro_batch = 0;
  int accumulate = 0;
  float lr = 1e-3f;
  std::string optimizer = "adamw";
  float weight_decay = -1.f;
  float momentum = 0.9f;
  bool nesterov = false;
  std::string schedule = "cosine";
  double warmup_epochs = 0.0;
  std::uint64_t seed = 1;
  int threads = 0;
  std::string device = "auto";
  std::string precision = "fp32";
  bool fast_start = false;
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
  std::string trace;
};

// Registers every option of `o` on `app`.
void add_options(CLI::App& app, Options& o);

}  // namespace cnn::app
