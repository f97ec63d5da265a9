// The batch size is the trainer's (TrainerOptions::batch): a loader cut at another size is
// refused at the first step, naming both sizes, instead of training steps of the loader's size.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "data/loader.hpp"
#include "engine/train/trainer.hpp"
#include "memory/host_resource.hpp"
#include "models/presets.hpp"

using namespace cnn;

namespace {

const Shape kImage{1, 12, 12};

// 300 samples of 1 x 12 x 12, four classes.
class SmallImages final : public data::Dataset {
 public:
  std::size_t size() const override { return 300; }
  data::SampleShape shape() const override { return {1, 12, 12}; }
  int num_classes() const override { return 4; }
  std::vector<std::string> class_names() const override { return {"a", "b", "c", "d"}; }
  std::string description() const override { return "small images"; }
  std::size_t host_bytes() const override { return 0; }
  int load(std::size_t index, float* out) const override {
    for (int k = 0; k < 144; ++k) out[k] = static_cast<float>((index * 7 + static_cast<std::size_t>(k)) % 11) / 11.f;
    return static_cast<int>(index % 4);
  }
};

TrainerOptions training(int batch) {
  TrainerOptions o;
  o.batch = batch;
  return o;
}

}  // namespace

TEST_CASE("a loader at 256 with a trainer at 64 is refused at the first step", "[trainer][batch]") {
  const SmallImages images;
  CpuBackend backend(1);
  Network net = make_preset("small", kImage, 4);
  Trainer trainer(net, backend, memory::host_resource(), training(64));
  data::LoaderOptions loading;
  loading.batch = 256;
  data::Loader loader(images, loading, memory::host_resource());
  const auto batch = loader.next();
  REQUIRE(batch);
  REQUIRE_THROWS_AS(trainer.train_step(HostBatch{batch->images, batch->labels, batch->size}), ConfigError);
}
