// One HTTP exchange over libcurl, as the hub client needs it: HEAD or GET, extra headers, an
// optional `Range: bytes=N-`, redirects followed or not, the body streamed to a sink or kept, and
// the response headers (those of the last response when redirects are followed). A session keeps
// one curl handle, so its connections are reused (keep-alive); use one session per thread.
//
//   HttpSession http;
//   HttpResponse r = http.Send({.method = "HEAD", .url = url, ...});
//   if (r.status == 0) ... r.error says why the network failed
#ifndef DF11_DAEMON_HUB_HTTP_H_
#define DF11_DAEMON_HUB_HTTP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace df11::hub {

struct HttpRequest {
  std::string method = "GET";  // GET or HEAD
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  uint64_t range_start = 0;          // > 0: Range: bytes=N-
  bool follow_redirects = false;
  // HEAD and API calls: the whole exchange. Transfers: connecting, and any stall without bytes.
  double timeout_seconds = 10;
  bool is_transfer = false;
};

struct HttpResponse {
  long status = 0;         // 0: no HTTP answer (see error)
  std::string error;       // the network error when status is 0, or why the sink stopped
  bool cancelled = false;  // the sink or the cancel flag stopped the transfer
  std::map<std::string, std::string> headers;  // lower-case names; the last value of each
  std::string body;                            // when no sink was given
  std::string effective_url;                   // after redirects
  uint64_t body_bytes = 0;                     // bytes given to the sink or kept
  std::string Header(const std::string& lower_name) const;
};

// Receives the body; `head` holds the status and headers of the response the bytes belong to.
// Returning false stops the transfer (HttpResponse::cancelled).
using BodySink = std::function<bool(const char* data, size_t size, const HttpResponse& head)>;

class HttpSession {
 public:
  // `cancel` (may be null) is polled during transfers; when it becomes true the transfer stops.
  explicit HttpSession(const std::atomic<bool>* cancel = nullptr);
  ~HttpSession();
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  // Never fails as a function: network errors come back as status 0 with `error`.
  HttpResponse Send(const HttpRequest& request, const BodySink& sink = nullptr);

 private:
  void* curl_;  // CURL*
  const std::atomic<bool>* cancel_;
};

// The scheme, host and port of an absolute URL ("http://127.0.0.1:8080"), lower case, with the
// scheme's default port made explicit; empty for a relative URL.
std::string UrlOrigin(const std::string& url);

// Percent-encodes every byte outside A-Z a-z 0-9 - _ . ~ (a revision, or one part of a path).
std::string PercentEncode(const std::string& text);

}  // namespace df11::hub

#endif  // DF11_DAEMON_HUB_HTTP_H_
