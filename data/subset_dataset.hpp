#pragma once
// Part of another data set, by index list: the two sides of a held-out split (a test split of a
// folder of class folders, a validation split of a training set) and a run's first samples.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cnnengine/data/dataset.hpp>

namespace cnn::data {

struct Split {
  std::unique_ptr<Dataset> train, test;
};

// Holds out about 1/6 of each class (at least one sample of every class with two or more), chosen
// by seed; both sides share `base` and keep its order. host_bytes() is shared out between the sides
// by sample count, so their sum is what the base holds.
Split stratified_split(std::shared_ptr<const Dataset> base, std::uint64_t seed);

}  // namespace cnn::data
