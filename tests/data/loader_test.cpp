#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <cnnengine/base/batch.hpp>
#include <cnnengine/base/error.hpp>
#include "data/data_error.hpp"
#include "data/detail/augment.hpp"
#include "data/detail/random.hpp"
#include <cnnengine/data/loader.hpp>
#include "data/subset_dataset.hpp"
#include "memory/host_resource.hpp"

using namespace cnn::data;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// Sample i is 1x2x3 with pixel 0 = i and pixel k = k otherwise; its label is i % 3. It can fail
// at one index and be slow.
class FakeDataset final : public Dataset {
 public:
  explicit FakeDataset(std::size_t n, std::size_t fail_at = SIZE_MAX, std::chrono::milliseconds delay = 0ms,
                       int classes = 3)
      : n_(n), fail_at_(fail_at), delay_(delay), classes_(classes) {}
  std::size_t size() const override { return n_; }
  SampleShape shape() const override { return {1, 2, 3}; }
  int num_classes() const override { return classes_; }
  std::vector<std::string> class_names() const override { return {"a", "b", "c"}; }
  std::string description() const override { return "fake"; }
  std::size_t host_bytes() const override { return 0; }
  int load(std::size_t index, float* out) const override {
    ++loads;
    if (delay_.count()) std::this_thread::sleep_for(delay_);
    if (index == fail_at_) throw DataError("/data/fake/sample" + std::to_string(index) + ".png: corrupt image");
    for (int k = 0; k < 6; ++k) out[k] = static_cast<float>(k);
    out[0] = static_cast<float>(index);
    return static_cast<int>(index % 3);
  }
  mutable std::atomic<int> loads{0};

 private:
  std::size_t n_, fail_at_;
  std::chrono::milliseconds delay_;
  int classes_;
};

// The sample indices of one epoch, batch by batch.
std::vector<std::vector<int>> epoch_batches(Loader& loader, int epoch) {
  loader.start_epoch(epoch);
  std::vector<std::vector<int>> batches;
  while (auto batch = loader.next()) {
    CHECK(batch->index == batches.size());
    // One rank: the batch is all there is; only the epoch's last one is marked (the one that may be smaller).
    CHECK(batch->first == 0);
    CHECK(batch->global_size == batch->size);
    CHECK(batch->last_of_epoch == (batch->index + 1 == loader.batches_per_epoch()));
    std::vector<int> ids;
    for (int s = 0; s < batch->size; ++s) {
      int id = static_cast<int>(batch->images[s * 6]);
      CHECK(batch->labels[s] == id % 3);
      ids.push_back(id);
    }
    batches.push_back(ids);
  }
  return batches;
}

std::vector<int> flat(const std::vector<std::vector<int>>& batches) {
  std::vector<int> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

// Counts what the loader asks of its staging resource.
class CountingResource final : public cnn::memory::MemoryResource {
 public:
  std::string name() const override { return "counting"; }
  int allocations = 0, deallocations = 0;
  std::size_t live = 0;
  cnn::memory::Category last_category = cnn::memory::Category::other;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, cnn::memory::Category category) override {
    ++allocations;
    live += bytes;
    last_category = category;
    return cnn::memory::host_resource().allocate(bytes, alignment, category);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, cnn::memory::Category category) override {
    ++deallocations;
    live -= bytes;
    cnn::memory::host_resource().deallocate(ptr, bytes, alignment, category);
  }
};

LoaderOptions batch_of(int batch) {
  LoaderOptions options;
  options.batch = batch;
  return options;
}

}  // namespace

TEST_CASE("loader: every sample exactly once per epoch, last batch partial", "[data][loader]") {
  FakeDataset data(103);
  const int prefetch = GENERATE(0, 1, 2, 5);
  LoaderOptions options = batch_of(10);
  options.prefetch = prefetch;
  Loader loader(data, options, cnn::memory::host_resource());
  CHECK(loader.batches_per_epoch() == 11);
  for (int epoch = 0; epoch < 3; ++epoch) {
    auto batches = epoch_batches(loader, epoch);
    REQUIRE(batches.size() == 11);
    for (std::size_t b = 0; b < 10; ++b) CHECK(batches[b].size() == 10);
    CHECK(batches[10].size() == 3);
    std::vector<int> all = flat(batches);
    CHECK(std::set<int>(all.begin(), all.end()).size() == 103);
    CHECK(loader.next() == std::nullopt);  // stays ended
  }
}

TEST_CASE("loader: drop_last drops the partial batch", "[data][loader]") {
  FakeDataset data(103);
  LoaderOptions options = batch_of(10);
  options.drop_last = true;
  Loader loader(data, options, cnn::memory::host_resource());
  CHECK(loader.batches_per_epoch() == 10);
  auto batches = epoch_batches(loader, 0);
  REQUIRE(batches.size() == 10);
  std::vector<int> all = flat(batches);
  CHECK(std::set<int>(all.begin(), all.end()).size() == 100);
}

TEST_CASE("loader: over ranks, each loads its share of every batch, the shares laid end to end the batch",
          "[data][loader]") {
  FakeDataset data(23);  // batches of 10, 10 and 3: the last one smaller than the three ranks' shares
  Loader whole(data, batch_of(10), cnn::memory::host_resource());
  const auto batches = epoch_batches(whole, 2);
  std::vector<std::vector<int>> joined(batches.size());
  for (int rank = 0; rank < 3; ++rank) {
    LoaderOptions options = batch_of(10);
    options.rank = rank;
    options.ranks = 3;
    Loader loader(data, options, cnn::memory::host_resource());
    loader.start_epoch(2);
    std::size_t b = 0;
    while (auto share = loader.next()) {
      REQUIRE(b < batches.size());
      const int global = static_cast<int>(batches[b].size());
      const cnn::RankShare mine = cnn::share_of_batch(global, rank, 3);
      CHECK(share->global_size == global);
      CHECK(share->first == mine.first);
      CHECK(share->size == mine.size);
      CHECK(share->index == b);
      CHECK(share->last_of_epoch == (b + 1 == batches.size()));
      for (int s = 0; s < share->size; ++s) joined[b].push_back(static_cast<int>(share->images[s * 6]));
      ++b;
    }
    CHECK(b == batches.size());
  }
  CHECK(joined == batches);
}

TEST_CASE("loader: the order depends on seed and epoch only", "[data][loader]") {
  FakeDataset data(50);
  Loader a(data, batch_of(7), cnn::memory::host_resource());
  Loader b(data, batch_of(7), cnn::memory::host_resource());
  LoaderOptions other_seed = batch_of(7);
  other_seed.seed = 2;
  Loader c(data, other_seed, cnn::memory::host_resource());
  const auto a0 = flat(epoch_batches(a, 0)), a1 = flat(epoch_batches(a, 1));
  CHECK(a0 == flat(epoch_batches(b, 0)));
  CHECK(a1 == flat(epoch_batches(b, 1)));
  CHECK(a0 != a1);
  CHECK(a0 != flat(epoch_batches(c, 0)));
  CHECK(flat(epoch_batches(a, 0)) == a0);  // an epoch replays

  LoaderOptions in_order = batch_of(7);
  in_order.shuffle = false;
  Loader d(data, in_order, cnn::memory::host_resource());
  std::vector<int> identity(50);
  for (int i = 0; i < 50; ++i) identity[i] = i;
  CHECK(flat(epoch_batches(d, 3)) == identity);
}

TEST_CASE("loader: the shuffle is the same on every machine", "[data][loader]") {
  // Pinned values: a change here changes every recorded run's sample order.
  CHECK(permutation(10, 42) == std::vector<std::size_t>{0, 9, 5, 8, 6, 4, 7, 2, 1, 3});
  SplitMix64 rng(1234567);
  CHECK(rng.next() == 0x599ED017FB08FC85ull);
}

TEST_CASE("loader: restarting mid-epoch starts a full epoch", "[data][loader]") {
  FakeDataset data(40);
  Loader loader(data, batch_of(8), cnn::memory::host_resource());
  loader.start_epoch(0);
  REQUIRE(loader.next());
  REQUIRE(loader.next());
  auto batches = epoch_batches(loader, 0);
  CHECK(batches.size() == 5);
  CHECK(flat(batches).size() == 40);
}

TEST_CASE("loader: an epoch started at batch k gives the epoch's batches from k, loading no others",
          "[data][loader]") {
  FakeDataset data(50);
  LoaderOptions options;
  options.batch = 8;
  Loader loader(data, options, cnn::memory::host_resource());
  const auto whole = epoch_batches(loader, 4);
  const int loads_before = data.loads;
  loader.start_epoch(4, 3);
  for (std::size_t b = 3; b < whole.size(); ++b) {
    const auto batch = loader.next();
    REQUIRE(batch);
    CHECK(batch->index == b);
    for (int s = 0; s < batch->size; ++s) CHECK(static_cast<int>(batch->images[s * 6]) == whole[b][static_cast<std::size_t>(s)]);
  }
  CHECK_FALSE(loader.next());
  CHECK(data.loads - loads_before == 50 - 3 * 8);
  loader.start_epoch(5, whole.size());  // a run saved at the end of an epoch's batches
  CHECK_FALSE(loader.next());
  CHECK_THROWS_AS(loader.start_epoch(5, whole.size() + 1), cnn::ConfigError);
}

TEST_CASE("loader: next() before start_epoch() runs epoch 0", "[data][loader]") {
  FakeDataset data(9);
  Loader a(data, batch_of(4), cnn::memory::host_resource());
  Loader b(data, batch_of(4), cnn::memory::host_resource());
  std::vector<int> implicit;
  while (auto batch = a.next())
    for (int s = 0; s < batch->size; ++s) implicit.push_back(static_cast<int>(batch->images[s * 6]));
  CHECK(implicit == flat(epoch_batches(b, 0)));
}

TEST_CASE("loader: an empty data set has no batches", "[data][loader]") {
  FakeDataset data(0);
  Loader loader(data, batch_of(4), cnn::memory::host_resource());
  CHECK(loader.batches_per_epoch() == 0);
  CHECK(loader.next() == std::nullopt);
}

TEST_CASE("loader: an error in load() reaches next() after the batches before it", "[data][loader]") {
  FakeDataset data(40, 25);
  LoaderOptions options = batch_of(5);
  options.shuffle = false;
  Loader loader(data, options, cnn::memory::host_resource());
  loader.start_epoch(0);
  for (int b = 0; b < 5; ++b) REQUIRE(loader.next());
  for (int attempt = 0; attempt < 2; ++attempt) {  // it stays failed
    try {
      loader.next();
      FAIL("expected a DataError");
    } catch (const DataError& e) {
      CHECK(std::string(e.what()).find("/data/fake/sample25.png: corrupt image") != std::string::npos);
    }
  }
  loader.start_epoch(1);  // a new epoch runs again up to the bad sample
  CHECK(loader.next()->index == 0);
}

TEST_CASE("loader: a label outside the classes is an error, not a crash later", "[data][loader]") {
  FakeDataset data(10, SIZE_MAX, 0ms, 2);  // label i % 3 reaches 2
  Loader loader(data, batch_of(4), cnn::memory::host_resource());
  CHECK_THROWS_WITH([&] { while (loader.next()) {} }(), Catch::Contains("fake: sample") && Catch::Contains("has label 2, expected 0..1"));
}

TEST_CASE("loader: destruction never hangs", "[data][loader]") {
  FakeDataset slow(1000, SIZE_MAX, 2ms);
  const auto started = Clock::now();
  SECTION("mid-epoch") {
    Loader loader(slow, batch_of(16), cnn::memory::host_resource());
    loader.start_epoch(0);
    REQUIRE(loader.next());
  }
  SECTION("before any epoch") { Loader loader(slow, batch_of(16), cnn::memory::host_resource()); }
  SECTION("with the ring full and nobody reading") {
    Loader loader(slow, batch_of(2), cnn::memory::host_resource());
    loader.start_epoch(0);
    std::this_thread::sleep_for(50ms);
  }
  SECTION("after an error") {
    FakeDataset failing(100, 3);
    Loader loader(failing, batch_of(4), cnn::memory::host_resource());
    loader.start_epoch(0);
    CHECK_THROWS_AS([&] { while (loader.next()) {} }(), DataError);
  }
  // The worker stops after the sample in progress, not after the epoch (1000 x 2 ms).
  CHECK(Clock::now() - started < 1s);
  CHECK(slow.loads < 200);
}

TEST_CASE("loader: staging is one data_staging block, freed at the end", "[data][loader]") {
  FakeDataset data(20);
  CountingResource resource;
  {
    LoaderOptions options = batch_of(8);
    options.prefetch = 3;
    Loader loader(data, options, resource);
    CHECK(resource.allocations == 1);
    CHECK(resource.last_category == cnn::memory::Category::data_staging);
    CHECK(loader.staging_bytes() == resource.live);
    CHECK(loader.staging_bytes() >= 4 * 8 * (6 * sizeof(float) + sizeof(std::int32_t)));
    epoch_batches(loader, 0);
    epoch_batches(loader, 1);
    CHECK(resource.allocations == 1);
  }
  CHECK(resource.deallocations == 1);
  CHECK(resource.live == 0);
}

TEST_CASE("loader: bad options are refused", "[data][loader]") {
  FakeDataset data(20);
  LoaderOptions options;
  options.batch = 0;
  CHECK_THROWS_AS(Loader(data, options, cnn::memory::host_resource()), cnn::ConfigError);
  options = {};
  options.normalization = {{0.5f}, {0.0f}};
  CHECK_THROWS_AS(Loader(data, options, cnn::memory::host_resource()), cnn::ConfigError);
  options = {};
  options.prefetch = -1;
  CHECK_THROWS_AS(Loader(data, options, cnn::memory::host_resource()), cnn::ConfigError);
  options = {};
  options.augment_crop_padding = 1000;  // a crop of a few pixels' image shifted by 1000 holds none of it
  CHECK_THROWS_WITH(Loader(data, options, cnn::memory::host_resource()),
                    Catch::Contains("augment_crop_padding of 1000 is more than"));
}

TEST_CASE("loader: normalisation after augmentation, augmentation deterministic", "[data][loader]") {
  FakeDataset data(64);
  LoaderOptions options = batch_of(64);
  options.shuffle = false;
  options.normalization = {{0.5f}, {2.0f}};

  SECTION("normalise only") {
    Loader loader(data, options, cnn::memory::host_resource());
    auto batch = loader.next();
    REQUIRE(batch);
    for (int k = 1; k < 6; ++k) CHECK(batch->images[6 * 9 + k] == Approx((k - 0.5f) / 2.0f));
    CHECK(batch->images[6 * 9] == Approx((9 - 0.5f) / 2.0f));
  }
  SECTION("flip and crop") {
    options.augment_flip = true;
    options.augment_crop_padding = 1;
    auto images = [&](int epoch) {
      Loader loader(data, options, cnn::memory::host_resource());
      loader.start_epoch(epoch);
      auto batch = loader.next();
      return std::vector<float>(batch->images, batch->images + 64 * 6);
    };
    const auto e0 = images(0);
    CHECK(images(0) == e0);
    CHECK(images(1) != e0);
    // Every value is a normalised pixel of the sample or the normalised zero padding.
    int padded = 0, flipped = 0;
    for (int s = 0; s < 64; ++s) {
      std::set<float> allowed = {(0 - 0.5f) / 2, (s - 0.5f) / 2};
      for (int k = 1; k < 6; ++k) allowed.insert((k - 0.5f) / 2);
      for (int k = 0; k < 6; ++k) CHECK(allowed.count(e0[s * 6 + k]) == 1);
      padded += std::count(e0.begin() + s * 6, e0.begin() + s * 6 + 6, (0 - 0.5f) / 2) > (s == 0 ? 1 : 0);
      AugmentChoice choice = choose_augment(hash_values(options.seed, 0, s, 0xA116'0000'0000'0001ull), true, 1);
      flipped += choice.flip;
    }
    CHECK(padded > 10);
    CHECK(flipped > 10);
    CHECK(flipped < 54);
  }
}

TEST_CASE("augment: flip mirrors rows, crop shifts in zeros", "[data][loader]") {
  const SampleShape shape{2, 2, 3};
  std::vector<float> image = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, scratch(12);
  SECTION("flip") {
    apply_augment(image.data(), shape, {true, 0, 0}, scratch.data());
    CHECK(image == std::vector<float>{3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10});
  }
  SECTION("crop one down and one right") {
    apply_augment(image.data(), shape, {false, 1, 1}, scratch.data());
    CHECK(image == std::vector<float>{5, 6, 0, 0, 0, 0, 11, 12, 0, 0, 0, 0});
  }
  SECTION("crop one up and one left") {
    apply_augment(image.data(), shape, {false, -1, -1}, scratch.data());
    CHECK(image == std::vector<float>{0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 7, 8});
  }
  SECTION("choices stay inside the padding") {
    for (std::uint64_t key = 0; key < 1000; ++key) {
      AugmentChoice c = choose_augment(hash_values(1, key), false, 2);
      CHECK(!c.flip);
      CHECK(c.shift_x >= -2);
      CHECK(c.shift_x <= 2);
      CHECK(c.shift_y >= -2);
      CHECK(c.shift_y <= 2);
    }
  }
}

TEST_CASE("stratified_split refuses a label outside the data set's classes, naming the sample") {
  // A user's data set whose labels run 0, 1, 2 but that declares two classes.
  auto data = std::make_shared<FakeDataset>(6, SIZE_MAX, 0ms, 2);
  CHECK_THROWS_AS(stratified_split(data, 1), DataError);
  CHECK_THROWS_WITH(stratified_split(data, 1), Catch::Contains("fake: sample 2 has label 2, outside its 2 classes"));
  CHECK_NOTHROW(stratified_split(std::make_shared<FakeDataset>(6), 1));
  CHECK_THROWS_AS(stratified_split(nullptr, 1), cnn::ConfigError);
}

TEST_CASE("a negative epoch is refused", "[loader]") {
  FakeDataset data(8);
  LoaderOptions options;
  options.batch = 4;
  Loader loader(data, options, cnn::memory::host_resource());
  CHECK_THROWS_WITH(loader.start_epoch(-1), Catch::Contains("epoch -1"));
}

namespace {

// Every batch's images and labels of one epoch, as bytes.
std::vector<float> epoch_values(Loader& loader, int epoch) {
  std::vector<float> values;
  loader.start_epoch(epoch);
  while (auto batch = loader.next()) {
    const std::size_t n = static_cast<std::size_t>(batch->size) * 6;
    values.insert(values.end(), batch->images, batch->images + n);
    for (int s = 0; s < batch->size; ++s) values.push_back(static_cast<float>(batch->labels[s]));
  }
  return values;
}

}  // namespace

TEST_CASE("loader: the photo augmentations give the same bits on any thread count", "[data][loader][photo]") {
  FakeDataset data(57);
  LoaderOptions options = batch_of(8);
  options.augment_flip = true;
  options.photo.crop.enabled = true;
  options.photo.jitter = {0.4f, 0.4f, 0.4f};
  options.photo.erasing.probability = 0.5f;
  options.threads = 1;
  Loader one(data, options, cnn::memory::host_resource());
  const std::vector<float> reference = epoch_values(one, 2);
  for (int threads : {2, 3, 8}) {
    options.threads = threads;
    Loader several(data, options, cnn::memory::host_resource());
    CHECK(epoch_values(several, 2) == reference);
    CHECK(several.statistics().samples == 57);
  }
  CHECK(epoch_values(one, 3) != reference);  // another epoch, other draws
}

TEST_CASE("loader: over several threads the error of the first failing sample is reported", "[data][loader]") {
  FakeDataset data(40, 13);
  LoaderOptions options = batch_of(20);
  options.shuffle = false;
  options.threads = 4;
  Loader loader(data, options, cnn::memory::host_resource());
  loader.start_epoch(0);
  CHECK_THROWS_WITH(loader.next(), Catch::Contains("sample13.png"));
}

TEST_CASE("loader: thread counts and photo options out of range are refused", "[data][loader][photo]") {
  FakeDataset data(10);
  LoaderOptions options = batch_of(4);
  options.threads = 0;
  CHECK_THROWS_AS(Loader(data, options, cnn::memory::host_resource()), cnn::ConfigError);
  options.threads = kMaxLoaderThreads + 1;
  CHECK_THROWS_AS(Loader(data, options, cnn::memory::host_resource()), cnn::ConfigError);
  options.threads = 1;
  options.photo.crop.enabled = true;
  options.augment_crop_padding = 1;
  CHECK_THROWS_WITH(Loader(data, options, cnn::memory::host_resource()), Catch::Contains("two crops"));
}
