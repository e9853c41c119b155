// A fixed set of worker threads for data-parallel loops (decoding blocks, encoding units).
//
//   ThreadPool pool(4);                       // the calling thread plus 3 workers
//   pool.ParallelFor(n_blocks, /*grain=*/64, [&](size_t begin, size_t end) { ... });
#ifndef DF11_CODEC_THREAD_POOL_H_
#define DF11_CODEC_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

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
  // ranges are done. Not reentrant: one loop at a time per pool (calls from several threads are
  // serialised).
  void ParallelFor(size_t n, size_t grain, const std::function<void(size_t begin, size_t end)>& fn);

 private:
  void WorkerLoop();
  // Takes ranges of the current loop until none is left.
  void RunRanges(const std::function<void(size_t, size_t)>& fn, size_t n, size_t grain);

  std::vector<std::thread> workers_;
  std::mutex loop_mu_;  // one ParallelFor at a time
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(size_t, size_t)>* fn_ = nullptr;  // guarded by mu_
  size_t n_ = 0;                                             // guarded by mu_
  size_t grain_ = 1;                                         // guarded by mu_
  std::atomic<size_t> next_{0};                              // next range start of the loop
  uint64_t generation_ = 0;                                  // guarded by mu_
  int pending_ = 0;                                          // guarded by mu_
  bool stop_ = false;                                        // guarded by mu_
};

}  // namespace df11::codec

#endif  // DF11_CODEC_THREAD_POOL_H_
