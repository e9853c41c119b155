#include "daemon/scheduler/scheduler.h"

#include <span>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace df11::scheduler {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// "ok", "cancelled", "invalid_argument", ...: the outcome label of a request.
std::string Outcome(const absl::Status& status) {
  return status.ok() ? "ok" : absl::AsciiStrToLower(absl::StatusCodeToString(status.code()));
}

}  // namespace

Job::Job(registry::ModelHandle model, runtime::GenerationRequest request)
    : model_(std::move(model)), request_(std::move(request)) {}

bool Job::HasUpdate() const { return !pending_.empty() || (done_ && !delivered_done_); }

bool Job::Next(Update* update, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(this, &Job::HasUpdate), timeout)) return false;
  update->tokens = std::move(pending_);
  pending_.clear();
  update->done = done_;
  if (done_) {
    delivered_done_ = true;
    update->status = status_;
    update->finish_reason = result_.finish_reason;
    update->prompt_tokens = result_.prompt_tokens;
    update->completion_tokens = static_cast<int64_t>(result_.token_ids.size());
    const Clock::time_point end = Clock::now();
    JobTimings& t = update->timings;
    t.total = Seconds(arrived_, end);
    if (first_pass_ != Clock::time_point()) t.queue = Seconds(arrived_, first_pass_);
    if (first_token_ != Clock::time_point()) t.first_token = Seconds(arrived_, first_token_);
    if (update->completion_tokens > 1) {
      t.per_token = Seconds(first_token_, last_token_) /
                    static_cast<double>(update->completion_tokens - 1);
    }
  }
  return true;
}

void Job::Cancel(absl::Status why) {
  absl::MutexLock lock(&mu_);
  if (cancel_.ok()) cancel_ = std::move(why);
}

bool Job::cancelled(absl::Status* why) {
  absl::MutexLock lock(&mu_);
  *why = cancel_;
  return !cancel_.ok();
}

void Job::OnUpdate(std::function<void()> notify) {
  absl::MutexLock lock(&notify_mu_);
  notify_ = std::move(notify);
  bool has_update;
  {
    absl::MutexLock state(&mu_);
    has_update = HasUpdate();
  }
  if (notify_ && has_update) notify_();
}

void Job::Notify() {
  absl::MutexLock lock(&notify_mu_);
  if (notify_) notify_();
}

void Job::Publish(const runtime::GeneratedToken& token) {
  {
    absl::MutexLock lock(&mu_);
    pending_.push_back(token);
  }
  Notify();
}

void Job::Finish(absl::Status status, runtime::GenerationResult result) {
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    status_ = std::move(status);
    result_ = std::move(result);
  }
  Notify();
}

Scheduler::Scheduler(const Options& options, runtime::Backend& backend,
                     registry::Registry& registry, metrics::Metrics* metrics)
    : options_(options),
      backend_(backend),
      registry_(registry),
      metrics_(metrics),
      thread_([this] { Loop(); }) {}

Scheduler::~Scheduler() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    work_.SignalAll();
  }
  thread_.join();
  for (auto& [model, work] : work_by_model_) {
    for (const std::shared_ptr<Job>& job : work.running) {
      EndJob(*job, absl::UnavailableError("the daemon is shutting down"));
    }
    for (const std::shared_ptr<Job>& job : work.queued) {
      --job->model_->queued_requests;
      EndJob(*job, absl::UnavailableError("the daemon is shutting down"));
    }
  }
}

absl::StatusOr<std::shared_ptr<Job>> Scheduler::Submit(registry::ModelHandle model,
                                                       runtime::GenerationRequest request) {
  absl::MutexLock lock(&mu_);
  if (stop_) return absl::UnavailableError("the daemon is shutting down");
  const registry::ResidentModel* key = model.get();
  auto [it, inserted] = work_by_model_.try_emplace(key);
  if (inserted) order_.push_back(key);
  if (static_cast<int64_t>(it->second.queued.size()) >= options_.queue_size) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the queue of model ", model->name, " is full: ", it->second.queued.size(),
                     " requests are waiting (limits.queue_size ", options_.queue_size, ")"));
  }
  auto job = std::make_shared<Job>(std::move(model), std::move(request));
  it->second.queued.push_back(job);
  ++job->model_->queued_requests;
  ++queued_;
  work_.Signal();
  return job;
}

int Scheduler::Drain(const registry::ResidentModel* model, absl::Duration drain, bool cancel_now) {
  absl::MutexLock lock(&mu_);
  if (!cancel_now) {
    const absl::Time deadline = absl::Now() + drain;
    while (work_by_model_.contains(model) && !ended_.WaitWithDeadline(&mu_, deadline)) {
    }
  }
  int cancelled = 0;
  if (auto it = work_by_model_.find(model); it != work_by_model_.end()) {
    const absl::Status why = absl::CancelledError(
        absl::StrCat("model ", model->name, " was unloaded before the request finished"));
    for (const std::shared_ptr<Job>& job : it->second.queued) {
      job->Cancel(why);
      ++cancelled;
    }
    for (const std::shared_ptr<Job>& job : it->second.running) {
      job->Cancel(why);
      ++cancelled;
    }
    // The loop ends them at the model's next turn.
    while (work_by_model_.contains(model)) ended_.Wait(&mu_);
  }
  return cancelled;
}

void Scheduler::Loop() {
  while (true) {
    const registry::ResidentModel* model = nullptr;
    ModelWork* work = nullptr;
    std::vector<std::shared_ptr<Job>> admitted;
    {
      absl::MutexLock lock(&mu_);
      while (!stop_ && order_.empty()) work_.Wait(&mu_);
      if (stop_) return;
      model = order_.front();
      order_.pop_front();
      work = &work_by_model_.at(model);
      const int64_t room = std::min<int64_t>(
          options_.max_prefills_per_turn,
          options_.max_running - static_cast<int64_t>(work->running.size()));
      while (!work->queued.empty() && static_cast<int64_t>(admitted.size()) < room) {
        admitted.push_back(std::move(work->queued.front()));
        work->queued.pop_front();
        --model->queued_requests;
        --queued_;
      }
      // Queued requests cancelled while waiting end now, not when their turn comes.
      for (auto it = work->queued.begin(); it != work->queued.end();) {
        absl::Status why;
        if ((*it)->cancelled(&why)) {
          admitted.push_back(std::move(*it));
          it = work->queued.erase(it);
          --model->queued_requests;
          --queued_;
        } else {
          ++it;
        }
      }
    }
    if (last_model_ != nullptr && last_model_ != model && metrics_ != nullptr) {
      metrics_->ModelSwap(registry_.device_name());
    }
    last_model_ = model;
    Turn(*work, std::move(admitted));
    absl::MutexLock lock(&mu_);
    if (work->queued.empty() && work->running.empty()) {
      work_by_model_.erase(model);
      ended_.SignalAll();
    } else {
      order_.push_back(model);
    }
  }
}

void Scheduler::Turn(ModelWork& work, std::vector<std::shared_ptr<Job>> admitted) {
  std::vector<std::shared_ptr<Job>> running = work.running;  // this turn's decode batch
  std::vector<std::shared_ptr<Job>> ended;
  auto end = [&](const std::shared_ptr<Job>& job, absl::Status status) {
    EndJob(*job, std::move(status));
    ended.push_back(job);
  };
  // Cancelled requests end before any work is spent on them.
  std::erase_if(running, [&](const std::shared_ptr<Job>& job) {
    absl::Status why;
    if (!job->cancelled(&why)) return false;
    end(job, why);
    return true;
  });

  // New requests: each prompt in a forward pass of its own.
  std::vector<std::shared_ptr<Job>> started;
  for (std::shared_ptr<Job>& job : admitted) {
    absl::Status why;
    if (job->cancelled(&why)) {
      EndJob(*job, why);
      continue;
    }
    if (!StartJob(*job)) continue;
    const runtime::PlacedModel& model = *job->model_->model;
    const std::span<float> logits = Logits(static_cast<size_t>(model.config().vocab_size));
    runtime::SequenceStep step = job->sequence_->NextStep();
    job->first_pass_ = Clock::now();
    if (absl::Status s = backend_.Forward(model, std::span(&step, 1), logits); !s.ok()) {
      EndJob(*job, s);
      continue;
    }
    const runtime::GeneratedToken token = job->sequence_->Advance(logits);
    job->first_token_ = job->last_token_ = Clock::now();
    job->Publish(token);
    if (job->sequence_->finished()) {
      EndJob(*job, absl::OkStatus());
    } else {
      started.push_back(std::move(job));
    }
  }

  // One decode step for every request that was already running, batched.
  if (!running.empty()) {
    const runtime::PlacedModel& model = *running.front()->model_->model;
    const size_t vocab = static_cast<size_t>(model.config().vocab_size);
    steps_.clear();
    for (const std::shared_ptr<Job>& job : running) steps_.push_back(job->sequence_->NextStep());
    const std::span<float> logits = Logits(steps_.size() * vocab);
    if (absl::Status s = backend_.Forward(model, steps_, logits); !s.ok()) {
      for (const std::shared_ptr<Job>& job : running) end(job, s);
      running.clear();
    }
    for (size_t i = 0; i < running.size(); ++i) {
      Job& job = *running[i];
      const runtime::GeneratedToken token =
          job.sequence_->Advance(logits.subspan(i * vocab, vocab));
      const Clock::time_point now = Clock::now();
      if (metrics_ != nullptr) {
        // Found at the second token: a 1-token request leaves no empty series.
        if (job.time_per_token_ == nullptr) {
          job.time_per_token_ = &metrics_->TimePerToken(job.model_->owner, job.model_->name);
        }
        job.time_per_token_->Observe(Seconds(job.last_token_, now));
      }
      job.last_token_ = now;
      job.Publish(token);
      if (job.sequence_->finished()) end(running[i], absl::OkStatus());
    }
  }

  absl::MutexLock lock(&mu_);
  std::erase_if(work.running, [&](const std::shared_ptr<Job>& job) {
    return std::find(ended.begin(), ended.end(), job) != ended.end();
  });
  for (std::shared_ptr<Job>& job : started) work.running.push_back(std::move(job));
}

std::span<float> Scheduler::Logits(size_t n) {
  if (logits_.size() < n) logits_.resize(n);
  return std::span(logits_).first(n);
}

bool Scheduler::StartJob(Job& job) {
  const registry::ResidentModel& m = *job.model_;
  const uint64_t kv_bytes = backend_.KvBytesPerPosition(m.model->config()) *
                            static_cast<uint64_t>(runtime::Sequence::CachePositions(job.request_));
  absl::Status status = registry_.PlaceKvCache(kv_bytes, [&]() -> absl::Status {
    absl::StatusOr<std::unique_ptr<runtime::Sequence>> sequence =
        runtime::Sequence::Start(backend_, *m.model, *m.tokenizer, std::move(job.request_));
    if (!sequence.ok()) return sequence.status();
    job.sequence_ = *std::move(sequence);
    return absl::OkStatus();
  });
  if (!status.ok()) {
    EndJob(job, status);
    return false;
  }
  job.kv_bytes_ = job.sequence_->kv_bytes();
  m.kv_bytes_in_use += job.kv_bytes_;
  ++m.running_requests;
  ++running_;
  return true;
}

void Scheduler::EndJob(Job& job, absl::Status status) {
  const registry::ResidentModel& m = *job.model_;
  if (status.ok()) {
    // A model file truncated while the request ran: its tokens came from zeros. (A rewrite of the
    // same size is found by the next request's CheckFiles; no system call on this thread.)
    if (const absl::Status files = m.model->CheckReads(); !files.ok()) {
      status = absl::DataLossError(
          absl::StrCat("the model's files changed while the request ran: ", files.message()));
    }
  }
  runtime::GenerationResult result;
  if (job.sequence_ != nullptr) {
    result = job.sequence_->TakeResult();
    job.sequence_.reset();  // frees the KV cache
    m.kv_bytes_in_use -= job.kv_bytes_;
    --m.running_requests;
    --running_;
  }
  ++m.requests_served;
  m.tokens_generated += result.token_ids.size();
  if (metrics_ != nullptr) {
    metrics_->RequestFinished(m.owner, m.name, Outcome(status));
    metrics_->TokensGenerated(m.owner, m.name, result.token_ids.size());
    if (!result.token_ids.empty()) {
      metrics_->TimeToFirstToken(m.owner, m.name, Seconds(job.arrived_, job.first_token_));
    }
  }
  job.Finish(std::move(status), std::move(result));
  absl::MutexLock lock(&mu_);
  ended_.SignalAll();
}

}  // namespace df11::scheduler
