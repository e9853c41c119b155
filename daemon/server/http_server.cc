#include "daemon/server/http_server.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/audit/audit.h"
#include "daemon/server/node_collector.h"
#include "daemon/server/openai_api.h"
#include "daemon/server/openai_server.h"
#include "httplib.h"
#include "prometheus/text_serializer.h"

namespace df11::server {

HttpServer::HttpServer(std::unique_ptr<httplib::Server> server) : server_(std::move(server)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    Node& node, std::vector<std::shared_ptr<prometheus::Collectable>> metrics) {
  const std::string& address = node.config().http_listen;
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", address, "\" is not HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::unique_ptr<httplib::Server> server;
  if (TlsFiles* tls = node.tls(); tls != nullptr) {
    auto https = std::make_unique<httplib::SSLServer>(
        [tls](SSL_CTX& ctx) { return tls->SetUpHttpContext(ctx); });
    if (!https->is_valid()) return absl::InternalError("cannot set up TLS for listen.http");
    server = std::move(https);
  } else {
    server = std::make_unique<httplib::Server>();
  }
  std::unique_ptr<HttpServer> http(new HttpServer(std::move(server)));
  http->metrics_ = std::move(metrics);
  // Each request (a stream for as long as it lasts) holds a thread.
  const size_t threads = static_cast<size_t>(node.config().http_connections);
  http->server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http->server_->set_payload_max_length(static_cast<size_t>(node.config().max_request_bytes));
  // A client that reads nothing of its stream for limits.stream_stall loses the connection, and
  // the request is cancelled (the sink's write fails).
  const double stall = node.config().stream_stall_seconds;
  http->server_->set_write_timeout(static_cast<time_t>(stall),
                                   static_cast<time_t>((stall - std::floor(stall)) * 1e6));
  const httplib::Server::HandlerWithResponse on_error = [&node](const httplib::Request& req,
                                                                httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    absl::Status status;
    if (res.status == 404) {
      status = absl::NotFoundError(absl::StrCat("no route for ", req.method, " ", req.path));
      res.set_content(openai::ErrorBody(status, "not_found"), "application/json");
      return httplib::Server::HandlerResponse::Handled;
    } else if (res.status == 413) {
      status = absl::InvalidArgumentError(
          absl::StrCat("the request body is larger than limits.max_request_bytes (",
                       node.config().max_request_bytes, " bytes)"));
    } else {
      status = absl::InvalidArgumentError(absl::StrCat("HTTP ", res.status));
    }
    res.set_content(openai::ErrorBody(status), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  };
  http->server_->set_error_handler(on_error);
  // The OpenAI API (and /metrics when auth.metrics is token) needs a caller's token.
  http->server_->set_pre_routing_handler(
      [&node](const httplib::Request& req, httplib::Response& res) {
        const bool guarded = absl::StartsWith(req.path, "/v1/") || req.path == "/v1" ||
                             (req.path == "/metrics" && node.config().metrics_need_token);
        if (!guarded) return httplib::Server::HandlerResponse::Unhandled;
        absl::StatusOr<Caller> caller = CallerOf(node, req);
        if (caller.ok()) return httplib::Server::HandlerResponse::Unhandled;
        if (absl::IsPermissionDenied(caller.status())) {  // a known token that may not (a peer)
          res.status = 403;
          res.set_content(openai::ErrorBody(caller.status()), "application/json");
          return httplib::Server::HandlerResponse::Handled;
        }
        audit::Record({.event = "authentication_failure",
                       .peer = absl::StrCat(req.remote_addr, ":", req.remote_port),
                       .outcome = caller.status()});
        res.status = 401;
        res.set_header("WWW-Authenticate", "Bearer");
        res.set_content(openai::ErrorBody(caller.status(), "invalid_api_key"), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      });
  AddOpenAiRoutes(*http->server_, node);
  http->server_->Get("/metrics", [self = http.get(), &node](const httplib::Request& req,
                                                            httplib::Response& response) {
    std::vector<prometheus::MetricFamily> families;
    for (const auto& c : self->metrics_) {
      std::vector<prometheus::MetricFamily> more = c->Collect();
      families.insert(families.end(), std::make_move_iterator(more.begin()),
                      std::make_move_iterator(more.end()));
    }
    // With auth.metrics: token a user token sees only its tenant's models and the shared ones.
    if (node.config().metrics_need_token) {
      absl::StatusOr<Caller> caller = CallerOf(node, req);
      if (!caller.ok()) return;  // the pre-routing handler refused it already
      families = VisibleMetrics(std::move(families), *caller);
    }
    response.set_content(prometheus::TextSerializer().Serialize(families),
                         "text/plain; version=0.0.4; charset=utf-8");
  });
  if (port == 0) {
    http->port_ = http->server_->bind_to_any_port(host);
  } else if (http->server_->bind_to_port(host, port)) {
    http->port_ = port;
  } else {
    http->port_ = -1;
  }
  if (http->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  http->listener_ = std::thread([server = http->server_.get()] { server->listen_after_bind(); });
  return http;
}

HttpServer::~HttpServer() {
  server_->stop();
  if (listener_.joinable()) listener_.join();
}

}  // namespace df11::server
