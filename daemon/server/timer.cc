#include "daemon/server/timer.h"

#include <algorithm>

namespace df11::server {
namespace {

constexpr absl::Duration kSlice = absl::Milliseconds(100);

std::chrono::steady_clock::duration ToSteady(absl::Duration d) {
  return absl::ToChronoNanoseconds(std::max(d, absl::ZeroDuration()));
}

}  // namespace

Timer::Timer() : thread_([this] { Run(); }) {}

Timer::~Timer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

uint64_t Timer::After(absl::Duration delay, std::function<void()> run) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  const Clock::time_point when = Clock::now() + ToSteady(delay);
  queue_.emplace(Key{when, id}, std::move(run));
  when_.emplace(id, when);
  return id;
}

bool Timer::Reschedule(uint64_t id, absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  auto it = when_.find(id);
  if (it == when_.end()) return false;
  auto node = queue_.extract(Key{it->second, id});
  it->second = Clock::now() + ToSteady(delay);
  node.key() = Key{it->second, id};
  queue_.insert(std::move(node));
  return true;
}

bool Timer::Cancel(uint64_t id) {
  if (id == 0) return false;  // no callback has it
  absl::MutexLock lock(&mu_);
  if (auto it = when_.find(id); it != when_.end()) {
    queue_.erase(Key{it->second, id});
    when_.erase(it);
    return true;
  }
  if (std::this_thread::get_id() != thread_.get_id()) {
    const auto finished = [this, id]() {
      mu_.AssertReaderHeld();
      return running_ != id;
    };
    mu_.Await(absl::Condition(&finished));
  }
  return false;
}

bool Timer::MustWake() const {
  return stop_ || (!queue_.empty() && queue_.begin()->first.first < sleeping_until_);
}

void Timer::Run() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    if (queue_.empty() || queue_.begin()->first.first > Clock::now()) {
      sleeping_until_ = queue_.empty() ? Clock::time_point::max() : queue_.begin()->first.first;
      // Abseil waits against the wall clock: sleeping in slices keeps a step of that clock from
      // delaying what is due on the steady one by more than a slice.
      const absl::Duration sleep =
          queue_.empty() ? absl::InfiniteDuration()
                         : std::min(absl::FromChrono(sleeping_until_ - Clock::now()), kSlice);
      mu_.AwaitWithTimeout(absl::Condition(this, &Timer::MustWake), sleep);
      sleeping_until_ = Clock::time_point::max();
      continue;
    }
    auto node = queue_.extract(queue_.begin());
    const uint64_t id = node.key().second;
    when_.erase(id);
    running_ = id;
    mu_.Unlock();
    node.mapped()();
    node.mapped() = nullptr;  // what it holds goes before Cancel may return
    mu_.Lock();
    running_ = 0;
  }
}

}  // namespace df11::server
