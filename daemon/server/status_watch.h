// WatchNodeStatus as a gRPC callback stream: the node's status at each interval, with no thread
// held between statuses (a Timer callback sends the next one), so that many watches (routers,
// dashboards) cost memory only. Each status is for the caller as the tokens file says then: a
// revoked token ends the watch (UNAUTHENTICATED). A watch ends with OK when the daemon begins to
// shut down, with CANCELLED when the client goes or reads nothing for limits.stream_stall.
//
//   StatusWatches watches(node, timer, stall_watchdog);  // one for the service
//   return watches.Start(context, request);              // the method's reactor
#ifndef DF11_DAEMON_SERVER_STATUS_WATCH_H_
#define DF11_DAEMON_SERVER_STATUS_WATCH_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "daemon/server/elastic_pool.h"
#include "daemon/server/node.h"
#include "daemon/server/stall_watchdog.h"
#include "daemon/server/timer.h"
#include "df11/v1/model_host.pb.h"
#include "grpcpp/support/server_callback.h"

namespace df11::server {

class StatusWatch;

class StatusWatches {
 public:
  // `node`, `timer` and `stall_watchdog` outlive every watch (the gRPC server has ended).
  StatusWatches(Node& node, Timer& timer, StallWatchdog& stall_watchdog);

  grpc::ServerWriteReactor<df11::v1::NodeStatus>* Start(
      grpc::CallbackServerContext* context, const df11::v1::WatchNodeStatusRequest* request);

  // The watches in progress: each, once the node shuts down, is asked to end at once.
  struct Live {
    absl::Mutex mu;
    absl::flat_hash_set<StatusWatch*> watches ABSL_GUARDED_BY(mu);
  };

 private:
  Node& node_;
  Timer& timer_;
  // The threads that make and send the statuses that are due (a few: each takes little time).
  ElasticPool senders_{4};
  StallWatchdog& stall_watchdog_;
  // Shared with the node's shutdown callback, which may outlive this.
  std::shared_ptr<Live> live_ = std::make_shared<Live>();
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_STATUS_WATCH_H_
