#pragma once
// The batches of an evaluation, one a call, until nullopt (a loader's next()): what a trainer
// and a predictor both evaluate, so it lives below them.
#include <functional>
#include <optional>

#include "base/batch.hpp"

namespace cnn {

using NextBatch = std::function<std::optional<Batch>()>;

}  // namespace cnn
