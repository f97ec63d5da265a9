#pragma once
// A rank's part of a batch in data-parallel training: the loader loads it, the trainer trains on
// it, and both must agree to the sample, so the rule lives here, below both.
namespace cnn {

struct RankShare {
  int first = 0;  // the share's first sample in the batch
  int size = 0;
};

// The share of `rank` (0 <= rank < ranks) in a batch of `batch` samples: the first `batch % ranks`
// ranks take one sample more, in rank order, so that the shares laid end to end are the batch.
inline RankShare share_of_batch(int batch, int rank, int ranks) {
  const int base = batch / ranks, extra = batch % ranks;
  return RankShare{rank * base + (rank < extra ? rank : extra), base + (rank < extra ? 1 : 0)};
}

}  // namespace cnn
