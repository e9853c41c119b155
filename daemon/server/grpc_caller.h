// Who is calling a gRPC method: the call's `authorization` metadata, or under mutual TLS its
// verified client certificate's subject, authenticated by the node (Node::Authenticate). A failure
// is recorded in the audit log.
#ifndef DF11_DAEMON_SERVER_GRPC_CALLER_H_
#define DF11_DAEMON_SERVER_GRPC_CALLER_H_

#include "absl/status/statusor.h"
#include "daemon/server/auth.h"
#include "daemon/server/node.h"
#include "grpcpp/server_context.h"

namespace df11::server {

absl::StatusOr<Caller> GrpcCaller(const Node& node, const grpc::ServerContextBase& context);
// GrpcCaller of a df11.v1.ModelHost call: a peer node's identity is refused (RefusePeer).
absl::StatusOr<Caller> ModelHostCaller(const Node& node, const grpc::ServerContextBase& context);

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_GRPC_CALLER_H_
