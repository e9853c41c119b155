#include "daemon/server/http_server.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "prometheus/text_serializer.h"

namespace df11::server {

HttpServer::HttpServer() : server_(std::make_unique<httplib::Server>()) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& address, std::vector<std::shared_ptr<prometheus::Collectable>> metrics) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", address, "\" is not HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::unique_ptr<HttpServer> http(new HttpServer());
  http->metrics_ = std::move(metrics);
  http->server_->Get("/metrics",
                     [self = http.get()](const httplib::Request&, httplib::Response& response) {
                       std::vector<prometheus::MetricFamily> families;
                       for (const auto& c : self->metrics_) {
                         std::vector<prometheus::MetricFamily> more = c->Collect();
                         families.insert(families.end(), std::make_move_iterator(more.begin()),
                                         std::make_move_iterator(more.end()));
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
