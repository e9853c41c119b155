// A fixed set of worker threads for data-parallel loops (decoding blocks, encoding units).
//
//   ThreadPool pool(4);                       // the calling thread plus 3 workers
//   pool.ParallelFor(n_blocks, /*grain=*/64, [&](size_t begin, size_t end) { ... });
#ifndef DF11_CODEC_THREAD_POOL_H_
#define DF11_CODEC_THREAD_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace df11::codec {

class ThreadPool {
 public:
  // `threads` >= 1 threads take part in each loop, the calling thread among them. 0 means one per
  // hardware thread.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(begin, end) over [0, n) in ranges of `grain` (>= 1) items, in parallel; each thread
  // takes the next range when it finishes one, so a slower core gets less work. Returns when all
  // ranges are done. `fn` must not throw. Not reentrant: one loop at a time per pool (calls from
  // several threads are serialised).
  void ParallelFor(size_t n, size_t grain, const std::function<void(size_t begin, size_t end)>& fn)
      ABSL_LOCKS_EXCLUDED(loop_mu_, mu_);

 private:
  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Takes ranges of the current loop until none is left.
  void RunRanges(const std::function<void(size_t, size_t)>& fn, size_t n, size_t grain);

  std::vector<std::thread> workers_;
  absl::Mutex loop_mu_;  // one ParallelFor at a time
  absl::Mutex mu_;
  const std::function<void(size_t, size_t)>* fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t n_ ABSL_GUARDED_BY(mu_) = 0;
  size_t grain_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by each loop
  int pending_ ABSL_GUARDED_BY(mu_) = 0;          // workers still in the current loop
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<size_t> next_{0};  // start of the next unclaimed range of the current loop
};

}  // namespace df11::codec

#endif  // DF11_CODEC_THREAD_POOL_H_
