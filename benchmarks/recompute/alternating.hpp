#pragma once
// Two trainers timed in turns, so that a shared machine's load falls on both alike: round r runs
// `steps` optimizer steps of one, then of the other, the order swapped every round.
#include <cstdint>
#include <vector>

#include <cnnengine/engine/train/trainer.hpp>

namespace recompute_bench {

// Images whose class shows in their pixels; the same for the same seed.
class SyntheticBatches {
 public:
  SyntheticBatches(cnn::Shape sample, int classes, int batch, int count, unsigned seed);
  cnn::Batch batch(int i) const;
  int count() const { return count_; }

 private:
  std::vector<float> images_;
  std::vector<std::int32_t> labels_;
  std::size_t sample_floats_;
  int batch_, count_;
};

struct Rates {
  std::vector<double> first, second;  // samples per second, one per round
  std::vector<double> ratios() const;  // second / first, by round
};

// Round r runs batches first_batch + r * steps, ... of `data` (cycling) on each trainer: both see
// the same batches in the same order.
Rates time_alternately(cnn::Trainer& first, cnn::Trainer& second, const SyntheticBatches& data, int first_batch,
                       int rounds, int steps);

double median(std::vector<double> values);

}  // namespace recompute_bench
