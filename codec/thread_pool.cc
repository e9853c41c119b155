#include "codec/thread_pool.h"

#include <algorithm>

namespace df11::codec {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunRanges(const std::function<void(size_t, size_t)>& fn, size_t n, size_t grain) {
  for (size_t begin; (begin = next_.fetch_add(grain)) < n;) fn(begin, std::min(n, begin + grain));
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t)>* fn;
    size_t n, grain;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this, &seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || generation_ != seen;
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      seen = generation_;
      fn = fn_;
      n = n_;
      grain = grain_;
    }
    RunRanges(*fn, n, grain);
    absl::MutexLock lock(&mu_);
    --pending_;
  }
}

void ThreadPool::ParallelFor(size_t n, size_t grain,
                             const std::function<void(size_t, size_t)>& fn) {
  absl::MutexLock loop_lock(&loop_mu_);
  grain = std::max<size_t>(grain, 1);
  if (workers_.empty() || n <= grain) {
    for (size_t begin = 0; begin < n; begin += grain) fn(begin, std::min(n, begin + grain));
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    fn_ = &fn;
    n_ = n;
    grain_ = grain;
    next_.store(0);
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  RunRanges(fn, n, grain);
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_ == 0; };
  mu_.Await(absl::Condition(&done));
}

}  // namespace df11::codec
