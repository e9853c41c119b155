#include "daemon/server/elastic_pool.h"

#include <utility>

namespace df11::server {

ElasticPool::ElasticPool(int max_threads, absl::Duration idle_exit)
    : max_threads_(max_threads), idle_exit_(idle_exit) {}

void ElasticPool::Post(std::function<void()> task) {
  Reap();
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
  // An idle thread takes it; else a new thread does, up to the maximum.
  if (idle_ >= static_cast<int>(tasks_.size()) || alive_ >= max_threads_) return;
  ++alive_;
  std::thread t([this] { Work(); });
  threads_.emplace(t.get_id(), std::move(t));
}

void ElasticPool::Work() {
  absl::MutexLock lock(&mu_);
  while (true) {
    ++idle_;
    const auto ready = [this] {
      mu_.AssertReaderHeld();
      return !tasks_.empty() || joining_;
    };
    const bool woken = mu_.AwaitWithTimeout(absl::Condition(&ready), idle_exit_);
    --idle_;
    if (tasks_.empty() && (joining_ || !woken)) {
      ended_.push_back(std::this_thread::get_id());
      --alive_;
      return;
    }
    if (tasks_.empty()) continue;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    task();
    task = nullptr;  // what it holds goes on this thread
    mu_.Lock();
  }
}

void ElasticPool::Reap() {
  std::vector<std::thread> ended;
  {
    absl::MutexLock lock(&mu_);
    for (const std::thread::id id : ended_) {
      auto it = threads_.find(id);
      if (it == threads_.end()) continue;
      ended.push_back(std::move(it->second));
      threads_.erase(it);
    }
    ended_.clear();
  }
  for (std::thread& t : ended) t.join();
}

void ElasticPool::Join() {
  absl::MutexLock lock(&mu_);
  joining_ = true;
  // Tasks posted meanwhile may make threads of their own: joined in the next round.
  while (!threads_.empty()) {
    std::map<std::thread::id, std::thread> round;
    round.swap(threads_);
    mu_.Unlock();
    for (auto& [id, t] : round) t.join();
    mu_.Lock();
    std::erase_if(ended_, [&](std::thread::id id) { return round.contains(id); });
  }
  joining_ = false;  // the pool may be used again
}

int ElasticPool::idle() const {
  absl::MutexLock lock(&mu_);
  return idle_;
}

int ElasticPool::threads() const {
  absl::MutexLock lock(&mu_);
  return alive_;
}

}  // namespace df11::server
