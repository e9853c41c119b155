// An event-driven HTTP/1.1 listener (Boost.Beast on Asio) that slow or hostile clients cannot
// exhaust. A few I/O threads carry every connection while it connects, sends its headers and body,
// or sits idle between keep-alive requests; a request holds a handler thread only once it has
// arrived whole, and only for as long as its handler runs (a stream for its length).
//
// What it enforces, each with its own answer (docs/HTTP_SERVER.md has the reasons):
//   - a total deadline for a request's headers (from their first byte) and one for its body: the
//     connection is closed when either passes (a client trickling bytes holds no thread, and only
//     until the deadline);
//   - a body limit on every transfer coding (Content-Length or chunked): 413;
//   - a header limit: 431;
//   - at most `max_connections` open connections, and `max_connections_per_client` from one
//     address: more are closed as soon as they are accepted;
//   - at most `handler_threads` requests in handlers at once: more get 503 with Retry-After;
//   - no Range support: a Range header is ignored and the whole response sent once.
//
//   HttpListener::Options options{.host = "127.0.0.1", .port = 0, ...};
//   DF11_ASSIGN_OR_RETURN(auto http, HttpListener::Start(options, [](const HttpRequest& r,
//                                                                  HttpResponse& w) {
//     w.Send(200, "text/plain", "hello");
//   }));
#ifndef DF11_DAEMON_SERVER_HTTP_LISTENER_H_
#define DF11_DAEMON_SERVER_HTTP_LISTENER_H_

#include <openssl/ssl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace df11::server {

// A request that has arrived whole.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  std::optional<std::string> authorization;  // the Authorization header, when sent
  std::string body;
  std::string peer;            // "ADDRESS:PORT" of the client
  std::string client_subject;  // its certificate's subject under mutual TLS, else ""
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// How a handler answers its request: once with Send, or as a stream with Start, Write... and
// End. Calls block the handler's thread until the client's socket has taken the bytes; a client
// that takes nothing for the stall time loses its connection.
class HttpResponse {
 public:
  virtual ~HttpResponse() = default;
  // The whole response. False when the client is gone.
  virtual bool Send(int status, std::string_view content_type, std::string body,
                    const HttpHeaders& headers = {}) = 0;
  // Starts a stream of unknown length (chunked); false when the client is gone.
  virtual bool Start(int status, std::string_view content_type,
                     const HttpHeaders& headers = {}) = 0;
  // One piece of a started stream; false when the client is gone or read nothing for the stall
  // time (stalled() says which).
  virtual bool Write(std::string_view data) = 0;
  // Ends a started stream.
  virtual bool End() = 0;
  // Whether the client closed its end (or its connection was closed) while the handler waits.
  virtual bool ClientGone() = 0;
  // Whether the last failed write failed because the client read nothing for the stall time.
  virtual bool stalled() const = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

class HttpListener {
 public:
  struct Options {
    std::string host;  // an address to bind (IPv4 or IPv6, without brackets)
    int port = 0;      // 0: a free port
    // With it, HTTPS: called once on the TLS context (certificates, client verification).
    std::function<bool(SSL_CTX&)> set_up_tls;
    int64_t max_body_bytes = 4 << 20;
    int64_t max_header_bytes = 16 << 10;
    int handler_threads = 256;  // requests in handlers at once
    int max_connections = 4096;
    int max_connections_per_client = 256;
    int io_threads = 2;
    absl::Duration idle_timeout = absl::Seconds(60);    // between requests of a connection
    absl::Duration header_timeout = absl::Seconds(10);  // from a request's first byte
    absl::Duration body_timeout = absl::Seconds(60);    // from the end of its headers
    absl::Duration stall_timeout = absl::Seconds(30);   // per write of a response
    // The body of a response the listener gives itself (413, 431, 503, ...), and its type.
    std::function<std::string(const absl::Status&)> error_body;
    std::string error_content_type = "application/json";
    // Told each time the listener refuses or drops a client: "connection_limit",
    // "client_connection_limit", "header_timeout", "body_timeout", "body_too_large",
    // "header_too_large", "busy", "malformed" or "stopping". May be empty.
    std::function<void(std::string_view reason)> on_refused;
    // Where a handler's exception is told (the request gets 500). May be empty.
    std::function<void(const std::string& message)> log;
  };

  // Binds and starts serving: kUnavailable naming the address when it cannot listen,
  // kInvalidArgument for options out of range or a TLS context that cannot be set up.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(Options options,
                                                             HttpHandler handler);
  // Stops accepting, closes every connection (handlers see their client gone), waits for the
  // handlers to return and joins the threads.
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  int port() const;
  // Open connections now (for tests and metrics).
  int open_connections() const;

  class Impl;

 private:
  explicit HttpListener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_HTTP_LISTENER_H_
