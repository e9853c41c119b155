// The OpenAI-compatible HTTP API on df11d's HTTP listener: GET /v1/models, POST /v1/completions and
// POST /v1/chat/completions (with Server-Sent Events when `stream` is set), run through the node's
// scheduler exactly as gRPC Generate runs, catalog models loaded on demand. Errors are OpenAI's
// error objects with the HTTP status of their gRPC code (status_conversion.h). A client that goes
// away cancels its request. A caller sees and uses its own tenant's models and the shared ones, and
// its requests count against its tenant's quotas (Node::AdmitRequest).
#ifndef DF11_DAEMON_SERVER_OPENAI_SERVER_H_
#define DF11_DAEMON_SERVER_OPENAI_SERVER_H_

#include "daemon/server/http_listener.h"
#include "daemon/server/node.h"

namespace df11::server {

// The caller of an HTTP request, from its Authorization header (and its client certificate under
// mutual TLS): Node::Authenticate.
absl::StatusOr<Caller> CallerOf(const Node& node, const HttpRequest& req);

// Serves `req` for `caller` (CallerOf, checked once by the server) when it is one of the API's
// routes, and returns true; false for any other route.
bool ServeOpenAi(Node& node, const Caller& caller, const HttpRequest& req, HttpResponse& res);

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_OPENAI_SERVER_H_
