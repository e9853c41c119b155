// The df11.v1.ModelHost gRPC service: a thin adapter from the wire API onto a Node. The streams
// that mostly wait (Generate, WatchNodeStatus) are callback streams, which hold no thread while
// they wait (generate_stream.h, status_watch.h); the other methods are synchronous, each holding
// a thread of gRPC's pool while it works (LoadModel's stream is its load). A client's
// cancellation stops the work it asked for.
//
//   ModelHostService service(*node);
//   builder.RegisterService(&service);
#ifndef DF11_DAEMON_SERVER_MODEL_HOST_SERVICE_H_
#define DF11_DAEMON_SERVER_MODEL_HOST_SERVICE_H_

#include "absl/time/time.h"
#include "daemon/server/node.h"
#include "daemon/server/stall_watchdog.h"
#include "daemon/server/status_watch.h"
#include "daemon/server/timer.h"
#include "df11/v1/model_host.grpc.pb.h"

namespace df11::server {

using ModelHostBase = df11::v1::ModelHost::WithCallbackMethod_Generate<
    df11::v1::ModelHost::WithCallbackMethod_WatchNodeStatus<df11::v1::ModelHost::Service>>;

class ModelHostService final : public ModelHostBase {
 public:
  explicit ModelHostService(Node& node)
      : node_(node),
        stall_watchdog_(timer_, absl::Seconds(node.config().stream_stall_seconds)),
        watches_(node, timer_, stall_watchdog_) {}

  grpc::Status LoadModel(grpc::ServerContext* context, const df11::v1::LoadModelRequest* request,
                         grpc::ServerWriter<df11::v1::LoadModelProgress>* writer) override;
  grpc::Status UnloadModel(grpc::ServerContext* context,
                           const df11::v1::UnloadModelRequest* request,
                           df11::v1::UnloadModelResponse* response) override;
  grpc::Status ListModels(grpc::ServerContext* context, const df11::v1::ListModelsRequest* request,
                          df11::v1::ListModelsResponse* response) override;
  grpc::Status GetModel(grpc::ServerContext* context, const df11::v1::GetModelRequest* request,
                        df11::v1::ModelInfo* response) override;
  grpc::Status EstimateModel(grpc::ServerContext* context,
                             const df11::v1::EstimateModelRequest* request,
                             df11::v1::EstimateModelResponse* response) override;
  grpc::ServerWriteReactor<df11::v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const df11::v1::GenerateRequest* request) override;
  grpc::Status GetNodeStatus(grpc::ServerContext* context,
                             const df11::v1::GetNodeStatusRequest* request,
                             df11::v1::NodeStatus* response) override;
  grpc::ServerWriteReactor<df11::v1::NodeStatus>* WatchNodeStatus(
      grpc::CallbackServerContext* context,
      const df11::v1::WatchNodeStatusRequest* request) override;

 private:
  // Finds the caller of `context` (its authorization metadata) and sets `caller` when not null;
  // UNAUTHENTICATED when there is none.
  grpc::Status Authorize(const grpc::ServerContext& context, Caller* caller = nullptr) const;

  Node& node_;
  Timer timer_;  // the callback streams' clock
  // Every stream's writes: a client that reads nothing for limits.stream_stall is cancelled.
  StallWatchdog stall_watchdog_;
  StatusWatches watches_;
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_MODEL_HOST_SERVICE_H_
