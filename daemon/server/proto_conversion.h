// The registry's and node's state as wire API messages.
//
//   *response.add_models() = ToProto(info);
#ifndef DF11_DAEMON_SERVER_PROTO_CONVERSION_H_
#define DF11_DAEMON_SERVER_PROTO_CONVERSION_H_

#include "daemon/registry/registry.h"
#include "daemon/server/node.h"
#include "df11/v1/model_host.pb.h"

namespace df11::server {

df11::v1::ModelInfo ToProto(const registry::ModelInfo& info);
df11::v1::DeviceStatus ToProto(const registry::DeviceMemory& memory);
df11::v1::NodeStatus ToProto(const NodeStatus& status);
df11::v1::LoadPhase ToProto(registry::LoadProgress::Phase phase);
df11::v1::FinishReason ToProto(runtime::FinishReason reason);

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_PROTO_CONVERSION_H_
