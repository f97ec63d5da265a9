#include "data/detail/worker_pool.hpp"

namespace cnn::data {

WorkerPool::WorkerPool(int threads) {
  try {
    for (int t = 1; t < threads; ++t) helpers_.emplace_back([this, t] { helper(t); });
  } catch (...) {
    stop_and_join();  // the helpers started
    throw;
  }
}

WorkerPool::~WorkerPool() { stop_and_join(); }

void WorkerPool::stop_and_join() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : helpers_)
    if (t.joinable()) t.join();
}

void WorkerPool::work(int thread) {
  for (;;) {
    std::size_t i;
    {
      std::lock_guard lock(mutex_);
      // Past a failure, only lower indices are worth running: their error would win.
      if (next_ >= n_ || (failure_ && next_ > failed_index_)) return;
      i = next_++;
    }
    try {
      call_(fn_, i, thread);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failure_ || i < failed_index_) {
        failure_ = std::current_exception();
        failed_index_ = i;
      }
    }
  }
}

void WorkerPool::helper(int thread) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stop_ || job_ != seen; });
      if (stop_) return;
      seen = job_;
    }
    work(thread);
    {
      std::lock_guard lock(mutex_);
      --busy_;
    }
    done_.notify_all();
  }
}

void WorkerPool::run_erased(std::size_t n, void* fn, Call call) {
  {
    std::lock_guard lock(mutex_);
    n_ = n;
    next_ = 0;
    fn_ = fn;
    call_ = call;
    failure_ = nullptr;
    failed_index_ = 0;
    busy_ = static_cast<int>(helpers_.size());
    ++job_;
  }
  start_.notify_all();
  work(0);
  std::exception_ptr failure;
  {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return busy_ == 0; });
    failure = failure_;
    failure_ = nullptr;
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace cnn::data

