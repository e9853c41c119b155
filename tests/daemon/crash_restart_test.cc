// df11d killed with SIGKILL in the middle of a hub download and of traffic, then started again on
// the same configuration and hub cache: clients of the dead process get UNAVAILABLE (never other
// codes or wrong tokens), the preloads come back, the download resumes from what the first process
// had written, and the cache ends complete and verified (no partial file left, an offline load of
// it gives the right tokens).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
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
#include "tests/testing/status_matchers.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;

using testing::DemoDir;
using testing::DemoHubFiles;
using testing::GreedyTokens;

std::vector<std::string> PartialFiles(const std::string& cache) {
  std::vector<std::string> partial;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(cache, ec)) {
    if (e.path().extension() == ".incomplete") partial.push_back(e.path().string());
  }
  return partial;
}

TEST(CrashRestartTest, KilledMidDownloadAndTrafficItComesBackConsistent) {
  const std::string dir = testing::MakeTempDir();
  testing::FakeHub hub;
  hub.AddCommit("test-org/killed", "main", DemoHubFiles());
  const std::string config =
      absl::StrCat("preload: [{source: ", DemoDir(), ", name: demo, pin: true}]\n",
                   "hub: {cache_dir: ", dir, "/hub, endpoint: ", hub.endpoint(), "}\n");

  testing::DaemonProcess first;
  ASSERT_TRUE(first.Start(config, dir).ok());
  std::unique_ptr<client::Df11Client> c = *client::Df11Client::Connect(first.address());
  const absl::StatusOr<std::vector<int32_t>> expected = GreedyTokens(*c, "demo");
  ASSERT_TRUE(expected.ok()) << expected.status();

  // A slow download (about 8 s), and requests one after another, both cut by the kill.
  hub.SetThrottle(1 << 20);
  absl::Status load_status;
  std::thread load([&] {
    v1::LoadModelRequest request;
    request.set_source("test-org/killed");
    load_status = c->LoadModel(request, nullptr).status();
  });
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::vector<std::string> unexpected;
  std::thread traffic([&] {
    std::unique_ptr<client::Df11Client> t = *client::Df11Client::Connect(first.address());
    while (!stop) {
      absl::StatusOr<std::vector<int32_t>> tokens = GreedyTokens(*t, "demo");
      if (tokens.ok() && *tokens == *expected) {
        ++ok;
      } else if (!tokens.ok() && absl::IsUnavailable(tokens.status())) {
        continue;  // the process is gone
      } else {
        unexpected.push_back(tokens.ok() ? "other tokens" : tokens.status().ToString());
      }
    }
  });
  // Kill once part of the shards is on disk.
  for (int i = 0; i < 100 && PartialFiles(dir + "/hub").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_FALSE(PartialFiles(dir + "/hub").empty());
  ASSERT_EQ(kill(first.pid(), SIGKILL), 0);
  load.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  traffic.join();
  EXPECT_EQ(first.Wait(), -1);  // killed
  EXPECT_THAT(load_status, testing::StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_GT(ok, 0);
  EXPECT_THAT(unexpected, ::testing::IsEmpty());

  // Again, on the same configuration and cache.
  hub.SetThrottle(0);
  hub.ClearRequests();
  testing::DaemonProcess second;
  ASSERT_TRUE(second.Start(config, dir).ok());
  c = *client::Df11Client::Connect(second.address());
  EXPECT_EQ(GreedyTokens(*c, "demo").value_or(std::vector<int32_t>{}),
            *expected);  // preloaded again
  v1::LoadModelRequest request;
  request.set_source("test-org/killed");
  const absl::Status loaded = c->LoadModel(request, nullptr).status();
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ(GreedyTokens(*c, "test-org/killed").value_or(std::vector<int32_t>{}), *expected);
  // The partial files were continued, not fetched again from their start.
  int resumed = 0;
  for (const testing::FakeHub::Request& r : hub.requests()) {
    if (r.server == "cdn" && r.range.rfind("bytes=", 0) == 0 && r.range != "bytes=0-") ++resumed;
  }
  EXPECT_GE(resumed, 1);
  EXPECT_THAT(PartialFiles(dir + "/hub"), ::testing::IsEmpty());
  EXPECT_EQ(second.Terminate(), 0);

  // The cache alone (offline) serves the model.
  testing::DaemonProcess offline;
  ASSERT_TRUE(offline
                  .Start(absl::StrCat("preload: [{source: test-org/killed, name: cached}]\n",
                                      "hub: {cache_dir: ", dir, "/hub, offline: true}\n"),
                         dir)
                  .ok());
  c = *client::Df11Client::Connect(offline.address());
  EXPECT_EQ(GreedyTokens(*c, "cached").value_or(std::vector<int32_t>{}), *expected);
  EXPECT_EQ(offline.Terminate(), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace df11
