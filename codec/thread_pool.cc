#include "codec/thread_pool.h"

#include <algorithm>
#include <utility>

namespace df11::codec {
namespace {

// Range `part` of `parts` near-equal ranges of [0, n).
std::pair<size_t, size_t> Range(size_t n, int parts, int part) {
  return {n * part / parts, n * (part + 1) / parts};
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t)>* fn;
    size_t n;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = fn_;
      n = n_;
    }
    auto [begin, end] = Range(n, size(), index);
    if (begin < end) (*fn)(begin, end);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t, size_t)>& fn) {
  std::lock_guard<std::mutex> loop_lock(loop_mu_);
  if (workers_.empty() || n < 2) {
    if (n > 0) fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  auto [begin, end] = Range(n, size(), 0);
  if (begin < end) fn(begin, end);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
}

}  // namespace df11::codec
