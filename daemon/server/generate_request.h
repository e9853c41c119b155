// A Generate request of the wire API turned into the engine's request for one model: the prompt
// tokenized (text) or rendered with the model's chat template (chat) or checked (token ids), the
// sampling parameters the request leaves unset taken from the model's generation_config.json, and
// the configured limits applied. Errors are kInvalidArgument naming the field, or
// kFailedPrecondition for a chat request to a model without a chat template.
//
//   DF11_ASSIGN_OR_RETURN(runtime::GenerationRequest r, PrepareGenerate(request, *model, config));
#ifndef DF11_DAEMON_SERVER_GENERATE_REQUEST_H_
#define DF11_DAEMON_SERVER_GENERATE_REQUEST_H_

#include "absl/status/statusor.h"
#include "daemon/config/config.h"
#include "daemon/registry/registry.h"
#include "daemon/runtime/engine/generator.h"
#include "df11/v1/model_host.pb.h"

namespace df11::server {

absl::StatusOr<runtime::GenerationRequest> PrepareGenerate(const df11::v1::GenerateRequest& request,
                                                           const registry::ResidentModel& model,
                                                           const config::Config& config);

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_GENERATE_REQUEST_H_
