// A segmentation network at a size where memory runs out first: a U-Net on 3x256x256 images
// plans, chooses its micro-batch and trains under a budget with accumulation exactly as a
// classifier does.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/plan/batch_planner.hpp"
#include "engine/train/planning_options.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;

TEST_CASE("a U-Net on 3x256x256 trains under a budget at the micro-batch its plan computes",
          "[tasks][budget]") {
  const Shape image{3, 256, 256};
  const int classes = 4;
  Network net = make_preset("unet:depth=3,width=8", image, classes);
  LossOptions loss;
  loss.task = Task::segment;
  net.set_loss(loss);
  REQUIRE(net.output_shape() == (Shape{classes, 256, 256}));
  CpuBackend backend(2);

  TrainerOptions o = cnn::testing::constant_sgd(4);
  // A budget between the plans of micro-batches 2 and 3: the planner's answer is 2, computed.
  const BatchPlanner unbounded(net, backend, planning_options(o, net, backend));
  const std::size_t at2 = unbounded.breakdown(2).total(), at3 = unbounded.breakdown(3).total();
  REQUIRE(at3 > at2);
  o.memory_budget = at2 + (at3 - at2) / 2;
  const BatchPlanner bounded(net, backend, planning_options(o, net, backend));
  CHECK(bounded.largest_fitting(4) == 2);
  // The masks sit in the input slots: H x W bytes a sample.
  CHECK(net.target_bytes() == 256u * 256u);

  Trainer trainer(net, backend, o);
  CHECK(trainer.micro_batch() == 2);
  std::vector<float> images(4 * image.elements());
  std::vector<std::uint8_t> masks(4 * 256 * 256);
  for (std::size_t i = 0; i < images.size(); ++i) images[i] = cnn::uniform01(3, i);
  for (std::size_t i = 0; i < masks.size(); ++i)
    masks[i] = i % 97 == 0 ? kIgnoreMask : static_cast<std::uint8_t>(images[i] * classes);
  Batch batch{images.data(), nullptr, 4};
  batch.targets = masks.data();
  const StepReport report = trainer.train_step(batch);
  CHECK(report.micro_batches == 2);
  CHECK(report.micro_batch == 2);
  CHECK(std::isfinite(report.loss));
  CHECK(report.loss == Approx(std::log(static_cast<double>(classes))).epsilon(0.3));
  CHECK(trainer.memory_stack().statistics().peak_bytes <= o.memory_budget);
}
