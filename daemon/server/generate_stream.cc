#include "daemon/server/generate_stream.h"

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/scheduler/scheduler.h"
#include "daemon/server/generate_request.h"
#include "daemon/server/grpc_caller.h"
#include "daemon/server/log.h"
#include "daemon/server/proto_conversion.h"
#include "daemon/server/status_conversion.h"
#include "daemon/server/tenant_limits.h"

namespace df11::server {
namespace {

// How often a running request asks whether its caller's token is still listed (AuthorizationWatch
// asks the node at most this often).
constexpr absl::Duration kAuthorizationCheck = absl::Milliseconds(500);

// One Generate call. Its steps run on gRPC's threads (the start, OnWriteDone, OnCancel), the
// engine's (Advance, from the job's updates), the timer's (Tick), and while a model loads on
// demand, a thread of its own; mu_ orders them. At most one write is in flight, and Finish is
// called once, never while a write is in flight.
class GenerateStream final : public grpc::ServerWriteReactor<df11::v1::GenerateResponse> {
 public:
  GenerateStream(Node& node, Timer& timer, StallWatchdog& stall_watchdog,
                 grpc::CallbackServerContext* context, const df11::v1::GenerateRequest* request)
      : node_(node),
        timer_(timer),
        stall_watchdog_(stall_watchdog),
        context_(context),
        request_(*request),
        peer_(context->peer()) {}

  // Runs on the method's thread until the request is queued, or until it must wait for an
  // on-demand load (then on a thread of its own).
  void Begin() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::StatusOr<Caller> caller = ModelHostCaller(node_, *context_);
    if (!caller.ok()) return Fail(caller.status());
    caller_ = *std::move(caller);
    if (request_.model().empty()) return Fail(absl::InvalidArgumentError("model: empty"));
    absl::StatusOr<TenantLimits::Slot> slot = node_.AdmitRequest(caller_, peer_);
    if (!slot.ok()) return Fail(slot.status());
    slot_ = *std::move(slot);
    absl::StatusOr<registry::ModelHandle> model =
        node_.AcquireResident(caller_, request_.model(), request_.owner());
    if (model.ok()) return Submit(*std::move(model));
    // Not resident now: perhaps a catalog model to load, within the call's deadline.
    std::thread([this] {
      const absl::Time deadline =
          std::min(absl::FromChrono(context_->deadline()),
                   absl::Now() + absl::Seconds(node_.config().load_wait_seconds));
      absl::StatusOr<registry::ModelHandle> loaded =
          node_.AcquireForRequest(caller_, request_.model(), request_.owner(), deadline,
                                  [this] { return context_->IsCancelled(); });
      if (!loaded.ok()) return Fail(loaded.status());
      Submit(*std::move(loaded));
    }).detach();
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    uint64_t watch;
    {
      absl::MutexLock lock(&mu_);
      watch = stall_watch_;
    }
    const bool stalled = stall_watchdog_.End(watch);
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok || stalled) {
        const registry::ResidentModel& served = job_->model();
        if (stalled) {
          node_.metrics().StreamStalled(served.owner, served.name);
          Log(absl::StrCat("Generate of ", served.name, " from ", peer_,
                           ": the client read nothing for ",
                           absl::FormatDuration(stall_watchdog_.stall()), "; cancelled"));
        }
        job_->Cancel(
            absl::CancelledError(stalled ? "the client stopped reading" : "the client went away"));
        return FinishLocked(grpc::Status::CANCELLED);
      }
      if (final_status_) return FinishLocked(*final_status_);
    }
    Advance();
  }

  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      if (job_ != nullptr) job_->Cancel(absl::CancelledError("the client cancelled the request"));
    }
    Advance();
  }

  void OnDone() override ABSL_LOCKS_EXCLUDED(mu_) {
    std::shared_ptr<scheduler::Job> job;
    uint64_t tick;
    {
      absl::MutexLock lock(&mu_);
      job = job_;
      tick = tick_;
    }
    // A Tick running now sees the call finished and arms no other.
    if (tick != 0) timer_.Cancel(tick);
    if (job != nullptr) job->OnUpdate(nullptr);
    // Whoever finished the call has let go of the lock (and so of the call) once this takes it.
    { absl::MutexLock lock(&mu_); }
    delete this;
  }

 private:
  enum class Phase { kStarting, kRunning, kFinished };

  // Ends a call that has not started running.
  void Fail(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    FinishLocked(ToGrpcStatus(status));
  }

  // Queues the request, then lets its updates drive the stream.
  void Submit(registry::ModelHandle model) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::StatusOr<runtime::GenerationRequest> prepared =
        PrepareGenerate(request_, *model, node_.config());
    if (!prepared.ok()) {
      node_.metrics().RequestFinished(model->owner, model->name, "invalid_argument");
      return Fail(prepared.status());
    }
    absl::StatusOr<std::shared_ptr<scheduler::Job>> job =
        node_.scheduler().Submit(std::move(model), *std::move(prepared));
    if (!job.ok()) return Fail(job.status());
    {
      absl::MutexLock lock(&mu_);
      job_ = *job;
      if (cancelled_) job_->Cancel(absl::CancelledError("the client cancelled the request"));
      tick_ = timer_.After(kAuthorizationCheck, [this] { Tick(); });
    }
    (*job)->OnUpdate([this] { Advance(); });
    // Running, and what came before the listener (or the cancellation) handled, in one step:
    // once the lock is let go, the call may finish and be deleted at any time.
    absl::MutexLock lock(&mu_);
    phase_ = Phase::kRunning;
    AdvanceLocked();
  }

  // Writes what the job has for the client, or finishes the call; nothing while a write is in
  // flight (its OnWriteDone comes back here).
  void Advance() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    AdvanceLocked();
  }

  void AdvanceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (phase_ != Phase::kRunning || writing_ || final_status_) return;
    if (cancelled_) return FinishLocked(grpc::Status::CANCELLED);
    scheduler::Job::Update update;
    if (!job_->Next(&update, absl::ZeroDuration())) return;
    response_.Clear();
    for (const runtime::GeneratedToken& t : update.tokens) {
      response_.mutable_text()->append(t.text);
      response_.add_token_ids(t.id);
      if (request_.logprobs()) response_.add_logprobs(t.logprob);
      if (request_.top_logprobs() > 0) {
        df11::v1::TopLogprobs* top = response_.add_top_logprobs();
        for (int32_t k = 0; k < t.top_logprobs_count; ++k) {
          top->add_token_ids(t.top_logprobs[k].token_id);
          top->add_logprobs(t.top_logprobs[k].logprob);
        }
      }
    }
    if (update.done) {
      final_status_ = ToGrpcStatus(update.status);
      if (!update.status.ok() && update.tokens.empty()) return FinishLocked(*final_status_);
      if (update.status.ok()) {
        response_.set_finish_reason(ToProto(update.finish_reason));
        response_.mutable_usage()->set_prompt_tokens(static_cast<int32_t>(update.prompt_tokens));
        response_.mutable_usage()->set_completion_tokens(
            static_cast<int32_t>(update.completion_tokens));
        df11::v1::Timings* t = response_.mutable_timings();
        t->set_queue_seconds(update.timings.queue);
        t->set_time_to_first_token_seconds(update.timings.first_token);
        t->set_seconds_per_token(update.timings.per_token);
        t->set_total_seconds(update.timings.total);
      }
    }
    writing_ = true;
    stall_watch_ = stall_watchdog_.Start(context_);
    StartWrite(&response_);
  }

  // A revoked token stops the job before its next step; the job then ends with that status.
  void Tick() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    tick_ = 0;
    if (phase_ == Phase::kFinished) return;
    if (absl::Status still = authorized_.Check(); !still.ok()) {
      job_->Cancel(still);
      return;
    }
    tick_ = timer_.After(kAuthorizationCheck, [this] { Tick(); });
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    phase_ = Phase::kFinished;
    Finish(status);
  }

  Node& node_;
  Timer& timer_;
  StallWatchdog& stall_watchdog_;
  grpc::CallbackServerContext* const context_;
  const df11::v1::GenerateRequest& request_;  // gRPC's, alive until OnDone
  const std::string peer_;                    // "unknown" once the call is cancelled
  // Set by Begin before any other step can run.
  Caller caller_;
  AuthorizationWatch authorized_{node_, caller_};  // asked by Tick only
  TenantLimits::Slot slot_;  // the tenant's running request, until the call is done

  absl::Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kStarting;
  std::shared_ptr<scheduler::Job> job_ ABSL_GUARDED_BY(mu_);
  df11::v1::GenerateResponse response_ ABSL_GUARDED_BY(mu_);       // the one being written
  std::optional<grpc::Status> final_status_ ABSL_GUARDED_BY(mu_);  // once the last one is
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t stall_watch_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t tick_ ABSL_GUARDED_BY(mu_) = 0;  // the pending Tick's timer id, or 0
};

}  // namespace

grpc::ServerWriteReactor<df11::v1::GenerateResponse>* StartGenerate(
    Node& node, Timer& timer, StallWatchdog& stall_watchdog, grpc::CallbackServerContext* context,
    const df11::v1::GenerateRequest* request) {
  auto* stream = new GenerateStream(node, timer, stall_watchdog, context, request);
  stream->Begin();
  return stream;
}

}  // namespace df11::server
