#include "daemon/server/http_server.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "daemon/audit/audit.h"
#include "daemon/server/log.h"
#include "daemon/server/node_collector.h"
#include "daemon/server/openai_api.h"
#include "daemon/server/openai_server.h"
#include "prometheus/text_serializer.h"

namespace df11::server {

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    Node& node, std::vector<std::shared_ptr<prometheus::Collectable>> metrics) {
  const config::Config& config = node.config();
  const std::string& address = config.http_listen;
  const size_t colon = address.rfind(':');
  HttpListener::Options options;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &options.port)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", address, "\" is not HOST:PORT"));
  }
  options.host = address.substr(0, colon);
  if (options.host.size() >= 2 && options.host.front() == '[' && options.host.back() == ']') {
    options.host = options.host.substr(1, options.host.size() - 2);
  }
  if (TlsFiles* tls = node.tls(); tls != nullptr) {
    options.set_up_tls = [tls](SSL_CTX& ctx) { return tls->SetUpHttpContext(ctx); };
  }
  options.max_body_bytes = config.max_request_bytes;
  options.handler_threads = static_cast<int>(config.http_requests);
  options.max_connections = static_cast<int>(config.http_max_connections);
  options.max_connections_per_client = static_cast<int>(config.http_max_connections_per_client);
  options.idle_timeout = absl::Seconds(config.http_idle_timeout_seconds);
  options.header_timeout = absl::Seconds(config.http_header_timeout_seconds);
  options.body_timeout = absl::Seconds(config.http_body_timeout_seconds);
  // A client that reads nothing of its response for limits.stream_stall loses the connection,
  // and its request is cancelled.
  options.stall_timeout = absl::Seconds(config.stream_stall_seconds);
  options.error_body = [](const absl::Status& status) { return openai::ErrorBody(status); };
  options.on_refused = [&node](std::string_view reason) {
    node.metrics().HttpRefused(std::string(reason));
  };
  options.log = [](const std::string& message) { Log(message); };
  std::unique_ptr<HttpServer> http(new HttpServer(node, std::move(metrics)));
  DF11_ASSIGN_OR_RETURN(http->listener_,
                        HttpListener::Start(std::move(options),
                                            [self = http.get()](const HttpRequest& req,
                                                                HttpResponse& res) {
                                              self->Serve(req, res);
                                            }));
  return http;
}

namespace {

// The one method each route takes; nullptr for a path that is no route.
const char* MethodOf(absl::string_view path) {
  if (path == "/v1/completions" || path == "/v1/chat/completions") return "POST";
  if (path == "/v1/models" || absl::StartsWith(path, "/v1/models/") || path == "/metrics" ||
      path == "/health" || path == "/ready") {
    return "GET";
  }
  return nullptr;
}

}  // namespace

void HttpServer::Serve(const HttpRequest& req, HttpResponse& res) {
  // Probes, without a token: /health answers while the process serves; /ready once every preload
  // has ended and until the drain starts (grpc.health.v1's readiness, over HTTP).
  if (req.method == "GET" && req.path == "/health") {
    res.Send(200, "application/json", R"({"status":"ok"})");
    return;
  }
  if (req.method == "GET" && req.path == "/ready") {
    const char* state = node_.shutting_down()   ? "draining"
                        : !node_.preload_done() ? "preloading"
                                                : nullptr;
    if (state == nullptr) {
      res.Send(200, "application/json", R"({"status":"ready"})");
    } else {
      res.Send(503, "application/json", absl::StrCat(R"({"status":")", state, R"("})"));
    }
    return;
  }
  // The OpenAI API (and /metrics when auth.metrics is token) needs a caller's token.
  const bool api = absl::StartsWith(req.path, "/v1/") || req.path == "/v1";
  const bool guarded = api || (req.path == "/metrics" && node_.config().metrics_need_token);
  // Asked of every request (a hash of its token); only the guarded routes need the answer.
  const absl::StatusOr<Caller> caller = CallerOf(node_, req);
  if (guarded && !caller.ok()) {
    if (absl::IsPermissionDenied(caller.status())) {  // a known token that may not (a peer)
      res.Send(403, "application/json", openai::ErrorBody(caller.status()));
      return;
    }
    audit::Record({.event = "authentication_failure", .peer = req.peer, .outcome = caller.status()});
    res.Send(401, "application/json", openai::ErrorBody(caller.status(), "invalid_api_key"),
             {{"WWW-Authenticate", "Bearer"}});
    return;
  }
  if (const char* method = MethodOf(req.path); method != nullptr && req.method != method) {
    res.Send(405, "application/json",
             openai::ErrorBody(absl::InvalidArgumentError(
                                   absl::StrCat(req.path, " takes ", method, ", not ", req.method)),
                               "method_not_allowed"),
             {{"Allow", method}});
    return;
  }
  if (api && ServeOpenAi(node_, *caller, req, res)) return;
  if (req.method == "GET" && req.path == "/metrics") {
    std::vector<prometheus::MetricFamily> families;
    for (const auto& c : metrics_) {
      std::vector<prometheus::MetricFamily> more = c->Collect();
      families.insert(families.end(), std::make_move_iterator(more.begin()),
                      std::make_move_iterator(more.end()));
    }
    // With auth.metrics: token a user token sees only its tenant's models and the shared ones.
    if (guarded) families = VisibleMetrics(std::move(families), *caller);
    res.Send(200, "text/plain; version=0.0.4; charset=utf-8",
             prometheus::TextSerializer().Serialize(families));
    return;
  }
  res.Send(404, "application/json",
           openai::ErrorBody(absl::NotFoundError(absl::StrCat("no route for ", req.method, " ",
                                                              req.path)),
                             "not_found"));
}

}  // namespace df11::server
