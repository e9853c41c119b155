// Clients that start a long stream and then read nothing of it (slow consumers), over gRPC (a
// small HTTP/2 flow-control window the client never reopens) and over the OpenAI HTTP API (a
// small socket receive buffer never drained). After limits.stream_stall the daemon cancels the
// stream, counts it in df11_stalled_streams_total and logs it; its memory stays bounded, and
// other requests are served, with the right tokens, throughout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/df11_client.h"
#include "df11/v1/model_host.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/daemon/daemon_process.h"
#include "tests/daemon/demo_hub.h"

namespace df11 {
namespace {

using testing::DemoDir;
using testing::GreedyTokens;

// The daemon's resident memory (VmRSS), in bytes.
uint64_t ResidentBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    uint64_t kib = 0;
    fields >> kib;
    return kib << 10;
  }
  return 0;
}

// The value of df11_stalled_streams_total for `model`, or 0.
double StalledStreams(int http_port, const std::string& model) {
  httplib::Client http("127.0.0.1", http_port);
  const httplib::Result r = http.Get("/metrics");
  if (!r || r->status != 200) return 0;
  std::istringstream lines(r->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("df11_stalled_streams_total{", 0) != 0 ||
        line.find(absl::StrCat("model=\"", model, "\"")) == std::string::npos) {
      continue;
    }
    double value = 0;
    return absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value) ? value : 0;
  }
  return 0;
}

class SlowConsumerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir());
    // A small model with a long context, whose stream outgrows the kernel's socket buffers (4 MB
    // on Linux) before it ends.
    const std::string long_context =
        testing::MakeTestModel(*dir_, "long", "qwen3", false, 5, DemoDir());
    {
      const std::string path = long_context + "/config.json";
      std::ifstream in(path);
      nlohmann::json config = nlohmann::json::parse(in);
      config["max_position_embeddings"] = 16384;
      std::ofstream(path) << config.dump(2);
    }
    daemon_ = new testing::DaemonProcess();
    const absl::Status started = daemon_->Start(
        absl::StrCat("preload: [{source: ", DemoDir(), ", name: demo, pin: true},\n",
                     "          {source: ", long_context, ", name: long, pin: true}]\n",
                     "limits: {stream_stall: 2s, max_tokens: 12000}\n"),
        *dir_);
    ASSERT_TRUE(started.ok()) << started;
    client_ = client::Df11Client::Connect(daemon_->address())->release();
    absl::StatusOr<std::vector<int32_t>> expected = GreedyTokens(*client_, "demo");
    ASSERT_TRUE(expected.ok()) << expected.status();
    expected_ = new std::vector<int32_t>(*expected);
  }
  static void TearDownTestSuite() {
    delete client_;
    EXPECT_EQ(daemon_->Terminate(), 0);
    delete daemon_;
    delete expected_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  // Greedy requests of demo while the slow consumer holds its stream.
  struct Traffic : testing::GreedyTraffic {
    Traffic() : GreedyTraffic(daemon_->address(), "demo", *SlowConsumerTest::expected_) {}
  };

  // Waits (at most 60 s) until df11_stalled_streams_total for `model` reaches `count`.
  static bool WaitForStalled(const std::string& model, double count) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (StalledStreams(daemon_->http_port(), model) < count) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return true;
  }

  static std::string Log() {
    std::ifstream in(*dir_ + "/df11d.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  static std::string* dir_;
  static testing::DaemonProcess* daemon_;
  static client::Df11Client* client_;
  static std::vector<int32_t>* expected_;
};
std::string* SlowConsumerTest::dir_;
testing::DaemonProcess* SlowConsumerTest::daemon_;
client::Df11Client* SlowConsumerTest::client_;
std::vector<int32_t>* SlowConsumerTest::expected_;

TEST_F(SlowConsumerTest, AGrpcStreamNobodyReadsIsCancelledAfterTheStallTime) {
  const double stalled_before = StalledStreams(daemon_->http_port(), "demo");
  const uint64_t rss_before = ResidentBytes(daemon_->pid());
  // A 1 KiB stream window that only reads would reopen, and no BDP probes to widen it.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  std::unique_ptr<v1::ModelHost::Stub> stub = v1::ModelHost::NewStub(
      grpc::CreateCustomChannel(daemon_->address(), grpc::InsecureChannelCredentials(), args));
  v1::GenerateRequest request;
  request.set_model("demo");
  request.set_text("def main(");
  request.set_max_tokens(1500);  // about 200 KB of responses with 20 top logprobs each
  request.set_ignore_eos(true);
  request.set_top_logprobs(20);
  request.set_logprobs(true);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> stream =
      stub->Generate(&context, request);

  Traffic traffic;
  ASSERT_TRUE(WaitForStalled("demo", stalled_before + 1)) << Log();
  traffic.Stop();
  EXPECT_GT(traffic.ok(), 0);
  EXPECT_THAT(traffic.failures(), ::testing::IsEmpty());
  EXPECT_THAT(Log(), ::testing::HasSubstr("the client read nothing for 2s; cancelled"));
  // What the stream holds is bounded by its max_tokens, and freed.
  EXPECT_LT(ResidentBytes(daemon_->pid()), rss_before + (64 << 20));

  // Read now, the stream has what was sent before the window closed, and ends CANCELLED.
  int tokens = 0;
  for (v1::GenerateResponse r; stream->Read(&r);) tokens += r.token_ids_size();
  EXPECT_LT(tokens, 1500);
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The daemon serves on.
  EXPECT_EQ(GreedyTokens(*client_, "demo").value_or(std::vector<int32_t>{}), *expected_);
}

TEST_F(SlowConsumerTest, AnHttpStreamNobodyReadsIsCancelledAfterTheStallTime) {
  const double stalled_before = StalledStreams(daemon_->http_port(), "long");
  // A 4 KiB receive buffer (set before connecting, so the TCP window stays small), never read.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int buffer = 4096;
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer), 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(daemon_->http_port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  // About 15 MB of SSE events: each token's chunk carries its 20 top logprobs (over 1 KB).
  const std::string body =
      R"({"model": "long", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 12000,
          "stream": true, "ignore_eos": true, "temperature": 0, "logprobs": true,
          "top_logprobs": 20})";
  const std::string http_request = absl::StrCat(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n",
      "Content-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
  ASSERT_EQ(::send(fd, http_request.data(), http_request.size(), 0),
            static_cast<ssize_t>(http_request.size()));

  Traffic traffic;
  const bool stalled = WaitForStalled("long", stalled_before + 1);
  traffic.Stop();
  ::close(fd);
  ASSERT_TRUE(stalled) << Log();
  EXPECT_GT(traffic.ok(), 0);
  EXPECT_THAT(traffic.failures(), ::testing::IsEmpty());
  EXPECT_THAT(Log(), ::testing::HasSubstr("completion of long: the client read nothing for 2s"));
  EXPECT_EQ(GreedyTokens(*client_, "demo").value_or(std::vector<int32_t>{}), *expected_);
}

}  // namespace
}  // namespace df11
