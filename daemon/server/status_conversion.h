// The one place where the daemon's errors become gRPC statuses. Every layer below returns
// absl::Status with the code the wire API documents (NOT_FOUND, FAILED_PRECONDITION,
// RESOURCE_EXHAUSTED with the numbers, INVALID_ARGUMENT naming the field, UNAVAILABLE, DATA_LOSS,
// ...); absl and gRPC share their code numbers, so the code and message pass through unchanged.
//
//   return ToGrpcStatus(registry.Acquire(name).status());
#ifndef DF11_DAEMON_SERVER_STATUS_CONVERSION_H_
#define DF11_DAEMON_SERVER_STATUS_CONVERSION_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace df11::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_STATUS_CONVERSION_H_
