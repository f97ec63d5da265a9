// The batch size is the trainer's (TrainerOptions::batch), and a rank's share is its
// communicator's: a loader cut at another size, or for another rank, is refused at the first
// step with both named, instead of training steps of the loader's size. Only an epoch's last
// batch may be smaller; evaluation takes batches of any size.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/data/loader.hpp>
#include <cnnengine/engine/infer/predictor.hpp>
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/small_images.hpp"
#include "tests/engine/test_networks.hpp"
#include "tests/engine/thread_ranks.hpp"

using namespace cnn;
using cnn::testing::SmallImages;
using cnn::testing::SyntheticData;
using cnn::testing::ThreadRanks;

namespace {

const Shape kImage{1, 12, 12};

data::LoaderOptions loading(int batch) {
  data::LoaderOptions o;
  o.batch = batch;
  return o;
}

TrainerOptions training(int batch) {
  TrainerOptions o;
  o.batch = batch;
  return o;
}

}  // namespace

TEST_CASE("a loader at another batch than the trainer's is refused at the first step, naming both",
          "[trainer][batch]") {
  const SmallImages images(300);
  CpuBackend backend(1);
  Network net = make_preset("small", kImage, 4);
  Trainer trainer(net, backend, memory::host_resource(), training(64));
  CHECK(trainer.batch() == 64);
  const std::vector<float> before = trainer.parameters().download();
  for (int size : {256, 32}) {
    INFO("a loader at " << size);
    data::Loader loader(images, loading(size), memory::host_resource());
    const auto batch = loader.next();
    REQUIRE(batch);
    CHECK_THROWS_AS(trainer.train_step(*batch), ConfigError);
    CHECK_THROWS_WITH(trainer.submit_step(*batch), Catch::Contains("a batch of " + std::to_string(size)) &&
                                                       Catch::Contains("planned for batches of 64") &&
                                                       Catch::Contains("LoaderOptions::batch = 64"));
  }
  CHECK(trainer.steps() == 0);
  CHECK_FALSE(trainer.step_pending());
  CHECK(trainer.parameters().download() == before);

  SECTION("evaluation takes batches of any size") {
    data::Loader loader(images, loading(256), memory::host_resource());
    loader.start_epoch(0);
    const EvalResult e = trainer.evaluate([&] { return loader.next(); });
    CHECK(e.samples == 300);
  }
}

TEST_CASE("a loader's samples of another shape than the network's are refused by every entry point, naming both",
          "[trainer][batch]") {
  // A network for 16 x 16 images fed a loader of 12 x 12 ones: each batch holds fewer floats than
  // the network reads (it read past their end, or found a NaN there).
  const SmallImages images(64);
  CpuBackend backend(1);
  Network net = make_preset("small", Shape{1, 16, 16}, 4);
  Trainer trainer(net, backend, memory::host_resource(), training(16));
  data::Loader loader(images, loading(16), memory::host_resource());
  const auto batch = loader.next();
  REQUIRE(batch);
  const std::string refused = "the batch's samples are [1x12x12], and the network takes [1x16x16]";
  CHECK_THROWS_AS(trainer.train_step(*batch), ShapeError);
  CHECK_THROWS_WITH(trainer.submit_step(*batch), Catch::Contains(refused));
  CHECK(trainer.steps() == 0);
  CHECK_THROWS_WITH(trainer.evaluate([&] { return loader.next(); }), Catch::Contains(refused));
  Predictor predictor(net, backend, memory::host_resource());
  loader.start_epoch(1);
  CHECK_THROWS_WITH(predictor.evaluate([&] { return loader.next(); }), Catch::Contains(refused));
}

TEST_CASE("a loader at the trainer's batch trains every batch of an epoch, its smaller last one too",
          "[trainer][batch]") {
  const SmallImages images(300);
  CpuBackend backend(1);
  Network net = make_preset("small", kImage, 4);
  Trainer trainer(net, backend, memory::host_resource(), training(64));
  data::Loader loader(images, loading(trainer.batch()), memory::host_resource());
  loader.start_epoch(0);
  std::vector<int> samples;
  while (auto batch = loader.next()) samples.push_back(trainer.train_step(*batch).samples);
  CHECK(samples == std::vector<int>{64, 64, 64, 64, 44});
  CHECK(trainer.steps() == 5);
}

TEST_CASE("a batch smaller than the trainer's trains only as an epoch's last", "[trainer][batch]") {
  CpuBackend backend(1);
  Network net = make_preset("small", kImage, 4);
  Trainer trainer(net, backend, memory::host_resource(), training(16));
  const SyntheticData data(20, kImage, 4, 3);
  Batch batch = data.batch(0, 10);
  CHECK_THROWS_WITH(trainer.train_step(batch),
                    Catch::Contains("a batch of 10 for a trainer planned for batches of 16") &&
                        Catch::Contains("Batch::last_of_epoch"));
  CHECK(trainer.steps() == 0);
  batch.last_of_epoch = true;
  CHECK(trainer.train_step(batch).samples == 10);
  Batch empty;
  empty.last_of_epoch = true;
  CHECK_THROWS_WITH(trainer.train_step(empty), Catch::Contains("empty batch"));
  // Never a larger one, last or not.
  Batch larger = data.batch(0, 20);
  larger.last_of_epoch = true;
  CHECK_THROWS_WITH(trainer.train_step(larger),
                    Catch::Contains("a batch of 20 for a trainer planned for batches of 16") &&
                        Catch::Contains("no more than"));
  CHECK(trainer.steps() == 1);
}

TEST_CASE("a loader's shares for other ranks than the trainer's are refused at the first step",
          "[trainer][batch][data-parallel]") {
  const SmallImages images(300);
  SECTION("a loader over two ranks, a trainer alone") {
    CpuBackend backend(1);
    Network net = make_preset("small", kImage, 4);
    Trainer trainer(net, backend, memory::host_resource(), training(64));
    data::LoaderOptions o = loading(64);
    o.ranks = 2;
    data::Loader loader(images, o, memory::host_resource());
    CHECK_THROWS_WITH(trainer.train_step(*loader.next()),
                      Catch::Contains("without a communicator") && Catch::Contains("LoaderOptions::ranks"));
    CHECK(trainer.steps() == 0);
  }
  SECTION("a loader alone, or for the other rank, with trainers over two ranks") {
    ThreadRanks group(2);
    for (const bool swapped : {false, true}) {
      group.run([&](int r) {
        CpuBackend backend(1);
        Network net = make_preset("small", kImage, 4);
        TrainerOptions t = training(64);
        t.communicator = &group.rank(r);
        Trainer trainer(net, backend, memory::host_resource(), t);
        data::LoaderOptions o = loading(64);
        if (swapped) {
          o.ranks = 2;
          o.rank = 1 - r;
        }
        data::Loader loader(images, o, memory::host_resource());
        // Every rank refuses, so that none waits in a sum for the others.
        CHECK_THROWS_WITH(trainer.train_step(*loader.next()),
                          Catch::Contains("not a share of a batch of 64 for rank " + std::to_string(r) + " of 2") &&
                              Catch::Contains(r == 0 ? "its share: samples 0 to 32" : "its share: samples 32 to 64"));
        CHECK(trainer.steps() == 0);
        // Its own share trains.
        o.ranks = 2;
        o.rank = r;
        data::Loader mine(images, o, memory::host_resource());
        CHECK(trainer.train_step(*mine.next()).samples == 64);
      });
    }
  }
}
