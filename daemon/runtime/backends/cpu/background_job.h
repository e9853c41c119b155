// One job at a time on a thread of its own: the CPU backend decodes the next transformer block
// there while the calling thread computes the current one.
//
//   BackgroundJob job;
//   job.Start([&] { next = model.Layer(l + 1, other_scratch, &decode_pool); });
//   Compute(current);
//   job.Wait();
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CPU_BACKGROUND_JOB_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CPU_BACKGROUND_JOB_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace df11::runtime {

class BackgroundJob {
 public:
  BackgroundJob();
  // Waits for a running job, then stops the thread.
  ~BackgroundJob();
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  // Runs `job` on the background thread. The previous job must have been waited for (checked).
  void Start(std::function<void()> job) ABSL_LOCKS_EXCLUDED(mu_);
  // Returns when the started job has finished (at once if none is running).
  void Wait() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasJobOrStop() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::function<void()> job_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // started and not yet finished
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CPU_BACKGROUND_JOB_H_
