// Cancels gRPC streams whose client stops reading. A sync server's Write blocks while HTTP/2 flow
// control holds the stream (the client reads nothing), and with it the handler's thread, the
// request's tenant slot and its lease on the model (which then cannot be evicted). A Write that
// has not returned after the stall time gets its call cancelled (ServerContext::TryCancel), so
// that it returns false and the handler lets everything go.
//
//   StallWatchdog watchdog(absl::Seconds(30));
//   bool stalled = false;
//   if (!watchdog.Write(context, writer, response, &stalled)) ... cancelled; `stalled` says why
#ifndef DF11_DAEMON_SERVER_STALL_WATCHDOG_H_
#define DF11_DAEMON_SERVER_STALL_WATCHDOG_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"

namespace df11::server {

class StallWatchdog {
 public:
  explicit StallWatchdog(absl::Duration stall);
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  // writer->Write(message), watched: false when the call is gone, and then `*stalled` (when not
  // null) tells whether the watchdog cancelled it.
  template <typename Writer, typename Message>
  bool Write(grpc::ServerContext* context, Writer* writer, const Message& message,
             bool* stalled = nullptr) {
    const uint64_t id = Watch(context);
    const bool written = writer->Write(message);
    const bool fired = Unwatch(id);
    if (stalled != nullptr) *stalled = fired;
    return written && !fired;
  }

  absl::Duration stall() const { return stall_; }

 private:
  struct Entry {
    grpc::ServerContext* context;
    std::chrono::steady_clock::time_point since;  // not the wall clock, which may jump
    bool fired = false;
  };
  uint64_t Watch(grpc::ServerContext* context);
  // Stops watching; whether the watchdog cancelled the call.
  bool Unwatch(uint64_t id);
  void Run();

  const absl::Duration stall_;
  absl::Mutex mu_;
  std::map<uint64_t, Entry> writes_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_STALL_WATCHDOG_H_
