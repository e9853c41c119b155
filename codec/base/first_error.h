// The first failure of work spread over threads: each worker reports its status, the first error
// is kept and later ones dropped, so the caller returns what went wrong first.
//
//   base::FirstError errors;
//   pool.ParallelFor(n, grain, [&](size_t begin, size_t end) { errors.Add(Work(begin, end)); });
//   DF11_RETURN_IF_ERROR(errors.status());
#ifndef DF11_CODEC_BASE_FIRST_ERROR_H_
#define DF11_CODEC_BASE_FIRST_ERROR_H_

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace df11::base {

class FirstError {
 public:
  // Keeps `s` when it is an error and none came before it.
  void Add(absl::Status s) ABSL_LOCKS_EXCLUDED(mu_) {
    if (s.ok()) return;
    absl::MutexLock lock(&mu_);
    if (first_.ok()) first_ = std::move(s);
  }
  // Whether an error was kept: workers stop early on it.
  bool failed() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return !first_.ok();
  }
  absl::Status status() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return first_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Status first_ ABSL_GUARDED_BY(mu_);
};

}  // namespace df11::base

#endif  // DF11_CODEC_BASE_FIRST_ERROR_H_
