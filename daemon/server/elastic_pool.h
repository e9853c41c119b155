// Threads made as work comes: a task runs on an idle thread, else on a new one while there are
// fewer than the maximum, else waits for one; a thread idle for `idle_exit` ends. A server that
// may run hundreds of handlers at once then holds threads only for the load it has.
//
//   ElasticPool pool(256);
//   pool.Post([] { ... });
//   pool.Join();  // runs what is posted, then ends every thread
#ifndef DF11_DAEMON_SERVER_ELASTIC_POOL_H_
#define DF11_DAEMON_SERVER_ELASTIC_POOL_H_

#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace df11::server {

class ElasticPool {
 public:
  explicit ElasticPool(int max_threads, absl::Duration idle_exit = absl::Seconds(30));
  ~ElasticPool() { Join(); }
  ElasticPool(const ElasticPool&) = delete;
  ElasticPool& operator=(const ElasticPool&) = delete;

  void Post(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for every task posted (before or during the wait), then for every thread to end.
  void Join() ABSL_LOCKS_EXCLUDED(mu_);
  // Threads alive now, and how many of them wait for work.
  int threads() const ABSL_LOCKS_EXCLUDED(mu_);
  int idle() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Work() ABSL_LOCKS_EXCLUDED(mu_);
  // Joins the threads that have ended (they are past their last use of the pool).
  void Reap() ABSL_LOCKS_EXCLUDED(mu_);

  const int max_threads_;
  const absl::Duration idle_exit_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::map<std::thread::id, std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> ended_ ABSL_GUARDED_BY(mu_);
  int alive_ ABSL_GUARDED_BY(mu_) = 0;  // threads not yet ended
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool joining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_ELASTIC_POOL_H_
