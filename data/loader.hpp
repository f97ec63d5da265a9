#pragma once
// Batches from a data set: shuffled by (seed, epoch), augmented, normalised, and decoded by a
// background thread (with LoaderOptions::threads - 1 helpers) into a ring of staging slots ahead
// of the consumer. Each slot holds the samples' images and their labels (classification) or
// targets (the other tasks, base/task.hpp).
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <cnnengine/base/batch.hpp>
#include <cnnengine/data/augmentation.hpp>
#include <cnnengine/data/dataset.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {
class MemoryStack;
}

namespace cnn::data {

class WorkerPool;

// Threads a loader may decode on, beyond which a count is a typo.
inline constexpr int kMaxLoaderThreads = 64;

struct LoaderOptions {
  // The trainer's batch (TrainerOptions::batch): a trainer refuses, at its first step, a batch cut
  // at another size. The last batch of an epoch is smaller where `batch` does not divide the data
  // set and drop_last is off (Batch::last_of_epoch).
  int batch = 64;
  bool shuffle = true;
  std::uint64_t seed = 1;
  bool drop_last = false;
  int prefetch = 2;  // batches decoded ahead of the one in use (0: none)
  bool augment_flip = false;
  // Random crops of each image padded by this many pixels (at most the image's shorter side); a
  // mask moves with its image, padded with kIgnoreMask.
  int augment_crop_padding = 0;
  Normalization normalization;  // per channel, after augmentation (data/dataset.hpp)
  // Photos (data/augmentation.hpp): the random resized crop (in place of augment_crop_padding, and
  // not for segmentation), colour jitter, random erasing. With the crop, augment_flip mirrors the
  // window as it is resized.
  PhotoAugmentation photo;
  // The threads that load a batch's samples, the loader's own thread among them (1 to
  // kMaxLoaderThreads). The samples and their augmentations do not depend on it.
  int threads = 1;
  // Data-parallel training: this process is rank `rank` of `ranks`, and loads only its share of
  // each batch (share_of_batch, base/batch.hpp). The batches are the whole run's all the same.
  // The trainer's communicator's rank and ranks: a trainer refuses a share that is not its rank's.
  int rank = 0;
  int ranks = 1;
};

// "random resized crop (...), horizontal flips, random crops (padding 4)": what a loader with
// these options does to its samples before normalising them; "none".
std::string describe_augmentation(const LoaderOptions& options);

// What a loader has done since it was built: the samples it loaded and the wall time its threads
// spent filling batches (not waiting for a free slot).
struct LoaderStatistics {
  std::uint64_t samples = 0;
  double busy_seconds = 0;
  double samples_per_second() const { return busy_seconds > 0 ? static_cast<double>(samples) / busy_seconds : 0; }
};

class Loader {
 public:
  // Allocates the staging ring (prefetch + 1 slots) from `staging`, as Category::data_staging,
  // once; it must be memory the host can write: a MemoryStack's staging() counts it in the
  // budget. Throws ConfigError on bad options, memory::OutOfMemory when `staging` refuses.
  Loader(const Dataset& data, LoaderOptions options, memory::MemoryResource& staging);
  // The same from `stack`'s staging(), under its budget: it takes the room booked for it
  // (book), or is counted by the plan of a trainer built on the stack after it. Built after
  // such a trainer with no room booked, it is refused (memory::OutOfMemory in data_staging).
  Loader(const Dataset& data, LoaderOptions options, memory::MemoryStack& stack);
  // Joins the thread (after at most the load() in progress), even mid-epoch or after an error.
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Starts (or restarts) an epoch: its order comes from (seed, epoch) alone. From `first_batch`
  // on (a resumed run), the batches before it neither decoded nor returned; more than the epoch
  // has is a ConfigError.
  void start_epoch(int epoch, std::size_t first_batch = 0);
  // The next batch of the epoch, blocking until it is ready; nullopt at the end of the epoch. It is
  // the trainer's as it is (train_step(*batch)): this rank's share (first, global_size: the whole
  // batch's size, with one rank too), its index in the epoch, whether it is the epoch's last.
  // Its images and labels (or targets) are valid until the next call to next() or start_epoch().
  // An exception from the data set is rethrown here, after the batches before it, and again on
  // every later call until start_epoch(). Called before any start_epoch(), it starts epoch 0.
  std::optional<Batch> next();

  std::size_t batches_per_epoch() const { return batches_; }
  LoaderStatistics statistics() const;
  std::size_t staging_bytes() const { return block_bytes_; }
  // What a loader of `data` with `options` will stage, before it is built. Throws as the
  // constructor does on bad options.
  static std::size_t staging_bytes_for(const Dataset& data, const LoaderOptions& options);
  // Books room in `stack`'s budget for a loader of `data` with `options` built later on it,
  // after a trainer on the stack has planned (which leaves the room); returns the bytes.
  static std::size_t book(memory::MemoryStack& stack, const Dataset& data, const LoaderOptions& options);
  // batches_per_epoch() of a loader of `data` with `options`, before it is built.
  static std::size_t batches_per_epoch_for(const Dataset& data, const LoaderOptions& options);

 private:
  struct Slot {
    float* images;  // the slot's memory, which the worker writes
    std::int32_t* labels;    // classification; else null
    unsigned char* targets;  // the other tasks, target_bytes_ a sample; else null
    Batch batch;  // what next() gives: the same memory, and the samples the worker put there
  };
  // A loading thread's room to augment a sample in.
  struct Scratch {
    std::vector<float> image;
    std::vector<std::uint8_t> mask;
  };

  void begin_epoch_locked(int epoch, std::size_t first_batch);
  void run();
  bool may_produce_locked(std::uint64_t generation, std::size_t batch) const;
  bool fill(Slot& slot, std::size_t batch, const std::vector<std::size_t>& order, int epoch,
            std::uint64_t generation);
  // Loads sample `index` (of the epoch) into place k of the slot, augmented and normalised.
  void load_sample(Slot& slot, std::size_t k, std::size_t index, int epoch, Scratch& scratch) const;
  // A DataError unless the target is one the task's loss can take (a mask's classes in range).
  void check_target(std::size_t index, const unsigned char* target) const;

  const Dataset& data_;
  const LoaderOptions options_;
  memory::MemoryResource& staging_;
  const SampleShape shape_;
  const Task task_;
  const int num_classes_;
  const std::size_t target_bytes_;  // a sample's, for a task other than classification
  const std::size_t samples_;
  const std::size_t batches_;
  std::size_t block_bytes_ = 0;
  void* block_ = nullptr;
  std::vector<Slot> slots_;
  std::unique_ptr<WorkerPool> pool_;
  std::vector<Scratch> scratch_;  // one a loading thread
  std::atomic<std::uint64_t> samples_loaded_{0}, busy_nanoseconds_{0};

  // Shared with the worker, under mutex_. Whoever changes them notifies changed_.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t generation_ = 0;  // one per start_epoch(); 0: none yet
  int epoch_ = 0;
  std::size_t first_batch_ = 0;  // of this generation
  std::size_t produced_ = 0;  // batches of this generation ready in their slots
  std::size_t consumed_ = 0;  // batches of this generation the consumer is done with
  bool holding_ = false;      // the consumer holds batch consumed_
  std::exception_ptr error_;  // stops this generation after produced_ batches
  bool stop_ = false;
  // Mirrors of generation_ and stop_ that the worker polls between samples without the lock.
  std::atomic<std::uint64_t> live_generation_{0};
  std::atomic<bool> stopping_{false};

  std::thread worker_;
};

}  // namespace cnn::data
