// One thread that runs short callbacks at their times: the clock of the gRPC streams that wait
// without a thread of their own (status watches between statuses, Generate streams between
// tokens), and of the stall watchdog. Callbacks run one at a time and must not block.
//
//   Timer timer;
//   uint64_t id = timer.After(absl::Seconds(1), [] { ... });
//   timer.Reschedule(id, absl::ZeroDuration());  // sooner
//   if (timer.Cancel(id)) ...  // it will never run
#ifndef DF11_DAEMON_SERVER_TIMER_H_
#define DF11_DAEMON_SERVER_TIMER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace df11::server {

class Timer {
 public:
  Timer();
  // Drops the callbacks not yet run.
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Runs `run` on the timer's thread `delay` from now (measured on the steady clock, which does
  // not jump with the wall clock); an id for Cancel and Reschedule, never 0.
  uint64_t After(absl::Duration delay, std::function<void()> run) ABSL_LOCKS_EXCLUDED(mu_);
  // Moves a callback not yet run to `delay` from now: false when it has run or is running. Never
  // waits, so it may be called under the caller's own locks.
  bool Reschedule(uint64_t id, absl::Duration delay) ABSL_LOCKS_EXCLUDED(mu_);
  // Removes a callback not yet run: true when it never will run. False when it has run or is
  // running; a running callback has returned by the time Cancel does (unless Cancel is called by
  // the callback itself), so the caller must not hold a lock the callback takes.
  bool Cancel(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Clock = std::chrono::steady_clock;
  using Key = std::pair<Clock::time_point, uint64_t>;  // when, then id: a total order
  void Run();
  // Whether the loop must wake: stopped, or a callback is due earlier than it sleeps until.
  bool MustWake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::map<Key, std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Clock::time_point> when_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t running_ ABSL_GUARDED_BY(mu_) = 0;  // the id of the callback running now, or 0
  Clock::time_point sleeping_until_ ABSL_GUARDED_BY(mu_) = Clock::time_point::max();
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_TIMER_H_
