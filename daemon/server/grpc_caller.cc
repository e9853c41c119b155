#include "daemon/server/grpc_caller.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/audit/audit.h"

namespace df11::server {

absl::StatusOr<Caller> GrpcCaller(const Node& node, const grpc::ServerContextBase& context) {
  std::optional<absl::string_view> header;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    header = absl::string_view(it->second.data(), it->second.size());
  }
  std::string subject;
  if (const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context(); auth) {
    const std::vector<grpc::string_ref> values = auth->FindPropertyValues("x509_subject");
    if (!values.empty()) subject.assign(values[0].data(), values[0].size());
  }
  absl::StatusOr<Caller> found = node.Authenticate(header, subject);
  if (!found.ok()) {
    audit::Record(
        {.event = "authentication_failure", .peer = context.peer(), .outcome = found.status()});
  }
  return found;
}

absl::StatusOr<Caller> ModelHostCaller(const Node& node, const grpc::ServerContextBase& context) {
  absl::StatusOr<Caller> caller = GrpcCaller(node, context);
  if (!caller.ok()) return caller;
  if (absl::Status s = RefusePeer(*caller); !s.ok()) return s;
  return caller;
}

}  // namespace df11::server
