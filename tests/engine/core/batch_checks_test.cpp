// A training step's batch contract, checked in one place before anything is read: the trainer's
// size, a rank's share, and the samples' shape even on a rank whose share is empty (every rank
// must refuse alike, or the others wait in a sum).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "engine/core/detail/batch_checks.hpp"
#include <cnnengine/models/network_text.hpp>

using namespace cnn;

namespace {

Network small_network() { return make_preset("small", Shape{1, 8, 8}, 3); }

}  // namespace

TEST_CASE("a step's batch: the trainer's size, a rank's share, the need", "[batch_checks]") {
  const Network net = small_network();
  std::vector<float> images(4 * 64, 0.5f);
  std::vector<std::int32_t> labels(4, 1);
  Batch batch{images.data(), labels.data(), 4};
  StepBatchContract one{.batch = 4};
  check_step_batch(batch, one, net, "train_step");

  StepBatchContract larger{.batch = 8};
  CHECK_THROWS_WITH(check_step_batch(batch, larger, net, "train_step"),
                    Catch::Contains("a batch of 4 for a trainer planned for batches of 8"));
  batch.last_of_epoch = true;
  check_step_batch(batch, larger, net, "train_step");

  StepBatchContract needy{.batch = 4, .need_samples = 5, .need_why = "BatchNorm needs 5"};
  CHECK_THROWS_WITH(check_step_batch(batch, needy, net, "submit_step"),
                    Catch::Contains("submit_step: a batch of 4 cannot train this network: BatchNorm needs 5"));

  StepBatchContract rank1{.batch = 4, .data_parallel = true, .rank = 1, .ranks = 2};
  CHECK_THROWS_WITH(check_step_batch(batch, rank1, net, "train_step"), Catch::Contains("are not a share"));
}

TEST_CASE("a rank's empty share of a batch of another shape is refused as the others' shares are",
          "[batch_checks]") {
  const Network net = small_network();
  // 3 samples over 4 ranks: rank 3's share is empty.
  Batch empty{.images = nullptr, .labels = nullptr, .size = 0, .first = 3, .global_size = 3};
  empty.last_of_epoch = true;
  StepBatchContract rank3{.batch = 4, .data_parallel = true, .rank = 3, .ranks = 4};
  check_step_batch(empty, rank3, net, "train_step");  // the network's shape: it sits the step out

  empty.channels = 3;
  empty.height = 8;
  empty.width = 8;
  CHECK_THROWS_AS(check_step_batch(empty, rank3, net, "train_step"), ShapeError);
}
