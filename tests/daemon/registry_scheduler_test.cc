// The registry and the scheduler in one process on the CPU backend, under concurrent loads,
// requests and unloads past the memory budget (the ThreadSanitizer configuration of
// tools/test.sh runs this test): the accounted bytes never exceed the budget, every request of a
// model gives that model's greedy tokens or a refusal that says why, and nothing is left
// accounted once every model is unloaded. Also: a KV cache is made without the registry's lock.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/registry/registry.h"
#include "daemon/runtime/backends/cpu/cpu_backend.h"
#include "daemon/scheduler/scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_models.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;

constexpr int kModels = 3;

uint64_t WeightBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors") bytes += e.file_size();
  }
  return bytes;
}

registry::Registry::Options RegistryOptions(uint64_t budget) {
  return {.device = {},
          .device_description = "cpu",
          .budget = {.bytes = budget},
          .eviction = config::Eviction::kLru,
          .default_keep_alive_seconds = 0,
          .max_concurrent_loads = 3};
}

class RegistrySchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir());
    models_ = new std::vector<std::string>;
    for (int i = 0; i < kModels; ++i) {
      models_->push_back(testing::MakeTestModel(*dir_, absl::StrCat("m", i), "qwen3",
                                                /*df11=*/i % 2 == 1, 20 + i, testing::DemoDir()));
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete models_;
  }

  static std::string* dir_;
  static std::vector<std::string>* models_;
  runtime::CpuBackend backend_{runtime::CpuBackend::Options{.threads = 2}};
};

std::string* RegistrySchedulerTest::dir_ = nullptr;
std::vector<std::string>* RegistrySchedulerTest::models_ = nullptr;

TEST_F(RegistrySchedulerTest, KvCacheIsMadeWithoutTheRegistryLock) {
  constexpr uint64_t kBudget = 1 << 30, kBytes = 1 << 20;
  registry::Registry registry(RegistryOptions(kBudget), backend_, nullptr);
  const uint64_t free_before = registry.Memory().free();
  const absl::Status placed = registry.PlaceKvCache(kBytes, [&]() -> absl::Status {
    // Another thread reads the registry while this cache is made.
    std::future<registry::DeviceMemory> memory =
        std::async(std::launch::async, [&] { return registry.Memory(); });
    EXPECT_EQ(memory.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    // The bytes being placed are not yet in the figures, and not free for another cache.
    EXPECT_EQ(registry.Memory().free(), free_before);
    const uint64_t available = free_before - kBytes;
    const absl::Status too_big =
        registry.PlaceKvCache(available + 1, [] { return absl::OkStatus(); });
    EXPECT_TRUE(absl::IsResourceExhausted(too_big)) << too_big;
    EXPECT_THAT(std::string(too_big.message()), ::testing::HasSubstr(absl::StrCat(available)));
    EXPECT_TRUE(registry.PlaceKvCache(available, [] { return absl::OkStatus(); }).ok());
    return absl::OkStatus();
  });
  EXPECT_TRUE(placed.ok()) << placed;
  // Its bytes are free again once it is made (the callback kept nothing).
  EXPECT_EQ(registry.Memory().free(), free_before);
}

// A model whose config.json is over its cap (any user can name one through the hub) is refused
// before it is parsed, with the sizes, and listed as FAILED; the other models load.
TEST_F(RegistrySchedulerTest, OversizedConfigIsRefusedWithItsSize) {
  registry::Registry registry(RegistryOptions(uint64_t{1} << 30), backend_, nullptr);
  const std::string big = testing::MakeTestModel(*dir_, "big_config", "qwen3", /*df11=*/false, 7,
                                                 testing::DemoDir());
  const fs::path config = fs::path(big) / "config.json";
  std::string text;
  {
    std::ifstream in(config);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  text.append(size_t{2} << 20, ' ');  // still valid JSON
  std::ofstream(config, std::ios::trunc) << text;
  const absl::StatusOr<registry::ModelInfo> refused =
      registry.Load({.source = big, .name = "big"}, [](const registry::LoadProgress&) {
        return true;
      });
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr(absl::StrCat("config.json is ", text.size(),
                                                " bytes, more than the 1048576 bytes")));
  const std::vector<registry::ModelInfo> listed = registry.List();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].state, registry::ModelState::kFailed);
  EXPECT_EQ(listed[0].failure_reason, refused.status().message());
  const absl::StatusOr<registry::ModelInfo> other =
      registry.Load({.source = (*models_)[0], .name = "other"},
                    [](const registry::LoadProgress&) { return true; });
  EXPECT_TRUE(other.ok()) << other.status();
  const registry::ModelKey key{.owner = config::kSharedTenant, .name = "other"};
  EXPECT_TRUE(registry.BeginUnload(key).ok());
  registry.FinishUnload(key);
}

TEST_F(RegistrySchedulerTest, ConcurrentLoadsRequestsAndUnloadsKeepTheAccounts) {
  const uint64_t model_bytes = WeightBytes((*models_)[0]);
  // Two models and some KV cache.
  const uint64_t budget = model_bytes * 5 / 2;
  registry::Registry registry(RegistryOptions(budget), backend_, nullptr);
  scheduler::Scheduler scheduler({.queue_size = 16, .max_running = 4}, backend_, registry,
                                 nullptr);

  std::atomic<bool> stop{false};
  std::atomic<int> over_budget{0}, samples{0}, generated{0}, loaded{0};
  std::mutex mu;
  std::vector<std::string> unexpected;
  std::map<int, std::vector<int32_t>> tokens_of;  // the first OK request's tokens, by model
  auto fail = [&](std::string what) {
    std::lock_guard lock(mu);
    unexpected.push_back(std::move(what));
  };

  std::thread sampler([&] {
    while (!stop) {
      const registry::DeviceMemory m = registry.Memory();
      ++samples;
      if (m.used() > m.budget) ++over_budget;
    }
  });
  std::vector<std::thread> requests;
  for (int t = 0; t < 3; ++t) {
    requests.emplace_back([&, t] {
      for (int i = 0; !stop; ++i) {
        const int model = (t + i) % kModels;
        absl::StatusOr<registry::ModelHandle> handle =
            registry.Acquire({.owner = config::kSharedTenant, .name = absl::StrCat("m", model)});
        if (!handle.ok()) continue;  // not loaded, loading or unloading: the states say so
        runtime::GenerationRequest request;
        request.prompt = {1, 2, 3, 4 + model};
        request.sampling.temperature = 0;
        request.sampling.max_tokens = 8;
        request.sampling.ignore_eos = true;
        absl::StatusOr<std::shared_ptr<scheduler::Job>> job =
            scheduler.Submit(*std::move(handle), std::move(request));
        if (!job.ok()) {
          if (!absl::IsResourceExhausted(job.status())) fail(job.status().ToString());
          continue;
        }
        std::vector<int32_t> tokens;
        scheduler::Job::Update update;
        while ((*job)->Next(&update, absl::Seconds(60))) {
          for (const runtime::GeneratedToken& token : update.tokens) tokens.push_back(token.id);
          if (update.done) break;
        }
        if (!update.done) {
          fail("a request did not end in 60 s");
        } else if (update.status.ok()) {
          ++generated;
          std::lock_guard lock(mu);
          auto [it, first] = tokens_of.try_emplace(model, tokens);
          if (!first && it->second != tokens) {
            unexpected.push_back(absl::StrCat("model m", model, " gave other tokens"));
          }
        } else if (!absl::IsCancelled(update.status) &&
                   !absl::IsResourceExhausted(update.status)) {
          fail(update.status.ToString());
        }
      }
    });
  }
  std::vector<std::thread> loaders;
  for (int t = 0; t < 2; ++t) {
    loaders.emplace_back([&, t] {
      for (int round = 0; round < 30; ++round) {
        const int model = (t + round) % kModels;
        const registry::ModelKey key{.owner = config::kSharedTenant,
                                     .name = absl::StrCat("m", model)};
        absl::StatusOr<registry::ModelInfo> info = registry.Load(
            {.source = (*models_)[model], .name = key.name},
            [](const registry::LoadProgress&) { return true; });
        if (info.ok()) {
          ++loaded;
        } else if (!absl::IsResourceExhausted(info.status())) {
          fail(info.status().ToString());
        }
        if (round % 3 != 2) continue;
        // Every third round unloads what it loaded, cancelling its requests after 50 ms.
        absl::StatusOr<std::shared_ptr<const registry::ResidentModel>> unloading =
            registry.BeginUnload(key);
        if (!unloading.ok()) continue;  // already gone, or another thread's load or unload
        if (*unloading != nullptr) {
          scheduler.Drain(unloading->get(), absl::Milliseconds(50), /*cancel_now=*/false);
        }
        registry.FinishUnload(key);
      }
    });
  }
  for (std::thread& t : loaders) t.join();
  stop = true;
  for (std::thread& t : requests) t.join();
  sampler.join();

  EXPECT_THAT(unexpected, ::testing::IsEmpty());
  EXPECT_EQ(over_budget, 0);
  EXPECT_GT(samples, 0);
  EXPECT_GT(loaded, 0);
  EXPECT_GT(generated, 0);
  std::printf("%d loads, %d requests generated, %d memory samples\n", loaded.load(), generated.load(), samples.load());
  for (const registry::ModelInfo& m : registry.List()) {
    const registry::ModelKey key{.owner = m.owner, .name = m.name};
    absl::StatusOr<std::shared_ptr<const registry::ResidentModel>> unloading =
        registry.BeginUnload(key);
    ASSERT_TRUE(unloading.ok()) << unloading.status();
    if (*unloading != nullptr) scheduler.Drain(unloading->get(), absl::ZeroDuration(), true);
    registry.FinishUnload(key);
  }
  const registry::DeviceMemory m = registry.Memory();
  EXPECT_EQ(m.weights, 0u);
  EXPECT_EQ(m.kv_cache, 0u);
}

}  // namespace
}  // namespace df11
