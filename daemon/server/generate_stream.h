// Generate as a gRPC callback stream: no thread is held while the request waits in the queue or
// between its tokens. The job's updates (Job::OnUpdate) start each write; the client's
// cancellation (OnCancel) cancels the job; a write the client does not take within
// limits.stream_stall cancels the call (StallWatchdog); a revoked token ends the request within
// half a second of the tokens file's reload (a Timer tick). Only a model still to be loaded on
// demand is waited for on a thread of its own, as long as that load lasts (limits.load_wait).
//
//   return StartGenerate(node, timer, stall_watchdog, context, request);  // the method's reactor
#ifndef DF11_DAEMON_SERVER_GENERATE_STREAM_H_
#define DF11_DAEMON_SERVER_GENERATE_STREAM_H_

#include "daemon/server/node.h"
#include "daemon/server/stall_watchdog.h"
#include "daemon/server/timer.h"
#include "df11/v1/model_host.pb.h"
#include "grpcpp/support/server_callback.h"

namespace df11::server {

// `node`, `timer` and `stall_watchdog` outlive the call (the gRPC server has ended first).
grpc::ServerWriteReactor<df11::v1::GenerateResponse>* StartGenerate(
    Node& node, Timer& timer, StallWatchdog& stall_watchdog, grpc::CallbackServerContext* context,
    const df11::v1::GenerateRequest* request);

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_GENERATE_STREAM_H_
