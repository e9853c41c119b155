// The daemon's HTTP front door on an event-driven listener (http_listener.h): the OpenAI-compatible
// API (openai_server.h) and Prometheus /metrics, scraped from the collectables it is given, with
// the limits of the config's limits: section. Its handler threads are ordinary threads with the
// default stack: the static TLS of the libraries df11d links (OpenBLAS's 60 KB, the CUDA
// runtime's 8 KB) is carved out of every thread's stack.
//
//   DF11_ASSIGN_OR_RETURN(auto http, HttpServer::Start(node, {registry, collector}));
//   ... http->port() ...
#ifndef DF11_DAEMON_SERVER_HTTP_SERVER_H_
#define DF11_DAEMON_SERVER_HTTP_SERVER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/server/http_listener.h"
#include "daemon/server/node.h"
#include "prometheus/collectable.h"

namespace df11::server {

class HttpServer {
 public:
  // Listens on the node's listen.http (HOST:PORT; port 0 picks a free port; an IPv6 host in
  // brackets) and serves the OpenAI API and GET /metrics from `metrics` in the Prometheus text
  // format, within limits.http_* and limits.max_request_bytes. Unknown paths and refused requests
  // get OpenAI error objects. kUnavailable naming the address when it cannot listen. `node` must
  // outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      Node& node, std::vector<std::shared_ptr<prometheus::Collectable>> metrics);
  // Stops listening, closes the connections (their requests are cancelled) and joins the threads.
  ~HttpServer() = default;

  int port() const { return listener_->port(); }

 private:
  HttpServer(Node& node, std::vector<std::shared_ptr<prometheus::Collectable>> metrics)
      : node_(node), metrics_(std::move(metrics)) {}
  void Serve(const HttpRequest& req, HttpResponse& res);

  Node& node_;
  const std::vector<std::shared_ptr<prometheus::Collectable>> metrics_;
  std::unique_ptr<HttpListener> listener_;  // last: it stops before the rest goes
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_HTTP_SERVER_H_
