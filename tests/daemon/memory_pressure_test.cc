// Memory pressure: six models, each about 40 % of the memory budget, loaded all at once, in ten
// rounds, while requests run on whichever are resident (their KV cache counts too). A sampler
// reads the node's accounted bytes as fast as the daemon answers: they never exceed the budget.
// Each load completes or is refused with RESOURCE_EXHAUSTED giving the numbers; each request
// completes, or is refused the same way, or finds its model gone (NOT_FOUND) or still loading or
// unloading (FAILED_PRECONDITION).
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/df11_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/daemon_process.h"
#include "tests/daemon/demo_hub.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;

uint64_t WeightBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors") bytes += e.file_size();
  }
  return bytes;
}

TEST(MemoryPressureTest, ConcurrentLoadsAndRequestsNeverExceedTheBudget) {
  constexpr int kModels = 6;
  const std::string dir = testing::MakeTempDir();
  std::vector<std::string> models;
  for (int i = 0; i < kModels; ++i) {
    models.push_back(testing::MakeTestModel(dir, absl::StrCat("m", i), "qwen3", /*df11=*/false,
                                            10 + i, testing::DemoDir()));
  }
  const uint64_t model_bytes = WeightBytes(models[0]);
  const uint64_t budget = model_bytes * 5 / 2;  // two models and some KV cache
  testing::DaemonProcess daemon;
  ASSERT_TRUE(
      daemon
          .Start(absl::StrCat("memory: {budget: ", budget, ", eviction: lru, keep_alive: 0s}\n",
                              "limits: {max_concurrent_loads: 6}\n"),
                 dir)
          .ok());
  std::unique_ptr<client::Df11Client> control = *client::Df11Client::Connect(daemon.address());

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> used_max{0};
  std::atomic<int> samples{0}, over_budget{0};
  std::thread sampler([&] {
    std::unique_ptr<client::Df11Client> c = *client::Df11Client::Connect(daemon.address());
    while (!stop) {
      absl::StatusOr<v1::NodeStatus> status = c->GetNodeStatus();
      if (!status.ok() || status->devices().empty()) continue;
      const uint64_t used = status->devices(0).used();
      ++samples;
      if (used > status->devices(0).budget()) ++over_budget;
      used_max = std::max<uint64_t>(used_max, used);
    }
  });
  std::vector<std::string> unexpected;
  std::mutex mu;
  auto expect_allowed = [&](const absl::Status& s, bool request) {
    // A request may also race its model's load or unload: FAILED_PRECONDITION says which.
    const bool raced =
        absl::IsFailedPrecondition(s) && (absl::StrContains(s.message(), " is LOADING") ||
                                          absl::StrContains(s.message(), " is UNLOADING"));
    if (s.ok() || absl::IsResourceExhausted(s) || (request && (absl::IsNotFound(s) || raced))) {
      return;
    }
    std::lock_guard lock(mu);
    unexpected.push_back(s.ToString());
  };
  std::atomic<int> loaded{0}, refused{0}, generated{0};
  std::vector<std::thread> traffic;
  for (int t = 0; t < 4; ++t) {
    traffic.emplace_back([&, t] {
      std::unique_ptr<client::Df11Client> c = *client::Df11Client::Connect(daemon.address());
      for (int i = 0; !stop; ++i) {
        v1::GenerateRequest r;
        r.set_model(absl::StrCat("m", (t + i) % kModels));
        r.set_text("def main(");
        r.set_max_tokens(64);
        r.set_ignore_eos(true);
        const absl::Status s = c->Generate(r, [](const v1::GenerateResponse&) { return true; },
                                           {.timeout = absl::Seconds(60)});
        if (s.ok()) ++generated;
        expect_allowed(s, /*request=*/true);
      }
    });
  }
  for (int round = 0; round < 10; ++round) {
    std::vector<std::thread> loads;
    for (int i = 0; i < kModels; ++i) {
      loads.emplace_back([&, i] {
        std::unique_ptr<client::Df11Client> c = *client::Df11Client::Connect(daemon.address());
        v1::LoadModelRequest load;
        load.set_source(models[i]);
        load.set_name(absl::StrCat("m", i));
        const absl::Status s =
            c->LoadModel(load, nullptr, {.timeout = absl::Seconds(120)}).status();
        if (s.ok()) ++loaded;
        if (absl::IsResourceExhausted(s)) {
          ++refused;
          std::lock_guard lock(mu);
          // The refusal explains itself with the numbers.
          if (s.message().find(absl::StrCat(budget)) == std::string::npos) {
            unexpected.push_back(absl::StrCat("refusal without the budget: ", s.ToString()));
          }
        }
        expect_allowed(s, /*request=*/false);
      });
    }
    for (std::thread& t : loads) t.join();
  }
  stop = true;
  for (std::thread& t : traffic) t.join();
  sampler.join();

  EXPECT_EQ(over_budget, 0) << "max accounted " << used_max << " of " << budget;
  EXPECT_GT(samples, 20);
  EXPECT_LE(used_max, budget);
  EXPECT_GT(loaded, 0);
  EXPECT_GT(refused + loaded, 0);
  EXPECT_THAT(unexpected, ::testing::IsEmpty());
  EXPECT_EQ(daemon.Terminate(), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace df11
