// The daemon's HTTP listener (cpp-httplib): the OpenAI-compatible API (openai_server.h) and
// Prometheus /metrics, scraped from the collectables it is given. Its handler threads are ordinary
// threads with the default stack: the static TLS of the libraries df11d links (OpenBLAS's 60 KB,
// the CUDA runtime's 8 KB) is carved out of every thread's stack, which left too little of the
// small fixed stacks of prometheus-cpp's civetweb exposer.
//
//   DF11_ASSIGN_OR_RETURN(auto http, HttpServer::Start(node, {registry, collector}));
//   ... http->port() ...
#ifndef DF11_DAEMON_SERVER_HTTP_SERVER_H_
#define DF11_DAEMON_SERVER_HTTP_SERVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/server/node.h"
#include "prometheus/collectable.h"

namespace httplib {
class Server;
}

namespace df11::server {

class HttpServer {
 public:
  // Listens on the node's listen.http (HOST:PORT; port 0 picks a free port; an IPv6 host in
  // brackets) with limits.http_connections handler threads and bodies of at most
  // limits.max_request_bytes, and serves the OpenAI API and GET /metrics from `metrics` in the
  // Prometheus text format. Unknown paths and refused requests get OpenAI error objects.
  // kUnavailable naming the address when it cannot listen. `node` must outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      Node& node, std::vector<std::shared_ptr<prometheus::Collectable>> metrics);
  // Stops listening, lets the requests in progress end, and joins the listener.
  ~HttpServer();

  int port() const { return port_; }

 private:
  explicit HttpServer(std::unique_ptr<httplib::Server> server);
  std::unique_ptr<httplib::Server> server_;
  std::vector<std::shared_ptr<prometheus::Collectable>> metrics_;
  std::thread listener_;
  int port_ = 0;
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_HTTP_SERVER_H_
