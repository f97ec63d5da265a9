#include <cnnengine/data/loader.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <string>

#include <cnnengine/base/batch.hpp>
#include "data/data_error.hpp"
#include "data/detail/augment.hpp"
#include "data/detail/photo_augment.hpp"
#include "data/detail/random.hpp"
#include "data/detail/worker_pool.hpp"
#include "memory/buffer.hpp"
#include <cnnengine/memory/memory_resource.hpp>
#include <cnnengine/memory/memory_stack.hpp>

namespace cnn::data {
namespace {

constexpr std::uint64_t kAugmentStream = 0xA116'0000'0000'0001ull;
constexpr std::uint64_t kPhotoStream = 0xA116'0000'0000'0002ull;

std::size_t count_batches(std::size_t samples, const LoaderOptions& options) {
  if (options.batch <= 0) throw ConfigError("Loader: batch must be positive, got " + std::to_string(options.batch));
  const auto batch = static_cast<std::size_t>(options.batch);
  return options.drop_last ? samples / batch : (samples + batch - 1) / batch;
}

void validate(const LoaderOptions& options, const SampleShape& shape) {
  if (options.batch <= 0) throw ConfigError("Loader: batch must be positive, got " + std::to_string(options.batch));
  if (options.ranks < 1 || options.rank < 0 || options.rank >= options.ranks)
    throw ConfigError("Loader: rank " + std::to_string(options.rank) + " of " + std::to_string(options.ranks));
  if (options.prefetch < 0)
    throw ConfigError("Loader: prefetch must be 0 or more, got " + std::to_string(options.prefetch));
  if (options.augment_crop_padding < 0)
    throw ConfigError("Loader: augment_crop_padding must be 0 or more, got " +
                      std::to_string(options.augment_crop_padding));
  // A crop shifted by more than the image's side may hold none of it.
  if (options.augment_crop_padding > std::min(shape.height, shape.width))
    throw ConfigError("Loader: augment_crop_padding of " + std::to_string(options.augment_crop_padding) +
                      " is more than the " + to_string(shape) + " images' side: a crop could hold none of the image");
  check_normalization(options.normalization, shape.channels);
  if (options.threads < 1 || options.threads > kMaxLoaderThreads)
    throw ConfigError("Loader: threads must be 1 to " + std::to_string(kMaxLoaderThreads) + ", got " +
                      std::to_string(options.threads));
  check_photo_augmentation(options.photo);
  if (options.photo.crop.enabled && options.augment_crop_padding > 0)
    throw ConfigError("Loader: the random resized crop and augment_crop_padding are two crops: give one");
}

// The random resized crop takes a window of the image alone; a segmentation's mask would have to
// move with it.
void validate_photo_task(const LoaderOptions& options, Task task) {
  if (options.photo.crop.enabled && task == Task::segment)
    throw ConfigError("Loader: the random resized crop is for classification, multi-label and regression data; a "
                      "segmentation's masks are not cropped with their images (use augment_crop_padding)");
}

// A data set of a task other than classification must be one the losses can take: a
// segmentation's classes fit in a mask's byte, and every task has at least one output.
void validate_task(const Dataset& data) {
  const Task task = data.task();
  if (task == Task::classify) return;
  const int outputs = data.num_classes();
  if (outputs < 1 || (task == Task::segment && outputs > kMaxSegmentationClasses))
    throw ConfigError("Loader: " + data.description() + ": " + std::to_string(outputs) +
                      (task == Task::segment ? " classes, expected 1 to " + std::to_string(kMaxSegmentationClasses)
                                             : " outputs, expected at least 1"));
}

// The staging ring: prefetch + 1 slots, each one rank's share of a batch (at most the batch over
// the ranks, rounded up) of images, and of labels (classification) or targets (other tasks).
struct Ring {
  std::size_t image_bytes = 0, label_bytes = 0, target_bytes = 0, slots = 0;
  std::size_t slot_bytes() const { return image_bytes + label_bytes + target_bytes; }
  std::size_t bytes() const { return slots * slot_bytes(); }
};

Ring ring_for(const Dataset& data, const LoaderOptions& options) {
  const SampleShape shape = data.shape();
  const auto batch = static_cast<std::size_t>((options.batch + options.ranks - 1) / options.ranks);
  Ring ring;
  ring.slots = static_cast<std::size_t>(options.prefetch) + 1;
  std::size_t batch_image_bytes = 0, batch_target_bytes = 0, ring_bytes = 0;
  if (__builtin_mul_overflow(batch, shape.elements() * sizeof(float), &batch_image_bytes) ||
      batch_image_bytes > (std::size_t{1} << 60) ||
      __builtin_mul_overflow(batch, data.target_bytes(), &batch_target_bytes) ||
      batch_target_bytes > (std::size_t{1} << 60))
    throw ConfigError("Loader: batch " + std::to_string(batch) + " of " + to_string(shape) + " is too large");
  ring.image_bytes = memory::align_up(batch_image_bytes, memory::kDefaultAlignment);
  if (data.task() == Task::classify)
    ring.label_bytes = memory::align_up(batch * sizeof(std::int32_t), memory::kDefaultAlignment);
  else
    ring.target_bytes = memory::align_up(batch_target_bytes, memory::kDefaultAlignment);
  if (__builtin_mul_overflow(ring.slots, ring.slot_bytes(), &ring_bytes))
    throw ConfigError("Loader: " + std::to_string(ring.slots) + " staging slots of " + std::to_string(ring.slot_bytes()) +
                      " bytes do not fit in memory (prefetch " + std::to_string(options.prefetch) + ")");
  return ring;
}

}  // namespace

std::string describe_augmentation(const LoaderOptions& options) {
  std::string text = describe(options.photo);
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (options.augment_flip) add("horizontal flips");
  if (options.augment_crop_padding > 0)
    add("random crops (padding " + std::to_string(options.augment_crop_padding) + ")");
  return text.empty() ? "none" : text;
}

std::size_t Loader::staging_bytes_for(const Dataset& data, const LoaderOptions& options) {
  validate(options, data.shape());
  validate_task(data);
  validate_photo_task(options, data.task());
  return ring_for(data, options).bytes();
}

std::size_t Loader::book(memory::MemoryStack& stack, const Dataset& data, const LoaderOptions& options) {
  const std::size_t bytes = staging_bytes_for(data, options);
  stack.book_staging(bytes);
  return bytes;
}

Loader::Loader(const Dataset& data, LoaderOptions options, memory::MemoryStack& stack)
    : Loader(data, options, stack.staging()) {
  stack.claim_booking(block_bytes_);
}

std::size_t Loader::batches_per_epoch_for(const Dataset& data, const LoaderOptions& options) {
  return count_batches(data.size(), options);
}

Loader::Loader(const Dataset& data, LoaderOptions options, memory::MemoryResource& staging)
    : data_(data),
      options_(options),
      staging_(staging),
      shape_(data.shape()),
      task_(data.task()),
      num_classes_(data.num_classes()),
      target_bytes_(data.target_bytes()),
      samples_(data.size()),
      batches_(count_batches(samples_, options)) {
  validate(options_, shape_);
  validate_task(data_);
  validate_photo_task(options_, task_);
  if (staging_.is_device_memory())
    throw ConfigError("Loader: staging resource '" + staging_.name() + "' is device memory; the loader writes from the host");
  const Ring ring = ring_for(data_, options_);
  block_bytes_ = ring.bytes();
  // The block first: a ring larger than the staging resource allows is refused before anything
  // else grows with the slot count.
  block_ = staging_.allocate(block_bytes_, memory::kDefaultAlignment, memory::Category::data_staging);
  try {
    slots_.reserve(ring.slots);
    auto* base = static_cast<unsigned char*>(block_);
    for (std::size_t s = 0; s < ring.slots; ++s) {
      unsigned char* slot = base + s * ring.slot_bytes();
      auto* images = reinterpret_cast<float*>(slot);
      auto* labels = ring.label_bytes ? reinterpret_cast<std::int32_t*>(slot + ring.image_bytes) : nullptr;
      unsigned char* targets = ring.target_bytes ? slot + ring.image_bytes + ring.label_bytes : nullptr;
      Batch batch;
      batch.images = images;
      batch.labels = labels;
      batch.targets = targets;
      batch.channels = shape_.channels;
      batch.height = shape_.height;
      batch.width = shape_.width;
      batch.target_bytes = task_ == Task::classify ? 0 : target_bytes_;
      slots_.push_back({images, labels, targets, batch});
    }
    scratch_.resize(static_cast<std::size_t>(options_.threads));
    for (Scratch& s : scratch_) {
      s.image.resize(shape_.elements());
      if (task_ == Task::segment) s.mask.resize(target_bytes_);
    }
    pool_ = std::make_unique<WorkerPool>(options_.threads);
    worker_ = std::thread([this] { run(); });
  } catch (...) {
    memory::give_back(staging_, block_, block_bytes_, memory::kDefaultAlignment, memory::Category::data_staging);
    throw;
  }
}

Loader::~Loader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
  pool_.reset();
  memory::give_back(staging_, block_, block_bytes_, memory::kDefaultAlignment, memory::Category::data_staging);
}

void Loader::begin_epoch_locked(int epoch, std::size_t first_batch) {
  ++generation_;
  live_generation_ = generation_;
  epoch_ = epoch;
  first_batch_ = first_batch;
  produced_ = consumed_ = first_batch;
  holding_ = false;
  error_ = nullptr;
  changed_.notify_all();
}

void Loader::start_epoch(int epoch, std::size_t first_batch) {
  if (epoch < 0) throw ConfigError("Loader: epoch " + std::to_string(epoch));
  if (first_batch > batches_)
    throw ConfigError("Loader: batch " + std::to_string(first_batch) + " of an epoch of " + std::to_string(batches_));
  std::lock_guard lock(mutex_);
  begin_epoch_locked(epoch, first_batch);
}

std::optional<Batch> Loader::next() {
  std::unique_lock lock(mutex_);
  if (generation_ == 0) begin_epoch_locked(0, 0);
  if (holding_) {
    holding_ = false;
    ++consumed_;
    changed_.notify_all();  // its slot is free again
  }
  if (consumed_ >= batches_) return std::nullopt;
  changed_.wait(lock, [&] { return produced_ > consumed_ || error_; });
  if (produced_ <= consumed_) std::rethrow_exception(error_);
  holding_ = true;
  return slots_[consumed_ % slots_.size()].batch;
}

bool Loader::may_produce_locked(std::uint64_t generation, std::size_t batch) const {
  // Slots of batches consumed_ .. batch-1 are in use (held or ready); batch's slot must not be one.
  return generation == generation_ && generation != 0 && !error_ && batch < batches_ &&
         batch < consumed_ + slots_.size();
}

LoaderStatistics Loader::statistics() const {
  return {samples_loaded_.load(), static_cast<double>(busy_nanoseconds_.load()) * 1e-9};
}

void Loader::run() {
  std::vector<std::size_t> order;
  std::uint64_t generation = 0;
  int epoch = 0;
  std::size_t batch = 0;
  bool have_order = false;

  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || generation != generation_ || may_produce_locked(generation, batch); });
    if (stop_) return;
    if (generation != generation_) {
      generation = generation_;
      epoch = epoch_;
      batch = first_batch_;
      have_order = false;
      continue;
    }
    lock.unlock();
    std::exception_ptr failure;
    bool complete = false;
    Slot& slot = slots_[batch % slots_.size()];
    try {
      if (!have_order) {
        if (options_.shuffle) {
          order = permutation(samples_, hash_values(options_.seed, static_cast<std::uint64_t>(epoch)));
        } else {
          order.resize(samples_);
          std::iota(order.begin(), order.end(), std::size_t{0});
        }
        have_order = true;
      }
      complete = fill(slot, batch, order, epoch, generation);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    if (stop_ || generation != generation_) continue;  // abandoned: a new epoch or shutdown
    if (failure) {
      error_ = failure;
    } else if (complete) {
      ++produced_;
      ++batch;
    }
    changed_.notify_all();
  }
}

void Loader::check_target(std::size_t index, const unsigned char* target) const {
  auto refuse = [&](const std::string& what) {
    throw DataError(data_.description() + ": sample " + std::to_string(index) + "'s target " + what);
  };
  if (task_ == Task::segment) {
    // A class outside the classes would index past the end of the loss's rows.
    for (std::size_t p = 0; p < target_bytes_; ++p)
      if (target[p] >= num_classes_ && target[p] != kIgnoreMask)
        refuse("holds the value " + std::to_string(target[p]) + " at pixel " + std::to_string(p) + ", expected 0.." +
               std::to_string(num_classes_ - 1) + " or " + std::to_string(kIgnoreMask) + " (ignored)");
    return;
  }
  const auto* values = reinterpret_cast<const float*>(target);
  for (int k = 0; k < num_classes_; ++k) {
    const float v = values[k];
    if (std::isfinite(v) && (task_ != Task::multilabel || v == 0.0f || v == 1.0f)) continue;
    char text[32];
    std::snprintf(text, sizeof text, "%g", static_cast<double>(v));
    refuse("holds " + std::string(text) + " for its output " + std::to_string(k) + ", expected " +
           (task_ == Task::multilabel ? "0 or 1" : "a finite number"));
  }
}

bool Loader::fill(Slot& slot, std::size_t batch, const std::vector<std::size_t>& order, int epoch,
                  std::uint64_t generation) {
  const std::size_t start = batch * static_cast<std::size_t>(options_.batch);
  const std::size_t whole = std::min(static_cast<std::size_t>(options_.batch), samples_ - start);
  const RankShare share = share_of_batch(static_cast<int>(whole), options_.rank, options_.ranks);
  const std::size_t first = start + static_cast<std::size_t>(share.first);
  const auto count = static_cast<std::size_t>(share.size);
  std::atomic<bool> abandoned{false};
  auto load_one = [&](std::size_t k, int thread) {
    if (abandoned.load(std::memory_order_relaxed)) return;
    if (stopping_ || live_generation_ != generation) {
      abandoned = true;
      return;
    }
    load_sample(slot, k, order[first + k], epoch, scratch_[static_cast<std::size_t>(thread)]);
  };
  const auto began = std::chrono::steady_clock::now();
  pool_->run(count, load_one);
  const auto spent = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - began);
  busy_nanoseconds_ += static_cast<std::uint64_t>(spent.count());
  if (abandoned) return false;
  samples_loaded_ += count;
  slot.batch.size = static_cast<int>(count);
  slot.batch.first = share.first;
  slot.batch.global_size = static_cast<int>(whole);
  slot.batch.index = batch;
  slot.batch.last_of_epoch = batch + 1 == batches_;
  return true;
}

void Loader::load_sample(Slot& slot, std::size_t k, std::size_t index, int epoch, Scratch& scratch) const {
  float* image = slot.images + k * shape_.elements();
  const PhotoAugmentation& photo = options_.photo;
  // Every photo draw of the sample from one generator of its own key: the draws do not depend on
  // which thread loads it, or when.
  SplitMix64 rng(hash_values(options_.seed, static_cast<std::uint64_t>(epoch), index, kPhotoStream));
  int label = 0;
  if (photo.crop.enabled) {
    const bool mirror = options_.augment_flip && (rng.next() & 1);
    const RandomWindow window(rng.next(), photo.crop);
    label = data_.load_window(index, window, mirror, image, scratch.image.data());
  } else {
    label = data_.load(index, image);
  }
  unsigned char* target = nullptr;
  if (task_ == Task::classify) {
    // A label outside the classes would index past the end of the loss layer's rows.
    if (label < 0 || label >= num_classes_) {
      throw DataError(data_.description() + ": sample " + std::to_string(index) + " has label " +
                      std::to_string(label) + ", expected 0.." + std::to_string(num_classes_ - 1));
    }
    slot.labels[k] = label;
  } else {
    target = slot.targets + k * target_bytes_;
    data_.load_target(index, target);
    check_target(index, target);
  }
  if (!photo.crop.enabled && (options_.augment_flip || options_.augment_crop_padding > 0)) {
    std::uint64_t key = hash_values(options_.seed, static_cast<std::uint64_t>(epoch), index, kAugmentStream);
    const AugmentChoice choice = choose_augment(key, options_.augment_flip, options_.augment_crop_padding);
    apply_augment(image, shape_, choice, scratch.image.data());
    // A mask moves with its image; the other tasks' targets do not depend on where things are.
    if (task_ == Task::segment) apply_augment_mask(target, shape_.height, shape_.width, choice, scratch.mask.data());
  }
  if (photo.jitter.enabled()) color_jitter(rng, photo.jitter, image, shape_);
  normalize(image, shape_, options_.normalization);
  if (photo.erasing.probability > 0) random_erasing(rng, photo.erasing, image, shape_);
}

}  // namespace cnn::data
