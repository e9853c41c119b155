// The engine loop of one device: Generate requests for many models queue here, and one thread
// runs the backend's forward passes for them.
//
// Each turn serves one model: new requests of that model are prefilled (each alone, as
// `df11 generate` does, so the tokens are the same), then one decode step runs for all of its
// running requests in a single batched forward pass. Models with work take turns in round-robin
// order, so a busy model never starves another. A swap between models moves no weights: the
// next turn simply decodes the other model's blocks.
//
//   Scheduler scheduler(options, backend, registry, &metrics);
//   DF11_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, scheduler.Submit(handle, request));
//   Job::Update update;
//   while (job->Next(&update, absl::Milliseconds(100))) {
//     Send(update.tokens);
//     if (update.done) break;
//   }
#ifndef DF11_DAEMON_SCHEDULER_SCHEDULER_H_
#define DF11_DAEMON_SCHEDULER_SCHEDULER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/metrics/metrics.h"
#include "daemon/registry/registry.h"
#include "daemon/runtime/engine/backend.h"
#include "daemon/runtime/engine/generator.h"

namespace df11::scheduler {

// Times of one request, in seconds.
struct JobTimings {
  double queue = 0;          // arrival to its first forward pass
  double first_token = 0;    // arrival to its first token
  double per_token = 0;      // mean time between tokens after the first
  double total = 0;          // arrival to the end
};

// One Generate request, shared by the caller that waits for its tokens and the engine loop.
class Job {
 public:
  // What happened since the last Next().
  struct Update {
    std::vector<runtime::GeneratedToken> tokens;
    bool done = false;
    absl::Status status;  // when done
    runtime::FinishReason finish_reason = runtime::FinishReason::kNone;
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
    JobTimings timings;
  };

  Job(registry::ModelHandle model, runtime::GenerationRequest request);

  // Waits up to `timeout` for new tokens or the end; false when nothing happened in that time.
  bool Next(Update* update, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the request: it ends with `why` (kCancelled) before its next step.
  void Cancel(absl::Status why) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls `notify` whenever Next has something new: at once when it has already, else from the
  // engine's thread, so `notify` must not block. A caller that waits for no thread (a gRPC
  // callback stream) uses it instead of a blocking Next. Null stops the calls: once that returns,
  // none is running.
  void OnUpdate(std::function<void()> notify) ABSL_LOCKS_EXCLUDED(notify_mu_, mu_);

  const registry::ResidentModel& model() const { return *model_; }

 private:
  friend class Scheduler;
  // Engine side.
  void Publish(const runtime::GeneratedToken& token) ABSL_LOCKS_EXCLUDED(mu_);
  void Finish(absl::Status status, runtime::GenerationResult result) ABSL_LOCKS_EXCLUDED(mu_);
  bool cancelled(absl::Status* why) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls the OnUpdate listener, if any.
  void Notify() ABSL_LOCKS_EXCLUDED(notify_mu_);
  // Whether Next has something to deliver.
  bool HasUpdate() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const registry::ModelHandle model_;
  const std::chrono::steady_clock::time_point arrived_ = std::chrono::steady_clock::now();
  // Engine thread only; Next reads the times after Finish, which orders them before it.
  runtime::GenerationRequest request_;
  std::chrono::steady_clock::time_point first_pass_, first_token_, last_token_;
  prometheus::Histogram* time_per_token_ = nullptr;  // with metrics, from the second token on
  std::unique_ptr<runtime::Sequence> sequence_;  // from its first turn on
  uint64_t kv_bytes_ = 0;

  // Taken before mu_ (OnUpdate), never while holding it.
  absl::Mutex notify_mu_;
  std::function<void()> notify_ ABSL_GUARDED_BY(notify_mu_);
  mutable absl::Mutex mu_;
  std::vector<runtime::GeneratedToken> pending_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool delivered_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  absl::Status cancel_ ABSL_GUARDED_BY(mu_);  // not OK once cancelled
  runtime::GenerationResult result_ ABSL_GUARDED_BY(mu_);
};

class Scheduler {
 public:
  struct Options {
    int64_t queue_size = 256;          // waiting requests per model
    int64_t max_running = 64;          // running requests per model, batched together
    int64_t max_prefills_per_turn = 4;  // keeps turns short when many requests arrive at once
  };
  // `backend`, `registry` and `metrics` (may be null) must outlive the scheduler.
  Scheduler(const Options& options, runtime::Backend& backend, registry::Registry& registry,
            metrics::Metrics* metrics);
  // Stops the loop; requests still queued or running end with kUnavailable.
  ~Scheduler();

  // Queues a request on its model. kResourceExhausted when the model's queue is full.
  absl::StatusOr<std::shared_ptr<Job>> Submit(registry::ModelHandle model,
                                              runtime::GenerationRequest request)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the requests of `model`: lets them run up to `drain` (none when `cancel_now`), then
  // cancels the rest with kCancelled and waits until the loop has let go of them. Returns how
  // many were cancelled.
  int Drain(const registry::ResidentModel* model, absl::Duration drain, bool cancel_now)
      ABSL_LOCKS_EXCLUDED(mu_);

  int64_t queued() const { return queued_; }
  int64_t running() const { return running_; }

 private:
  // Both lists change under mu_; the engine thread reads `running` without it (only it writes).
  struct ModelWork {
    std::deque<std::shared_ptr<Job>> queued;
    std::vector<std::shared_ptr<Job>> running;
  };

  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // One turn of `work`'s model: new requests' prefills, then one batched decode step.
  void Turn(ModelWork& work, std::vector<std::shared_ptr<Job>> admitted) ABSL_LOCKS_EXCLUDED(mu_);
  // Makes the sequence of `job`; false (and the job finished with the error) when it fails.
  bool StartJob(Job& job) ABSL_LOCKS_EXCLUDED(mu_);
  void EndJob(Job& job, absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // The first `n` floats of logits_, grown when needed (engine thread only).
  std::span<float> Logits(size_t n);

  const Options options_;
  runtime::Backend& backend_;
  registry::Registry& registry_;
  metrics::Metrics* const metrics_;

  absl::Mutex mu_;
  absl::CondVar work_;   // new work, or stop
  absl::CondVar ended_;  // a job ended
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Models with queued or running requests, in turn order (the front goes next).
  std::deque<const registry::ResidentModel*> order_ ABSL_GUARDED_BY(mu_);
  std::map<const registry::ResidentModel*, ModelWork> work_by_model_ ABSL_GUARDED_BY(mu_);
  const registry::ResidentModel* last_model_ = nullptr;  // engine thread only
  // Buffers of the forward passes, reused so that a step allocates nothing (engine thread only).
  std::vector<runtime::SequenceStep> steps_;
  std::vector<float> logits_;
  std::atomic<int64_t> queued_{0}, running_{0};
  std::thread thread_;
};

}  // namespace df11::scheduler

#endif  // DF11_DAEMON_SCHEDULER_SCHEDULER_H_
