// The HTTP listener in one process, with handlers written for each case: keep-alive, streams in
// chunks (and by closing under HTTP/1.0), 100-continue, a client going away or reading nothing
// while its handler writes, handlers all busy, and stopping with a handler in flight. The
// ThreadSanitizer configuration runs it too (label tsan): the strand and the handler threads take
// turns with each connection's state.
#include "daemon/server/http_listener.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/testing/loopback.h"

namespace df11::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

HttpListener::Options TestOptions() {
  HttpListener::Options options;
  options.host = "127.0.0.1";
  options.handler_threads = 4;
  options.error_body = [](const absl::Status& status) {
    return absl::StrCat("{\"error\": \"", status.message(), "\"}");
  };
  return options;
}

std::unique_ptr<HttpListener> Listen(HttpListener::Options options, HttpHandler handler) {
  absl::StatusOr<std::unique_ptr<HttpListener>> listener =
      HttpListener::Start(std::move(options), std::move(handler));
  EXPECT_TRUE(listener.ok()) << listener.status();
  return listener.ok() ? *std::move(listener) : nullptr;
}

// What the server sends until it closes the connection (10 s at most).
std::string ReadToClose(int fd) { return testing::ReadUntilClosed(fd, std::chrono::seconds(10)); }

TEST(HttpListenerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  auto listener = Listen(TestOptions(), [](const HttpRequest& req, HttpResponse& res) {
    res.Send(200, "text/plain",
             absl::StrCat(req.method, " ", req.path, " ", req.peer, " ",
                          req.authorization.value_or("-"), " ", req.body));
  });
  ASSERT_NE(listener, nullptr);
  httplib::Client http("127.0.0.1", listener->port());
  http.set_keep_alive(true);
  const httplib::Result a = http.Get("/a?x=1", {{"Authorization", "Bearer t"}});
  const httplib::Result b = http.Post("/b", "body", "text/plain");
  ASSERT_TRUE(a && b);
  EXPECT_THAT(a->body, StartsWith("GET /a 127.0.0.1:"));
  EXPECT_THAT(a->body, HasSubstr(" Bearer t "));
  EXPECT_THAT(b->body, StartsWith("POST /b 127.0.0.1:"));
  EXPECT_THAT(b->body, HasSubstr(" - body"));
  // The same client port: the same connection.
  const std::string peer_a = a->body.substr(0, a->body.find(' ', 7));
  EXPECT_EQ(peer_a.substr(6), b->body.substr(7, peer_a.size() - 6));
  EXPECT_EQ(listener->open_connections(), 1);
}

TEST(HttpListenerTest, AChunkedBodysTrailerDoesNotAuthenticate) {
  auto listener = Listen(TestOptions(), [](const HttpRequest& req, HttpResponse& res) {
    res.Send(200, "text/plain", absl::StrCat(req.authorization.value_or("-"), " ", req.body));
  });
  ASSERT_NE(listener, nullptr);
  const int fd = testing::ConnectLoopback(listener->port());
  ASSERT_TRUE(testing::SendAll(fd,
                               "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                               "Trailer: Authorization\r\nConnection: close\r\n\r\n"
                               "2\r\nhi\r\n0\r\nAuthorization: Bearer forged\r\n\r\n"));
  const std::string raw = ReadToClose(fd);
  close(fd);
  EXPECT_THAT(raw, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(raw, HasSubstr("\r\n\r\n- hi"));
}

TEST(HttpListenerTest, AStreamArrivesInChunksAndEnds) {
  auto listener = Listen(TestOptions(), [](const HttpRequest&, HttpResponse& res) {
    ASSERT_TRUE(res.Start(200, "text/event-stream", {{"Cache-Control", "no-cache"}}));
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(res.Write(absl::StrCat("data: ", i, "\n\n")));
    ASSERT_TRUE(res.End());
  });
  ASSERT_NE(listener, nullptr);
  httplib::Client http("127.0.0.1", listener->port());
  const httplib::Result r = http.Get("/events");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Transfer-Encoding"), "chunked");
  EXPECT_EQ(r->get_header_value("Cache-Control"), "no-cache");
  EXPECT_EQ(r->body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
  // Under HTTP/1.0 the same stream ends by closing the connection.
  const int fd = testing::ConnectLoopback(listener->port());
  const std::string request = "GET /events HTTP/1.0\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  const std::string raw = ReadToClose(fd);
  close(fd);
  EXPECT_THAT(raw, StartsWith("HTTP/1.0 200"));
  EXPECT_THAT(raw, HasSubstr("\r\n\r\ndata: 0\n\ndata: 1\n\ndata: 2\n\n"));
}

TEST(HttpListenerTest, ExpectContinueIsAnsweredBeforeTheBody) {
  auto listener = Listen(TestOptions(), [](const HttpRequest& req, HttpResponse& res) {
    res.Send(200, "text/plain", req.body);
  });
  ASSERT_NE(listener, nullptr);
  const int fd = testing::ConnectLoopback(listener->port());
  const std::string head =
      "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n"
      "Connection: close\r\n\r\n";
  ASSERT_EQ(send(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  char buf[64];
  const ssize_t n = recv(fd, buf, sizeof(buf), 0);
  ASSERT_GT(n, 0);
  EXPECT_THAT(std::string(buf, static_cast<size_t>(n)), StartsWith("HTTP/1.1 100 Continue"));
  ASSERT_EQ(send(fd, "hello", 5, 0), 5);
  const std::string raw = ReadToClose(fd);
  close(fd);
  EXPECT_THAT(raw, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(raw, HasSubstr("\r\n\r\nhello"));
}

TEST(HttpListenerTest, AHandlerSeesItsClientGoAway) {
  absl::Notification waiting, saw_it;
  auto listener = Listen(TestOptions(), [&](const HttpRequest&, HttpResponse& res) {
    waiting.Notify();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!res.ClientGone() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (res.ClientGone()) saw_it.Notify();
    res.Send(200, "text/plain", "late");
  });
  ASSERT_NE(listener, nullptr);
  const int fd = testing::ConnectLoopback(listener->port());
  const std::string request = "GET /wait HTTP/1.1\r\nHost: t\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  ASSERT_TRUE(waiting.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_FALSE(saw_it.HasBeenNotified());
  close(fd);
  EXPECT_TRUE(saw_it.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

TEST(HttpListenerTest, AClientThatReadsNothingFailsTheWriteAfterTheStallTime) {
  HttpListener::Options options = TestOptions();
  options.stall_timeout = absl::Milliseconds(300);
  std::atomic<bool> stalled{false};
  absl::Notification done;
  auto listener = Listen(options, [&](const HttpRequest&, HttpResponse& res) {
    const std::string piece(1 << 16, 'x');
    const auto start = std::chrono::steady_clock::now();
    bool ok = res.Start(200, "text/plain");
    // Far more than the sockets' buffers hold; the client reads none of it.
    for (int i = 0; ok && i < 4096; ++i) ok = res.Write(piece);
    // Not before the stall time.
    stalled = !ok && res.stalled() &&
              std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(300);
    done.Notify();
  });
  ASSERT_NE(listener, nullptr);
  const int fd = testing::ConnectLoopback(listener->port());
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  const std::string request = "GET /big HTTP/1.1\r\nHost: t\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_TRUE(stalled);
  close(fd);
}

TEST(HttpListenerTest, ALargeResponseToASlowButSteadyClientIsPacedNotCut) {
  HttpListener::Options options = TestOptions();
  options.stall_timeout = absl::Milliseconds(300);
  constexpr size_t kBody = 32 << 20;  // far more than the sockets' buffers hold
  std::atomic<bool> sent{false};
  absl::Notification done;
  auto listener = Listen(options, [&](const HttpRequest&, HttpResponse& res) {
    sent = res.Send(200, "text/plain", std::string(kBody, 'x'));
    done.Notify();
  });
  ASSERT_NE(listener, nullptr);
  // Default socket buffers: a tiny receive window would leave the sender to TCP's persist timer.
  const int fd = testing::ConnectLoopback(listener->port());
  const std::string request = "GET /big HTTP/1.0\r\n\r\n";
  ASSERT_TRUE(testing::SendAll(fd, request));
  // The client takes the body a little at a time: the whole takes well over the stall time, each
  // piece far less.
  const auto start = std::chrono::steady_clock::now();
  size_t received = 0;
  std::vector<char> buffer(1 << 16);
  for (ssize_t n; (n = recv(fd, buffer.data(), buffer.size(), 0)) > 0;) {
    received += static_cast<size_t>(n);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_TRUE(sent);
  EXPECT_GT(received, kBody);  // the headers, then the whole body
  EXPECT_GT(elapsed, std::chrono::milliseconds(300)) << "the client was not slow: nothing shown";
  close(fd);
}

TEST(HttpListenerTest, RequestsBeyondTheHandlerThreadsGet503) {
  HttpListener::Options options = TestOptions();
  options.handler_threads = 1;
  absl::Notification inside, release;
  auto listener = Listen(options, [&](const HttpRequest& req, HttpResponse& res) {
    if (req.path == "/hold") {
      inside.Notify();
      release.WaitForNotificationWithTimeout(absl::Seconds(30));
    }
    res.Send(200, "text/plain", "ok");
  });
  ASSERT_NE(listener, nullptr);
  std::thread holder([&] {
    httplib::Client http("127.0.0.1", listener->port());
    const httplib::Result r = http.Get("/hold");
    EXPECT_TRUE(r && r->status == 200);
  });
  ASSERT_TRUE(inside.WaitForNotificationWithTimeout(absl::Seconds(30)));
  httplib::Client http("127.0.0.1", listener->port());
  const httplib::Result busy = http.Get("/other");
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  EXPECT_THAT(busy->body, HasSubstr("limit of 1 HTTP requests at once"));
  release.Notify();
  holder.join();
  // The slot frees once the held response has gone out; a loaded machine may take a moment.
  int status = 0;
  for (int attempt = 0; attempt < 100 && status != 200; ++attempt) {
    httplib::Client again("127.0.0.1", listener->port());
    const httplib::Result served = again.Get("/other");
    status = served ? served->status : -1;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status, 200);
}

TEST(HttpListenerTest, StoppingClosesConnectionsAndWaitsForTheirHandlers) {
  absl::Notification inside;
  std::atomic<bool> returned{false};
  auto listener = Listen(TestOptions(), [&](const HttpRequest&, HttpResponse& res) {
    inside.Notify();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!res.ClientGone() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    returned = res.ClientGone();
  });
  ASSERT_NE(listener, nullptr);
  const int fd = testing::ConnectLoopback(listener->port());
  const std::string request = "GET /wait HTTP/1.1\r\nHost: t\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  ASSERT_TRUE(inside.WaitForNotificationWithTimeout(absl::Seconds(30)));
  listener.reset();
  EXPECT_TRUE(returned);
  close(fd);
}

TEST(HttpListenerTest, AnAddressInUseIsUnavailable) {
  auto first = Listen(TestOptions(), [](const HttpRequest&, HttpResponse& res) {
    res.Send(200, "text/plain", "");
  });
  ASSERT_NE(first, nullptr);
  HttpListener::Options options = TestOptions();
  options.port = first->port();
  absl::StatusOr<std::unique_ptr<HttpListener>> second =
      HttpListener::Start(options, [](const HttpRequest&, HttpResponse&) {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("cannot listen on 127.0.0.1:", first->port())));
}

}  // namespace
}  // namespace df11::server
