// The hub failing while df11d loads a model of several shards from it: connections dropped
// mid-file, answers stalled past the download timeout, errors flapping, and a hub that stays down.
// Each load retries and completes with the right weights, or fails with UNAVAILABLE; meanwhile
// another model keeps serving, every request of it answered. And an HTTP client that leaves while
// its model loads on demand from a stalled hub lets go of its request at once.
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/df11_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/daemon_process.h"
#include "tests/daemon/demo_hub.h"
#include "tests/hub/fake_hub.h"
#include "tests/testing/loopback.h"
#include "tests/testing/status_matchers.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::StatusIs;

using testing::DemoDir;
using testing::DemoHubFiles;
using testing::GreedyTokens;

class HubFaultsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir());
    hub_ = new testing::FakeHub();
    // A stalled transfer fails after 1 s and resumes; API calls give up after 2 s.
    setenv("HF_HUB_DOWNLOAD_TIMEOUT", "1", 1);
    setenv("HF_HUB_ETAG_TIMEOUT", "2", 1);
    daemon_ = new testing::DaemonProcess();
    const absl::Status started = daemon_->Start(
        absl::StrCat("preload: [{source: ", DemoDir(), ", name: demo, pin: true}]\n",
                     "hub: {cache_dir: ", *dir_, "/hub, endpoint: ", hub_->endpoint(), "}\n"),
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
    delete hub_;
    delete expected_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  // Greedy requests of demo until stopped.
  struct Traffic : testing::GreedyTraffic {
    Traffic() : GreedyTraffic(daemon_->address(), "demo", *HubFaultsTest::expected_) {}
  };

  // Loads `repo` from the hub while `traffic` runs on demo; the load's status.
  static absl::Status LoadFromHub(const std::string& repo) {
    v1::LoadModelRequest load;
    load.set_source(repo);
    return client_->LoadModel(load, nullptr, {.timeout = absl::Seconds(300)}).status();
  }

  static std::string* dir_;
  static testing::FakeHub* hub_;
  static testing::DaemonProcess* daemon_;
  static client::Df11Client* client_;
  static std::vector<int32_t>* expected_;
};
std::string* HubFaultsTest::dir_;
testing::FakeHub* HubFaultsTest::hub_;
testing::DaemonProcess* HubFaultsTest::daemon_;
client::Df11Client* HubFaultsTest::client_;
std::vector<int32_t>* HubFaultsTest::expected_;

TEST_F(HubFaultsTest, DroppedConnectionsResumeAndTheLoadCompletes) {
  hub_->AddCommit("test-org/dropped", "main", DemoHubFiles());
  Traffic traffic;
  hub_->ClearRequests();
  // The next 16 file bodies are cut after 64 KiB: the small files pass whole, the tokenizer and
  // the shards (1.5 MB each, from the CDN) are cut, over and over.
  hub_->CutNext(16, 64 << 10);
  ASSERT_TRUE(LoadFromHub("test-org/dropped").ok());
  traffic.Stop();
  // Shards were resumed from where they stopped, not fetched again from the start.
  int resumed_shards = 0;
  for (const testing::FakeHub::Request& r : hub_->requests()) {
    if (r.server == "cdn" && r.range.rfind("bytes=", 0) == 0 && r.range != "bytes=0-") {
      ++resumed_shards;
    }
  }
  EXPECT_GE(resumed_shards, 4);
  EXPECT_EQ(GreedyTokens(*client_, "test-org/dropped").value_or(std::vector<int32_t>{}),
            *expected_);
  EXPECT_GT(traffic.ok(), 0);
  EXPECT_THAT(traffic.failures(), ::testing::IsEmpty());
}

TEST_F(HubFaultsTest, AStalledHubIsWaitedOutAndTheLoadCompletes) {
  hub_->AddCommit("test-org/stalled", "main", DemoHubFiles());
  Traffic traffic;
  // Every answer comes after 3 s, past both timeouts, for 5 s: requests time out and retry.
  hub_->SetLatency(3000);
  std::thread recover([] {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    hub_->SetLatency(0);
  });
  const absl::Status loaded = LoadFromHub("test-org/stalled");
  recover.join();
  traffic.Stop();
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ(GreedyTokens(*client_, "test-org/stalled").value_or(std::vector<int32_t>{}),
            *expected_);
  EXPECT_THAT(traffic.failures(), ::testing::IsEmpty());
}

TEST_F(HubFaultsTest, FlappingErrorsAreRetriedAndTheLoadCompletes) {
  hub_->AddCommit("test-org/flapping", "main", DemoHubFiles());
  Traffic traffic;
  hub_->FailNext(3, 503);
  const absl::Status first = LoadFromHub("test-org/flapping");
  ASSERT_TRUE(first.ok()) << first;
  hub_->AddCommit("test-org/rate-limited", "main", DemoHubFiles());
  hub_->FailNext(2, 429, 1);
  const absl::Status second = LoadFromHub("test-org/rate-limited");
  traffic.Stop();
  ASSERT_TRUE(second.ok()) << second;
  EXPECT_EQ(GreedyTokens(*client_, "test-org/rate-limited").value_or(std::vector<int32_t>{}),
            *expected_);
  EXPECT_THAT(traffic.failures(), ::testing::IsEmpty());
}

TEST_F(HubFaultsTest, AHubThatStaysDownIsUnavailableAndNothingElseBreaks) {
  hub_->AddCommit("test-org/down", "main", DemoHubFiles());
  Traffic traffic;
  hub_->FailNext(1000, 503);
  const absl::Status down = LoadFromHub("test-org/down");
  hub_->FailNext(0, 503);
  traffic.Stop();
  EXPECT_THAT(down, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_GT(traffic.ok(), 0);
  EXPECT_THAT(traffic.failures(), ::testing::IsEmpty());
  // Nothing half-made stays: the model is FAILED with the reason or gone, and loads once the hub
  // is back.
  ASSERT_TRUE(LoadFromHub("test-org/down").ok());
  EXPECT_EQ(GreedyTokens(*client_, "test-org/down").value_or(std::vector<int32_t>{}), *expected_);
}

// A hub model whose config.json is larger than a config may be (any user can name one) is
// refused from the listing, with the sizes, before a byte of that file is downloaded.
TEST_F(HubFaultsTest, AnOversizedConfigIsRefusedBeforeItIsDownloaded) {
  std::vector<testing::FakeFile> files = DemoHubFiles();
  for (testing::FakeFile& f : files) {
    if (f.path != "config.json") continue;
    std::ifstream in(f.disk_path);
    f.content.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    f.content.append(size_t{2} << 20, ' ');  // still valid JSON
    f.disk_path.clear();
  }
  hub_->AddCommit("test-org/big-config", "main", files);
  const absl::Status refused = LoadFromHub("test-org/big-config");
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("config.json is ")));
  EXPECT_THAT(std::string(refused.message()),
              ::testing::HasSubstr("bytes, more than the 1048576 bytes this file may hold"));
  EXPECT_EQ(hub_->body_bytes_sent("test-org/big-config", "config.json"), 0);
  EXPECT_EQ(GreedyTokens(*client_, "demo").value_or(std::vector<int32_t>{}), *expected_);
}

// An HTTP client that leaves while its catalog model loads on demand lets go of its request at
// once (not when the load ends or limits.load_wait passes): with limits.http_requests 1, the next
// request is served while the stalled load goes on.
TEST(OnDemandWaitTest, AnHttpClientThatLeavesWhileItsModelLoadsFreesItsRequest) {
  const std::string dir = testing::MakeTempDir();
  testing::FakeHub hub;
  hub.AddCommit("test-org/slow", "main", DemoHubFiles());
  hub.SetLatency(8000);  // each hub answer takes 8 s; the daemon's calls give up after 6
  setenv("HF_HUB_ETAG_TIMEOUT", "6", 1);
  setenv("HF_HUB_DOWNLOAD_TIMEOUT", "6", 1);
  testing::DaemonProcess daemon;
  ASSERT_TRUE(daemon
                  .Start(absl::StrCat("catalog: [{source: test-org/slow, name: slow}]\n",
                                      "hub: {cache_dir: ", dir, "/hub, endpoint: ", hub.endpoint(),
                                      "}\n", "limits: {http_requests: 1, load_wait: 120s}\n"),
                         dir)
                  .ok());
  const int leaving = testing::ConnectLoopback(daemon.http_port());
  ASSERT_GE(leaving, 0);
  const std::string body = R"({"model": "slow", "prompt": "x", "max_tokens": 1})";
  ASSERT_TRUE(testing::SendAll(
      leaving, absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: test\r\n",
                            "Content-Type: application/json\r\nContent-Length: ", body.size(),
                            "\r\n\r\n", body)));
  // Its request holds the one HTTP request slot while the load waits on the hub.
  auto models = [&] {
    const int fd = testing::ConnectLoopback(daemon.http_port());
    testing::SendAll(fd, "GET /v1/models HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    const std::string answer = testing::ReadUntilClosed(fd, std::chrono::seconds(10));
    close(fd);
    return answer.substr(0, 12);
  };
  // Looked for until 5 s after the request was sent (its load gives up at 6 s), so that a slow
  // machine has time to take the request in.
  const auto sent = std::chrono::steady_clock::now();
  std::string answer;
  while (answer != "HTTP/1.1 503" &&
         std::chrono::steady_clock::now() - sent < std::chrono::seconds(5)) {
    answer = models();
    if (answer != "HTTP/1.1 503") std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(answer, "HTTP/1.1 503");
  const auto left = std::chrono::steady_clock::now();
  close(leaving);
  // Served again at once, long before the daemon's first hub call gives up (6 s).
  for (int i = 0; i < 50 && answer != "HTTP/1.1 200"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    answer = models();
  }
  EXPECT_EQ(answer, "HTTP/1.1 200");
  EXPECT_LT(std::chrono::steady_clock::now() - left, std::chrono::seconds(5));
  hub.SetLatency(0);
  EXPECT_EQ(daemon.Terminate(), 0);
  unsetenv("HF_HUB_ETAG_TIMEOUT");
  unsetenv("HF_HUB_DOWNLOAD_TIMEOUT");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace df11
