// Builds a network, trains it for a few steps on made-up data and prints the memory report.
#include <cnnengine/cnnengine.hpp>
#include <cstdio>
#include <vector>

int main() {
  using namespace cnn;
  Network net(Shape{1, 8, 8});
  net.emplace<Conv2D>(8, 3, 1, 1);
  net.emplace<ReLU>();
  net.emplace<Pool2D>(PoolMode::max, 2);
  net.emplace<Flatten>();
  net.emplace<Dense>(2);

  CpuBackend backend(1);
  TrainerOptions options;
  options.batch = 16;
  options.memory.budget = memory::parse_bytes("8MiB");
  Trainer trainer(net, backend, memory::host_resource(), options);
  std::fputs(format_memory_table(trainer.memory()).c_str(), stdout);

  // Class 1 images are bright, class 0 dark.
  std::vector<float> images(16 * 64);
  std::vector<std::int32_t> labels(16);
  for (int i = 0; i < 16; ++i) {
    labels[i] = i % 2;
    for (int k = 0; k < 64; ++k) images[i * 64 + k] = (i % 2 ? 0.8f : 0.2f) + 0.01f * ((i * 7 + k) % 10);
  }
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    const StepReport r = trainer.train_step(HostBatch{images.data(), labels.data(), 16});
    if (step == 0) first = r.loss;
    last = r.loss;
  }
  std::printf("loss %.4f -> %.4f\n", first, last);
  return last < first ? 0 : 1;
}
