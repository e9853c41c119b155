#include "daemon/server/status_watch.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/server/grpc_caller.h"
#include "daemon/server/proto_conversion.h"
#include "daemon/server/status_conversion.h"

namespace df11::server {

// One watch. Its steps run on gRPC's threads (the start, OnWriteDone, OnCancel), the timer's
// (Wake's reschedule) and a sender's (Send); at most one write or one pending Send at a time, and
// Finish only when neither is in flight.
class StatusWatch final : public grpc::ServerWriteReactor<df11::v1::NodeStatus> {
 public:
  StatusWatch(Node& node, Timer& timer, ElasticPool& senders, StallWatchdog& stall_watchdog,
              std::shared_ptr<StatusWatches::Live> live, grpc::CallbackServerContext* context)
      : node_(node),
        timer_(timer),
        senders_(senders),
        stall_watchdog_(stall_watchdog),
        live_(std::move(live)),
        context_(context) {}

  // Sends the first status, or finishes with `refusal` when it is not OK.
  void Begin(absl::Duration every, const absl::Status& refusal) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&live_->mu);
      live_->watches.insert(this);
    }
    absl::MutexLock lock(&mu_);
    every_ = every;
    if (!refusal.ok()) return FinishLocked(ToGrpcStatus(refusal));
    SendLocked();
  }

  // The next status now (the node is shutting down: the watch ends).
  void Wake() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (next_ != 0) timer_.Reschedule(next_, absl::ZeroDuration());
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    uint64_t watch;
    {
      absl::MutexLock lock(&mu_);
      watch = stall_watch_;
    }
    const bool stalled = stall_watchdog_.End(watch);
    absl::MutexLock lock(&mu_);
    if (!ok || stalled || cancelled_) return FinishLocked(grpc::Status::CANCELLED);
    if (node_.shutting_down()) return FinishLocked(grpc::Status::OK);
    // The status is made on a sender thread: the timer's thread only keeps time.
    next_ = timer_.After(every_, [this] { senders_.Post([this] { Send(); }); });
  }

  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    // A pending Send finishes the watch at once; a write in flight fails and OnWriteDone does.
    if (next_ != 0) timer_.Reschedule(next_, absl::ZeroDuration());
  }

  void OnDone() override ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&live_->mu);
      live_->watches.erase(this);
    }
    // A Send that finished the watch has let go of the lock (and so of the watch) once this
    // takes it; no Send is pending after Finish.
    { absl::MutexLock lock(&mu_); }
    delete this;
  }

 private:
  void Send() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    next_ = 0;
    SendLocked();
  }

  void SendLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    if (cancelled_) return FinishLocked(grpc::Status::CANCELLED);
    if (node_.shutting_down()) return FinishLocked(grpc::Status::OK);
    absl::StatusOr<Caller> caller = ModelHostCaller(node_, *context_);
    if (!caller.ok()) return FinishLocked(ToGrpcStatus(caller.status()));
    status_ = ToProto(node_.Status(*caller));
    stall_watch_ = stall_watchdog_.Start(context_);
    StartWrite(&status_);
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    finished_ = true;
    Finish(status);
  }

  Node& node_;
  Timer& timer_;
  ElasticPool& senders_;
  StallWatchdog& stall_watchdog_;
  const std::shared_ptr<StatusWatches::Live> live_;
  grpc::CallbackServerContext* const context_;

  absl::Mutex mu_;
  absl::Duration every_ ABSL_GUARDED_BY(mu_);
  df11::v1::NodeStatus status_ ABSL_GUARDED_BY(mu_);  // the one being written
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;            // the pending Send's timer id, or 0
  uint64_t stall_watch_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

StatusWatches::StatusWatches(Node& node, Timer& timer, StallWatchdog& stall_watchdog)
    : node_(node), timer_(timer), stall_watchdog_(stall_watchdog) {
  node_.OnShutdown([live = live_] {
    absl::MutexLock lock(&live->mu);
    for (StatusWatch* watch : live->watches) watch->Wake();
  });
}

grpc::ServerWriteReactor<df11::v1::NodeStatus>* StatusWatches::Start(
    grpc::CallbackServerContext* context, const df11::v1::WatchNodeStatusRequest* request) {
  auto* watch = new StatusWatch(node_, timer_, senders_, stall_watchdog_, live_, context);
  const double interval = request->interval_seconds();
  absl::Status refusal = ModelHostCaller(node_, *context).status();
  if (refusal.ok() && (!std::isfinite(interval) || interval < 0)) {
    refusal = absl::InvalidArgumentError("interval_seconds: must be a finite number >= 0");
  }
  // A status at least every 50 ms; one a second when the client names no interval.
  const absl::Duration every =
      interval > 0 ? absl::Seconds(std::max(interval, 0.05)) : absl::Seconds(1);
  watch->Begin(every, refusal);
  return watch;
}

}  // namespace df11::server
