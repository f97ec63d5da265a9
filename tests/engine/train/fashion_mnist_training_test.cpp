// A short training run on a real Fashion-MNIST subset: the loss falls and accuracy rises.
#include <catch2/catch.hpp>

#include "backends/cpu/cpu_backend.hpp"
#include "data/idx_dataset.hpp"
#include <cnnengine/data/loader.hpp>
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>

using namespace cnn;

// Under ASan and UBSan it took 166 s; the sanitized stage trains small on Fashion-MNIST through
// train_images (train_images_short_run) instead.
TEST_CASE("small learns a Fashion-MNIST subset", "[training][fashion-mnist][slow_under_sanitizers]") {
  const std::string dir = CNN_FASHION_MNIST_DIR;
  auto train = data::open_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  auto test = data::open_idx(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
  Network net = make_preset("small", Shape{1, 28, 28}, 10);
  CpuBackend backend(2);
  TrainerOptions options;
  options.batch = 64;
  options.schedule.kind = ScheduleKind::constant;
  Trainer trainer(net, backend, memory::host_resource(), options);

  data::LoaderOptions lo;
  lo.batch = 64;
  data::Loader train_loader(*train, lo, memory::host_resource());
  lo.shuffle = false;
  lo.batch = 250;
  data::Loader test_loader(*test, lo, memory::host_resource());
  auto test_batches = [&, count = 0]() mutable -> std::optional<Batch> {
    auto b = test_loader.next();
    if (!b || ++count > 8) return std::nullopt;  // the first 2000 test images
    return *b;
  };
  test_loader.start_epoch(1);
  const EvalResult before = trainer.evaluate(test_batches);

  train_loader.start_epoch(1);
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 100; ++step) {  // 6400 images
    auto b = train_loader.next();
    REQUIRE(b);
    const StepReport r = trainer.train_step(*b);
    if (step < 10) first_loss += r.loss / 10;
    if (step >= 90) last_loss += r.loss / 10;
  }
  test_loader.start_epoch(1);
  const EvalResult after = trainer.evaluate(test_batches);
  INFO("loss " << first_loss << " -> " << last_loss << ", test accuracy " << before.accuracy << " -> " << after.accuracy);
  CHECK(last_loss < 0.6 * first_loss);
  CHECK(after.accuracy > 0.72);
  CHECK(after.accuracy > before.accuracy + 0.4);
  CHECK(after.samples == 2000);
}
