// Cancels gRPC streams whose client stops reading. A write that HTTP/2 flow control holds (the
// client reads nothing) holds with it the request's tenant slot and its lease on the model (which
// then cannot be evicted), and a sync handler's thread. A write that has not completed after the
// stall time gets its call cancelled (TryCancel), so that it fails and the stream lets
// everything go.
//
//   StallWatchdog watchdog(timer, absl::Seconds(30));
//   bool stalled = false;
//   if (!watchdog.Write(context, writer, response, &stalled)) ... cancelled; `stalled` says why
//
// A callback stream brackets each write instead:
//   uint64_t watch = watchdog.Start(context); StartWrite(...);
//   ... OnWriteDone: const bool stalled = watchdog.End(watch);
#ifndef DF11_DAEMON_SERVER_STALL_WATCHDOG_H_
#define DF11_DAEMON_SERVER_STALL_WATCHDOG_H_

#include <cstdint>

#include "absl/time/time.h"
#include "daemon/server/timer.h"
#include "grpcpp/server_context.h"

namespace df11::server {

class StallWatchdog {
 public:
  // `timer` outlives the watchdog.
  StallWatchdog(Timer& timer, absl::Duration stall) : timer_(timer), stall_(stall) {}

  // writer->Write(message), watched: false when the call is gone, and then `*stalled` (when not
  // null) tells whether the watchdog cancelled it.
  template <typename Writer, typename Message>
  bool Write(grpc::ServerContext* context, Writer* writer, const Message& message,
             bool* stalled = nullptr) {
    const uint64_t watch = Start(context);
    const bool written = writer->Write(message);
    const bool fired = End(watch);
    if (stalled != nullptr) *stalled = fired;
    return written && !fired;
  }

  // Watches a write that begins now; `context` lives until End.
  uint64_t Start(grpc::ServerContextBase* context) {
    return timer_.After(stall_, [context] { context->TryCancel(); });
  }
  // The write has completed (or failed): whether the watchdog cancelled its call.
  bool End(uint64_t watch) { return !timer_.Cancel(watch); }

  absl::Duration stall() const { return stall_; }

 private:
  Timer& timer_;
  const absl::Duration stall_;
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_STALL_WATCHDOG_H_
