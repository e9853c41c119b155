// The HTTP front door under the attacks that broke it when it was built on a thread per
// connection: a chunked body past limits.max_request_bytes, a Range header with thousands of
// ranges, hundreds of clients trickling their headers (slowloris), oversized headers, and one
// client opening connection after connection. Each is refused with its own answer while the
// daemon keeps serving. Sizes are bounded and time limits generous; the timings themselves
// belong to benchmarks.
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/server/auth.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/daemon/daemon_process.h"
#include "tests/testing/loopback.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using testing::ConnectLoopback;
using testing::ReadUntilClosed;
using testing::SendAll;

std::string DemoDir() { return (fs::path(DF11_SOURCE_DIR) / "models" / "demo").string(); }

// A line of /proc/`pid`/status ("VmRSS", "Threads") as a number (VmRSS in KiB).
uint64_t ProcStatus(pid_t pid, const std::string& field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(field.size() + 1));
    uint64_t value = 0;
    fields >> value;
    return value;
  }
  return 0;
}

// Whether the server closed `fd` (EOF or reset) within `timeout`, reading what it sent first.
bool ClosedWithin(int fd, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0) return true;
  }
  return false;
}

// The value of df11_http_refused_total{reason=`reason`}, or 0.
double Refused(int port, const std::string& reason) {
  std::istringstream lines(testing::HttpGet(port, "/metrics"));
  const std::string prefix = absl::StrCat("df11_http_refused_total{reason=\"", reason, "\"} ");
  for (std::string line; std::getline(lines, line);) {
    double value = 0;
    if (line.rfind(prefix, 0) == 0 && absl::SimpleAtod(line.substr(prefix.size()), &value)) {
      return value;
    }
  }
  return 0;
}

constexpr char kToken[] = "df11_team-a";

class HttpAttacksTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir());
    std::ofstream(*dir_ + "/tokens.yaml")
        << "tokens:\n  - {name: a, sha256: " << server::Sha256Hex(kToken)
        << ", tenant: team-a, role: user}\n";
    daemon_ = new testing::DaemonProcess();
    const absl::Status started = daemon_->Start(
        absl::StrCat("preload: [{source: ", DemoDir(), ", name: demo, pin: true}]\n",
                     "auth: {tokens_file: ", *dir_, "/tokens.yaml}\n",
                     "limits: {max_request_bytes: 1MiB, http_header_timeout: 2s,\n",
                     "         http_body_timeout: 3s, http_max_connections_per_client: 1000}\n"),
        *dir_);
    ASSERT_TRUE(started.ok()) << started;
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->Terminate(), 0);
    delete daemon_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  // A legitimate completion: its HTTP status, within `timeout`.
  static int Complete(std::chrono::seconds timeout) {
    httplib::Client http("127.0.0.1", daemon_->http_port());
    http.set_read_timeout(timeout);
    http.set_connection_timeout(timeout);
    const httplib::Result r =
        http.Post("/v1/completions", {{"Authorization", absl::StrCat("Bearer ", kToken)}},
                  R"({"model": "demo", "prompt": "def ", "max_tokens": 4})", "application/json");
    return r ? r->status : -1;
  }

  static std::string* dir_;
  static testing::DaemonProcess* daemon_;
};
std::string* HttpAttacksTest::dir_;
testing::DaemonProcess* HttpAttacksTest::daemon_;

TEST_F(HttpAttacksTest, AChunkedBodyPastTheLimitIsRefusedWithoutBeingKept) {
  const uint64_t rss_before = ProcStatus(daemon_->pid(), "VmRSS") << 10;
  const int fd = ConnectLoopback(daemon_->http_port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: test\r\n",
                                       "Authorization: Bearer ", kToken, "\r\n",
                                       "Content-Type: application/json\r\n",
                                       "Transfer-Encoding: chunked\r\n\r\n")));
  // 64 MiB of chunks, sent while the answer is read (the server stops reading after 1 MiB).
  std::thread sender([fd] {
    const std::string chunk = absl::StrCat("10000\r\n", std::string(0x10000, ' '), "\r\n");
    for (int i = 0; i < 1024 && SendAll(fd, chunk); ++i) {
    }
  });
  const std::string answer = ReadUntilClosed(fd, std::chrono::seconds(30));
  shutdown(fd, SHUT_RDWR);
  sender.join();
  close(fd);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 413"));
  EXPECT_THAT(answer, HasSubstr("limits.max_request_bytes (1048576 bytes)"));
  const uint64_t rss_after = ProcStatus(daemon_->pid(), "VmRSS") << 10;
  // The 64 MiB sent are not kept: the limit's 1 MiB and working room.
  EXPECT_LE(rss_after, rss_before + (16 << 20));
  EXPECT_GE(Refused(daemon_->http_port(), "body_too_large"), 1);
  EXPECT_EQ(Complete(std::chrono::seconds(30)), 200);
}

TEST_F(HttpAttacksTest, AContentLengthPastTheLimitIsRefusedBeforeTheBody) {
  const int fd = ConnectLoopback(daemon_->http_port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "POST /v1/completions HTTP/1.1\r\nHost: test\r\n"
                          "Content-Length: 536870912\r\n\r\n"));
  const std::string answer = ReadUntilClosed(fd, std::chrono::seconds(30));
  close(fd);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 413"));
  EXPECT_THAT(answer, HasSubstr("limits.max_request_bytes (1048576 bytes)"));
}

TEST_F(HttpAttacksTest, RangeHeadersAreIgnoredAndTheWholeResponseSentOnce) {
  std::vector<std::string> ranges(2700, "0-");
  const std::string range = absl::StrCat("bytes=", absl::StrJoin(ranges, ","));
  httplib::Client http("127.0.0.1", daemon_->http_port());
  const httplib::Result plain = http.Get("/metrics");
  const httplib::Result ranged = http.Get("/metrics", {{"Range", range}});
  ASSERT_TRUE(plain && ranged);
  EXPECT_EQ(ranged->status, 200);
  EXPECT_FALSE(ranged->has_header("Content-Range"));
  EXPECT_THAT(ranged->get_header_value("Content-Type"), Not(HasSubstr("multipart")));
  // The metrics move between the two scrapes, by a few bytes, not by a factor.
  EXPECT_LT(ranged->body.size(), plain->body.size() * 2);
  // Error bodies too.
  const httplib::Result refused = http.Get("/v1/models");
  const httplib::Result refused_ranged = http.Get("/v1/models", {{"Range", range}});
  ASSERT_TRUE(refused && refused_ranged);
  EXPECT_EQ(refused_ranged->status, 401);
  EXPECT_EQ(refused_ranged->body, refused->body);
}

TEST_F(HttpAttacksTest, ClientsTricklingHeadersHoldNoThreadAndAreCutAtTheDeadline) {
  const pid_t pid = daemon_->pid();
  const uint64_t threads_before = ProcStatus(pid, "Threads");
  const double cut_before = Refused(daemon_->http_port(), "header_timeout");
  std::vector<int> slow;
  for (int i = 0; i < 300; ++i) {
    const int fd = ConnectLoopback(daemon_->http_port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, "G"));
    slow.push_back(fd);
  }
  // One header byte every 500 ms on each connection, until the server cuts them.
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    const std::string request = "ET /v1/models HTTP/1.1\r\nHost: test\r\nX-Slow: ";
    for (size_t i = 0; !stop; ++i) {
      for (int fd : slow) send(fd, &request[i % request.size()], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // No thread per connection, and a legitimate request is served meanwhile.
  EXPECT_LE(ProcStatus(pid, "Threads"), threads_before + 8);
  EXPECT_EQ(Complete(std::chrono::seconds(10)), 200);
  // The header deadline (2 s) closes every one of them, however steadily it trickles.
  int closed = 0;
  for (int fd : slow) closed += ClosedWithin(fd, std::chrono::milliseconds(15000)) ? 1 : 0;
  stop = true;
  trickle.join();
  for (int fd : slow) close(fd);
  EXPECT_EQ(closed, 300);
  EXPECT_GE(Refused(daemon_->http_port(), "header_timeout"), cut_before + 300);
}

TEST_F(HttpAttacksTest, HeadersPastTheLimitGet431) {
  const int fd = ConnectLoopback(daemon_->http_port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, absl::StrCat("GET /metrics HTTP/1.1\r\nHost: test\r\nX-Big: ",
                                       std::string(20 << 10, 'x'), "\r\n\r\n")));
  const std::string answer = ReadUntilClosed(fd, std::chrono::seconds(30));
  close(fd);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 431"));
  EXPECT_THAT(answer, HasSubstr("larger than 16384 bytes"));
}

TEST_F(HttpAttacksTest, AMalformedRequestGets400AndTheConnectionCloses) {
  const int fd = ConnectLoopback(daemon_->http_port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: -5\r\n\r\n"));
  const std::string answer = ReadUntilClosed(fd, std::chrono::seconds(30));
  close(fd);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 400"));
  EXPECT_THAT(answer, HasSubstr("malformed HTTP request"));
}

TEST(HttpConnectionLimitTest, OneClientsConnectionsAreCappedAndOthersServed) {
  const std::string dir = testing::MakeTempDir();
  testing::DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start("limits: {http_max_connections_per_client: 4}\n", dir).ok());
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(ConnectLoopback(daemon.http_port()));
    ASSERT_GE(held.back(), 0);
  }
  // Accepted and counted: each of the four is answered.
  for (int fd : held) {
    ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n"));
    char buf[16];
    ASSERT_GT(recv(fd, buf, sizeof(buf), 0), 0);
  }
  // A fifth is closed at once.
  const int fifth = ConnectLoopback(daemon.http_port());
  ASSERT_GE(fifth, 0);
  EXPECT_TRUE(ClosedWithin(fifth, std::chrono::milliseconds(10000)));
  close(fifth);
  // One of the four goes: a new one is served.
  close(held.back());
  held.pop_back();
  bool served = false;
  for (int attempt = 0; attempt < 50 && !served; ++attempt) {
    const int fd = ConnectLoopback(daemon.http_port());
    served = SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n") &&
             ReadUntilClosed(fd, std::chrono::seconds(5)).rfind("HTTP/1.1 200", 0) == 0;
    close(fd);
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(served);
  for (int fd : held) close(fd);
  double refused = 0;
  for (int attempt = 0; attempt < 50 && refused < 1; ++attempt) {  // the closes take a moment
    refused = Refused(daemon.http_port(), "client_connection_limit");
    if (refused < 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(refused, 1);
  EXPECT_EQ(daemon.Terminate(), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace df11
