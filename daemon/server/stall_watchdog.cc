#include "daemon/server/stall_watchdog.h"

#include <algorithm>

namespace df11::server {

StallWatchdog::StallWatchdog(absl::Duration stall) : stall_(stall), thread_([this] { Run(); }) {}

StallWatchdog::~StallWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

uint64_t StallWatchdog::Watch(grpc::ServerContext* context) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  writes_.emplace(id, Entry{.context = context, .since = std::chrono::steady_clock::now()});
  return id;
}

bool StallWatchdog::Unwatch(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = writes_.find(id);
  const bool fired = it->second.fired;
  writes_.erase(it);
  return fired;
}

void StallWatchdog::Run() {
  // A stall is noticed within a tenth of its length (at most a second) after it ends.
  const absl::Duration poll = std::clamp(stall_ / 10, absl::Milliseconds(10), absl::Seconds(1));
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), poll)) {
    const auto now = std::chrono::steady_clock::now();
    for (auto& [id, e] : writes_) {
      if (e.fired || absl::FromChrono(now - e.since) < stall_) continue;
      // The entry, and so the context, lives until Unwatch, which waits for this lock.
      e.context->TryCancel();
      e.fired = true;
    }
  }
}

}  // namespace df11::server
