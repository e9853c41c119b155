#include "daemon/server/http_listener.h"

#include <openssl/x509.h>
#include <poll.h>

#include <atomic>
#include <future>
#include <map>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/server/elastic_pool.h"

namespace df11::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

// How long a refusal may take to write, and a closing connection to linger so that a client
// still sending its body reads the refusal instead of a reset.
constexpr auto kCloseTime = std::chrono::seconds(2);
// Bytes taken from the socket per read; the read buffer holds the headers and one such read.
constexpr size_t kReadBytes = 64 << 10;

// The subject of the client's certificate in RFC 2253 form ("CN=team-a-ci,O=Example"), as gRPC
// reports it in its x509_subject property; "" when the client sent none.
std::string ClientSubject(const SSL* ssl) {
  X509* peer = SSL_get1_peer_certificate(ssl);
  if (peer == nullptr) return "";
  BIO* bio = BIO_new(BIO_s_mem());
  X509_NAME_print_ex(bio, X509_get_subject_name(peer), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string subject(data, static_cast<size_t>(size));
  BIO_free(bio);
  X509_free(peer);
  return subject;
}

std::chrono::steady_clock::duration Chrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

// The part of a connection the listener sees: closed when the listener stops.
class Connection {
 public:
  virtual ~Connection() = default;
  virtual void CloseSoon() = 0;
};

}  // namespace

class HttpListener::Impl {
 public:
  Impl(Options options, HttpHandler handler)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        ioc_(options_.io_threads),
        work_(net::make_work_guard(ioc_)),
        acceptor_(net::make_strand(ioc_)),
        retry_(acceptor_.get_executor()),
        workers_(options_.handler_threads) {}

  absl::Status Listen();
  void Run();
  void Stop();

  // Counts a new connection from `address`, or says why it may not be served.
  const char* Admit(const std::string& address, Connection* connection,
                    std::weak_ptr<Connection> weak) ABSL_LOCKS_EXCLUDED(mu_);
  void Release(const std::string& address, Connection* connection) ABSL_LOCKS_EXCLUDED(mu_);
  bool TakeHandlerSlot() {
    if (handlers_.fetch_add(1) < options_.handler_threads) return true;
    handlers_.fetch_sub(1);
    return false;
  }
  void ReleaseHandlerSlot() { handlers_.fetch_sub(1); }
  void Refused(std::string_view reason) {
    if (options_.on_refused) options_.on_refused(reason);
  }
  int open_connections() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return open_;
  }

  const Options options_;
  const HttpHandler handler_;
  int port_ = 0;

  mutable absl::Mutex mu_;
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> per_client_ ABSL_GUARDED_BY(mu_);
  std::map<Connection*, std::weak_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int> handlers_{0};

  // Declared after the state above: connections still queued in the context release their
  // counts when it is destroyed.
  net::io_context ioc_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::optional<ssl::context> tls_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_;  // after a failed accept (out of descriptors), waits a little
  ElasticPool workers_;  // handler threads, made as requests come
  std::vector<std::thread> io_threads_;

 private:
  void Accept();
  void OnAccepted(tcp::socket socket);
};

namespace {

// One client connection, plain (beast::tcp_stream) or TLS (beast::ssl_stream over it). Its I/O
// runs on its strand (the stream's executor); the handler's thread reaches it through Await.
template <class Stream>
class Session : public Connection,
                public HttpResponse,
                public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <class... StreamArgs>
  Session(HttpListener::Impl& listener, std::string address, std::string peer,
          StreamArgs&&... stream_args)
      : listener_(listener),
        options_(listener.options_),
        address_(std::move(address)),
        peer_(std::move(peer)),
        stream_(std::forward<StreamArgs>(stream_args)...),
        buffer_(static_cast<size_t>(options_.max_header_bytes) + 2 * kReadBytes) {}
  ~Session() override { listener_.Release(address_, this); }

  void Begin() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->tcp().expires_after(Chrono(self->options_.header_timeout));
        self->stream_.async_handshake(ssl::stream_base::server, [self](beast::error_code ec) {
          if (ec) {
            if (ec == beast::error::timeout) self->listener_.Refused("header_timeout");
            return self->Close();
          }
          self->subject_ = ClientSubject(self->stream_.native_handle());
          self->ReadRequest(self->options_.header_timeout);
        });
      } else {
        self->ReadRequest(self->options_.header_timeout);
      }
    });
  }

  void CloseSoon() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->Close(); });
  }

  // HttpResponse, called on the handler's thread.
  bool Send(int status, std::string_view content_type, std::string body,
            const HttpHeaders& headers) override {
    http::response<http::string_body> res{static_cast<http::status>(status), version_};
    res.set(http::field::content_type, content_type);
    for (const auto& [name, value] : headers) res.set(name, value);
    res.keep_alive(keep_alive_);
    res.body() = std::move(body);
    res.prepare_payload();
    responded_ = true;
    http::response_serializer<http::string_body> serializer{res};
    serializer.limit(kPiece);
    while (!serializer.is_done()) {
      if (!Wrote(Await([&](auto done) {
            http::async_write_some(stream_, serializer, std::move(done));
          }))) {
        return false;
      }
    }
    return true;
  }

  bool Start(int status, std::string_view content_type, const HttpHeaders& headers) override {
    http::response<http::empty_body> res{static_cast<http::status>(status), version_};
    res.set(http::field::content_type, content_type);
    for (const auto& [name, value] : headers) res.set(name, value);
    // HTTP/1.0 has no chunks: the stream ends when the connection closes.
    chunked_ = version_ >= 11;
    if (!chunked_) keep_alive_ = false;
    res.keep_alive(keep_alive_);
    res.chunked(chunked_);
    http::response_serializer<http::empty_body> serializer{res};
    responded_ = true;
    streaming_ = true;
    return Wrote(
        Await([&](auto done) { http::async_write_header(stream_, serializer, std::move(done)); }));
  }

  bool Write(std::string_view data) override {
    for (size_t at = 0; at < data.size(); at += kPiece) {
      const std::string_view piece = data.substr(at, kPiece);
      const net::const_buffer bytes(piece.data(), piece.size());
      const beast::error_code ec =
          chunked_ ? Await([&](auto done) {
            net::async_write(stream_, http::make_chunk(bytes), std::move(done));
          })
                   : Await([&](auto done) { net::async_write(stream_, bytes, std::move(done)); });
      if (!Wrote(ec)) return false;
    }
    return true;
  }

  bool End() override {
    ended_ = true;
    if (!chunked_) return true;
    return Wrote(Await(
        [&](auto done) { net::async_write(stream_, http::make_chunk_last(), std::move(done)); }));
  }

  bool ClientGone() override {
    std::promise<bool> answer;
    std::future<bool> gone = answer.get_future();
    net::post(stream_.get_executor(), [&] {
      if (closed_ || !tcp().socket().is_open()) return answer.set_value(true);
      // The peer's FIN shows as POLLRDHUP even with its unread bytes (a TLS close_notify) ahead.
      pollfd fd{tcp().socket().native_handle(), POLLRDHUP, 0};
      answer.set_value(::poll(&fd, 1, 0) > 0 && (fd.revents & (POLLRDHUP | POLLHUP | POLLERR)));
    });
    return gone.get();
  }

  bool stalled() const override { return stalled_; }

 private:
  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream_); }

  // Waits for the next request: `first_byte` for its first byte (unless already read), then
  // options_.header_timeout for the rest of its headers.
  void ReadRequest(absl::Duration first_byte) {
    if (closed_) return Close();
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(options_.max_header_bytes));
    parser_->body_limit(static_cast<uint64_t>(options_.max_body_bytes));
    if (buffer_.size() > 0) return ReadHeader();
    tcp().expires_after(Chrono(first_byte));
    stream_.async_read_some(
        buffer_.prepare(kReadBytes),
        [self = this->shared_from_this()](beast::error_code ec, size_t n) {
          if (ec) return self->Close();  // idle too long, or closed: nothing was asked
          self->buffer_.commit(n);
          self->ReadHeader();
        });
  }

  void ReadHeader() {
    tcp().expires_after(Chrono(options_.header_timeout));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Refuse(ec, "header_timeout");
                              self->ReadBody();
                            });
  }

  void ReadBody() {
    const auto& req = parser_->get();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    // Taken now: Beast merges a chunked body's trailer fields into the headers, and a trailer
    // must not authenticate (RFC 9110, 6.5.1).
    authorization_.reset();
    if (auto it = req.find(http::field::authorization); it != req.end()) {
      authorization_ = std::string(it->value());
    }
    if (parser_->is_done()) return Dispatch();
    tcp().expires_after(Chrono(options_.body_timeout));
    auto read = [self = this->shared_from_this()] {
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       [self](beast::error_code ec, size_t) {
                         if (ec) return self->Refuse(ec, "body_timeout");
                         self->Dispatch();
                       });
    };
    // HTTP/1.0 has no 100 Continue: its client sends the body anyway.
    if (version_ < 11 || !beast::iequals(req[http::field::expect], "100-continue")) return read();
    continue_ = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                   version_);
    http::async_write(stream_, *continue_,
                      [self = this->shared_from_this(), read](beast::error_code ec, size_t) {
                        if (ec) return self->Close();
                        read();
                      });
  }

  // The request arrived whole: to a handler thread, if one is free.
  void Dispatch() {
    auto& req = parser_->get();
    if (!listener_.TakeHandlerSlot()) {
      listener_.Refused("busy");
      return Reply(503,
                   absl::UnavailableError(absl::StrCat(
                       "this node is serving its limit of ", options_.handler_threads,
                       " HTTP requests at once (limits.http_requests); try again")),
                   {{"Retry-After", "1"}});
    }
    HttpRequest request;
    request.method = std::string(req.method_string());
    const std::string_view target = req.target();
    request.path = std::string(target.substr(0, target.find('?')));
    request.authorization = std::move(authorization_);
    request.body = std::move(req.body());
    request.peer = peer_;
    request.client_subject = subject_;
    parser_.reset();
    tcp().expires_never();
    listener_.workers_.Post(
              [self = this->shared_from_this(), request = std::move(request)] {
                self->Handle(request);
              });
  }

  // On a handler thread.
  void Handle(const HttpRequest& request) {
    responded_ = streaming_ = chunked_ = ended_ = stalled_ = failed_ = false;
    try {
      listener_.handler_(request, *this);
    } catch (const std::exception& e) {
      if (options_.log) {
        options_.log(absl::StrCat("HTTP ", request.method, " ", request.path, ": ", e.what()));
      }
    } catch (...) {
      if (options_.log) options_.log(absl::StrCat("HTTP ", request.method, " ", request.path));
    }
    if (!responded_) {
      Send(500, options_.error_content_type,
           options_.error_body(absl::InternalError("the request ended without a response")), {});
    }
    listener_.ReleaseHandlerSlot();
    // A stream cut short cannot be followed by another response on the connection.
    const bool again = keep_alive_ && !failed_ && (!streaming_ || ended_);
    net::post(stream_.get_executor(), [self = this->shared_from_this(), again] {
      if (again) return self->ReadRequest(self->options_.idle_timeout);
      self->Linger();
    });
  }

  // Runs `start(done)` on the strand, where it starts one write, and waits for its end. The
  // client has options_.stall_timeout to take the bytes: a write is at most kPiece bytes, so a
  // large response to a slow but steady client is paced, not cut.
  template <class StartWrite>
  beast::error_code Await(StartWrite start) {
    std::promise<beast::error_code> done;
    std::future<beast::error_code> result = done.get_future();
    net::post(stream_.get_executor(), [&] {
      if (closed_) return done.set_value(net::error::operation_aborted);
      tcp().expires_after(Chrono(options_.stall_timeout));
      start([&done](beast::error_code ec, size_t) { done.set_value(ec); });
    });
    return result.get();
  }

  bool Wrote(beast::error_code ec) {
    if (!ec) return true;
    stalled_ = ec == beast::error::timeout;
    failed_ = true;
    return false;
  }

  // Reading failed with `ec`: a refusal for what the client sent wrong, else a quiet close.
  // `timeout` names a timeout in this phase.
  void Refuse(beast::error_code ec, const char* timeout) {
    if (ec == beast::error::timeout) {
      listener_.Refused(timeout);
      return Close();
    }
    if (ec == http::error::body_limit) {
      listener_.Refused("body_too_large");
      return Reply(413, absl::InvalidArgumentError(absl::StrCat(
                            "the request body is larger than limits.max_request_bytes (",
                            options_.max_body_bytes, " bytes)")));
    }
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      listener_.Refused("header_too_large");
      return Reply(431, absl::InvalidArgumentError(absl::StrCat(
                            "the request's headers are larger than ", options_.max_header_bytes,
                            " bytes")));
    }
    if (ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      listener_.Refused("malformed");
      return Reply(400, absl::InvalidArgumentError(
                            absl::StrCat("malformed HTTP request: ", ec.message())));
    }
    Close();
  }

  // A refusal from the listener itself, then the connection closes.
  void Reply(int status, const absl::Status& why, const HttpHeaders& headers = {}) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(status), version_ == 10 ? 10 : 11);
    res->set(http::field::content_type, options_.error_content_type);
    for (const auto& [name, value] : headers) res->set(name, value);
    res->keep_alive(false);
    res->body() = options_.error_body(why);
    res->prepare_payload();
    tcp().expires_after(kCloseTime);
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res](beast::error_code ec, size_t) {
                        if (ec) return self->Close();
                        self->Linger();
                      });
  }

  // Ends the connection: says so (TLS close_notify, TCP FIN), then reads and drops what the
  // client still sends for a moment, so that it reads the response instead of a reset.
  void Linger() {
    if (closed_) return;
    tcp().expires_after(kCloseTime);
    if constexpr (kTls) {
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
        self->Close();
      });
    } else {
      beast::error_code ignored;
      tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
      Drain();
    }
  }

  void Drain() {
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(kReadBytes),
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->Drain();
                            });
  }

  void Close() {
    closed_ = true;
    beast::error_code ignored;
    tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    tcp().close();
  }

  HttpListener::Impl& listener_;
  const HttpListener::Options& options_;
  const std::string address_, peer_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::string subject_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<std::string> authorization_;  // of the request being read
  std::shared_ptr<http::response<http::empty_body>> continue_;
  std::atomic<bool> closed_{false};
  // The request in progress; the strand and the handler's thread take turns with them.
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool responded_ = false, streaming_ = false, chunked_ = false, ended_ = false;
  bool stalled_ = false, failed_ = false;
  static constexpr size_t kPiece = 64 * 1024;  // the most one write sends
};

}  // namespace

absl::Status HttpListener::Impl::Listen() {
  if (options_.handler_threads < 1 || options_.io_threads < 1 || options_.max_connections < 1 ||
      options_.max_connections_per_client < 1 || !options_.error_body) {
    return absl::InvalidArgumentError("HTTP listener: thread and connection counts must be >= 1");
  }
  if (options_.set_up_tls) {
    tls_.emplace(ssl::context::tls_server);
    if (!options_.set_up_tls(*tls_->native_handle())) {
      return absl::InvalidArgumentError("cannot set up TLS for the HTTP listener");
    }
  }
  const std::string address = absl::StrCat(options_.host, ":", options_.port);
  beast::error_code ec;
  tcp::resolver resolver(ioc_);
  const auto endpoints = resolver.resolve(options_.host, std::to_string(options_.port),
                                          tcp::resolver::passive | tcp::resolver::numeric_service,
                                          ec);
  if (ec || endpoints.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", ec.message()));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", ec.message()));
  port_ = acceptor_.local_endpoint().port();
  return absl::OkStatus();
}

void HttpListener::Impl::Run() {
  net::dispatch(acceptor_.get_executor(), [this] { Accept(); });
  for (int i = 0; i < options_.io_threads; ++i) {
    io_threads_.emplace_back([this] {
      for (;;) {
        try {
          ioc_.run();
          return;
        } catch (const std::exception& e) {
          if (options_.log) options_.log(absl::StrCat("HTTP listener: ", e.what()));
        }
      }
    });
  }
}

void HttpListener::Impl::Accept() {
  acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {  // out of descriptors, for one: try again shortly rather than spin
      retry_.expires_after(std::chrono::milliseconds(50));
      retry_.async_wait([this](beast::error_code wait) {
        if (!wait) Accept();
      });
      return;
    }
    OnAccepted(std::move(socket));
    Accept();
  });
}

void HttpListener::Impl::OnAccepted(tcp::socket socket) {
  beast::error_code ec;
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  if (ec) return;
  socket.set_option(tcp::no_delay(true), ec);  // stream events leave at once
  const std::string address = remote.address().to_string();
  const std::string peer = absl::StrCat(address, ":", remote.port());
  std::shared_ptr<Connection> connection;
  std::function<void()> begin;
  if (tls_) {
    auto s = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
        *this, address, peer, std::move(socket), *tls_);
    begin = [s] { s->Begin(); };
    connection = s;
  } else {
    auto s = std::make_shared<Session<beast::tcp_stream>>(*this, address, peer, std::move(socket));
    begin = [s] { s->Begin(); };
    connection = s;
  }
  if (const char* refusal = Admit(address, connection.get(), connection); refusal != nullptr) {
    Refused(refusal);
    return;  // the connection closes as it goes
  }
  begin();
}

const char* HttpListener::Impl::Admit(const std::string& address, Connection* connection,
                                      std::weak_ptr<Connection> weak) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return "stopping";
  if (open_ >= options_.max_connections) return "connection_limit";
  int& mine = per_client_[address];
  if (mine >= options_.max_connections_per_client) return "client_connection_limit";
  ++mine;
  ++open_;
  connections_.emplace(connection, std::move(weak));
  return nullptr;
}

void HttpListener::Impl::Release(const std::string& address, Connection* connection) {
  absl::MutexLock lock(&mu_);
  if (connections_.erase(connection) == 0) return;  // never admitted
  --open_;
  if (auto it = per_client_.find(address); it != per_client_.end() && --it->second <= 0) {
    per_client_.erase(it);
  }
}

void HttpListener::Impl::Stop() {
  std::vector<std::shared_ptr<Connection>> open;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [unused, weak] : connections_) {
      if (auto c = weak.lock()) open.push_back(std::move(c));
    }
  }
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
  });
  for (auto& c : open) c->CloseSoon();
  open.clear();
  workers_.Join();  // handlers see their clients gone and return
  work_.reset();    // the context runs out of work once the last connection has closed
  for (std::thread& t : io_threads_) t.join();
}

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(Options options,
                                                                  HttpHandler handler) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(handler));
  if (absl::Status listening = impl->Listen(); !listening.ok()) {
    impl->work_.reset();
    impl->workers_.Join();
    return listening;
  }
  impl->Run();
  return std::unique_ptr<HttpListener>(new HttpListener(std::move(impl)));
}

HttpListener::HttpListener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpListener::~HttpListener() { impl_->Stop(); }

int HttpListener::port() const { return impl_->port_; }

int HttpListener::open_connections() const { return impl_->open_connections(); }

}  // namespace df11::server
