// The one place where the daemon's errors become gRPC statuses and HTTP status codes. Every layer
// below returns absl::Status with the code the wire API documents (NOT_FOUND, FAILED_PRECONDITION,
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

// The HTTP status of `code`, as google.rpc.Code documents each: INVALID_ARGUMENT,
// FAILED_PRECONDITION and OUT_OF_RANGE 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND
// 404, ALREADY_EXISTS and ABORTED 409, RESOURCE_EXHAUSTED 429, CANCELLED 499, UNIMPLEMENTED 501,
// UNAVAILABLE 503, DEADLINE_EXCEEDED 504, the rest 500; OK 200.
int ToHttpStatus(absl::StatusCode code);

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_STATUS_CONVERSION_H_
