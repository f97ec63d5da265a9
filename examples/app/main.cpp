// A program that uses the installed library as a user's project would: one header, a device
// picked for it, training under a memory budget the engine enforces, the statistics read back,
// and the typed error of going over the budget. It exits 0 only when all of that holds.
#include <cnnengine/cnnengine.hpp>
#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  using namespace cnn;
  const DeviceChoice device = select_device(DeviceRequest{});  // auto: a GPU where one is usable
  std::printf("%s\n", device.reason.c_str());

  Network net(Shape{1, 8, 8});
  net.add(layers::conv2d(8, 3, 1, 1));
  net.add(layers::relu());
  net.add(layers::max_pool2d(2));
  net.add(layers::flatten());
  net.add(layers::dense(2));

  TrainerOptions options;
  options.batch = 16;
  options.total_steps = 30;
  options.memory_budget = memory::parse_bytes("8MiB");
  Trainer trainer(net, *device.backend, options);
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
    const StepReport r = trainer.train_step(Batch{images.data(), labels.data(), 16});
    if (step == 0) first = r.loss;
    last = r.loss;
  }
  const memory::Statistics stats = trainer.memory_stack().statistics();
  std::printf("loss %.4f -> %.4f; reserved %s, peak %s of a %s budget\n", first, last,
              memory::format_bytes(stats.current_bytes).c_str(), memory::format_bytes(stats.peak_bytes).c_str(),
              memory::format_bytes(options.memory_budget).c_str());

  // The budget is a hard cap over the trainer's memory and a loader's staging together: asking
  // either for more than it leaves is refused.
  int refused = 0;
  for (memory::MemoryResource* resource : {&trainer.memory_stack().blocks(), &trainer.memory_stack().staging()}) {
    try {
      resource->allocate(options.memory_budget - stats.current_bytes + 1);  // one byte more than it leaves
    } catch (const memory::OutOfMemory& e) {
      ++refused;
      std::printf("refused as it should be: %s\n", e.what());
    }
  }
  return last < first && stats.peak_bytes <= options.memory_budget && refused == 2 ? 0 : 1;
}
