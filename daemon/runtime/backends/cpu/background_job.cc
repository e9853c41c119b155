#include "daemon/runtime/backends/cpu/background_job.h"

#include <utility>

#include "codec/base/check.h"

namespace df11::runtime {

BackgroundJob::BackgroundJob() : thread_([this] { Loop(); }) {}

BackgroundJob::~BackgroundJob() {
  Wait();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void BackgroundJob::Start(std::function<void()> job) {
  absl::MutexLock lock(&mu_);
  DF11_CHECK(!running_);
  job_ = std::move(job);
  running_ = true;
}

void BackgroundJob::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &BackgroundJob::Idle));
}

bool BackgroundJob::Idle() const { return !running_; }
bool BackgroundJob::HasJobOrStop() const { return stop_ || job_ != nullptr; }

void BackgroundJob::Loop() {
  while (true) {
    std::function<void()> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &BackgroundJob::HasJobOrStop));
      if (job_ == nullptr) return;  // stopping, nothing left to run
      job = std::move(job_);
      job_ = nullptr;
    }
    job();
    absl::MutexLock lock(&mu_);
    running_ = false;
  }
}

}  // namespace df11::runtime
