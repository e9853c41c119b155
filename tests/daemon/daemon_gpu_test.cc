// df11d on a real GPU (label gpu; skipped without one): the demo model and synthetic DF11 and BF16
// models placed in cuda:0's arena with every byte accounted on the device and per model,
// EstimateModel exact, the driver's free bytes untouched by loads and unloads, generation from the
// GPU giving the demo model's greedy tokens, loads past the budget RESOURCE_EXHAUSTED
// with the numbers, unloads returning every byte, and df11ctl and /metrics showing the GPU.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/df11_client.h"
#include "codec/cuda/devices.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon/daemon_process.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_data_dir.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::df11::v1;
using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBudget = 256 * kMiB;
constexpr uint64_t kKvPool = 64 * kMiB;

std::string DemoDir() {
  const char* env = std::getenv("DF11_DEMO_DIR");
  return env != nullptr && *env != '\0' ? env : std::string(DF11_SOURCE_DIR) + "/models/demo";
}

uint64_t Weights(const v1::ModelInfo& m) {
  return m.bytes(0).df11_units() + m.bytes(0).passthrough();
}

class DaemonGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<cuda::DeviceInfo>> devices = cuda::ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    ASSERT_FALSE(devices->empty());  // gpu_test_main runs the tests only with a device
    root_ = testing::MakeTempDir();
    ASSERT_TRUE(daemon_
                    .Start(absl::StrCat("devices: [0]\ncpu_threads: 4\n",
                                        "memory: {budget: ", kBudget, ", kv_cache: ", kKvPool,
                                        ", eviction: none}\npreload:\n  - source: ", DemoDir(),
                                        "\n    name: demo\n    pin: true\n"),
                           root_)
                    .ok());
    client_ = *client::Df11Client::Connect(daemon_.address());
  }
  void TearDown() override {
    if (client_ != nullptr) {
      EXPECT_EQ(daemon_.Terminate(), 0);
    }
    if (!root_.empty()) fs::remove_all(root_);
  }

  v1::NodeStatus Status() { return *client_->GetNodeStatus(); }

  absl::StatusOr<v1::LoadModelProgress> Load(const std::string& dir, const std::string& name) {
    v1::LoadModelRequest load;
    load.set_source(dir);
    load.set_name(name);
    return client_->LoadModel(load, nullptr);
  }

  // The device's kinds add up, and its weights are the models'.
  static void ExpectAccounted(const v1::NodeStatus& s) {
    ASSERT_EQ(s.devices_size(), 1);
    const v1::DeviceStatus& d = s.devices(0);
    uint64_t weights = 0, kv = 0;
    for (const v1::ModelInfo& m : s.models()) {
      EXPECT_EQ(m.bytes(0).device(), "cuda:0");
      weights += Weights(m);
      kv += m.bytes(0).kv_cache_in_use();
    }
    EXPECT_EQ(d.weights(), weights);
    EXPECT_EQ(d.kv_cache(), kv);
    EXPECT_EQ(d.used(),
              d.weights() + d.scratch() + d.kv_cache() + d.kv_pool_free() + d.workspace());
    EXPECT_EQ(d.free(), d.budget() - d.used());
  }

  std::string root_;
  testing::DaemonProcess daemon_;
  std::unique_ptr<client::Df11Client> client_;
};

TEST_F(DaemonGpuTest, ModelsLiveInTheArenaWithEveryByteAccounted) {
  const v1::NodeStatus start = Status();
  ASSERT_EQ(start.devices_size(), 1);
  const v1::DeviceStatus& d = start.devices(0);
  EXPECT_EQ(d.device(), "cuda:0");
  EXPECT_FALSE(d.description().empty());
  EXPECT_EQ(d.arena(), kBudget);
  EXPECT_EQ(d.budget(), kBudget);
  EXPECT_GT(d.total(), kBudget);
  EXPECT_GT(d.scratch(), 0u);  // the demo model's blocks decode there
  EXPECT_EQ(d.kv_pool_free(), kKvPool);
  ExpectAccounted(start);
  const uint64_t driver_free = d.driver_free();

  // EstimateModel says exactly what the GPU holds.
  ASSERT_EQ(start.models_size(), 1);
  absl::StatusOr<v1::EstimateModelResponse> e = client_->EstimateModel(DemoDir());
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->total(), Weights(start.models(0)));
  EXPECT_EQ(e->df11_units(), start.models(0).bytes(0).df11_units());

  const std::string llama = testing::MakeTestModel(root_, "llama", "llama", false, 1, DemoDir());
  const std::string qwen2 = testing::MakeTestModel(root_, "qwen2", "qwen2", true, 2, DemoDir());
  for (const auto& [dir, name] : {std::pair{llama, "llama"}, std::pair{qwen2, "qwen2"}}) {
    absl::StatusOr<v1::LoadModelProgress> done = Load(dir, name);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->model().state(), v1::MODEL_STATE_READY);
    EXPECT_EQ(done->model().bytes(0).device(), "cuda:0");
  }
  const v1::NodeStatus loaded = Status();
  ExpectAccounted(loaded);
  EXPECT_EQ(loaded.models_size(), 3);
  // Loads take nothing from the driver: the arena was taken at start.
  EXPECT_EQ(loaded.devices(0).driver_free(), driver_free);

  // Generation from the GPU: the demo model's greedy tokens after "def " are transformers' (the
  // demo goldens, which the CPU backend gives too).
  std::ifstream in(testing::TestDataDir("demo") / "goldens.json");
  const nlohmann::json golden = nlohmann::json::parse(in)["cases"][0];
  ASSERT_EQ(golden["prompt"], "def ");
  v1::GenerateRequest generate;
  generate.set_model("demo");
  generate.set_text("def ");
  generate.set_max_tokens(static_cast<int32_t>(golden["greedy"].size()));
  generate.set_ignore_eos(true);
  generate.mutable_sampling()->set_temperature(0);
  std::vector<int32_t> tokens;
  const absl::Status generated = client_->Generate(generate, [&](const v1::GenerateResponse& r) {
    tokens.insert(tokens.end(), r.token_ids().begin(), r.token_ids().end());
    return true;
  });
  ASSERT_TRUE(generated.ok()) << generated;
  EXPECT_EQ(tokens, golden["greedy"].get<std::vector<int32_t>>());
  // The KV pool's pages went back when the request ended.
  EXPECT_EQ(Status().devices(0).kv_pool_free(), kKvPool);

  // Copies of qwen2 until the budget is full: RESOURCE_EXHAUSTED with the numbers.
  absl::Status full;
  std::vector<std::string> copies;
  for (int i = 0; i < 500 && full.ok(); ++i) {
    const std::string name = absl::StrCat("copy", i);
    full = Load(qwen2, name).status();
    if (full.ok()) copies.push_back(name);
  }
  EXPECT_THAT(full, StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("needs")));
  ExpectAccounted(Status());

  // Unloads return every byte to the arena.
  copies.push_back("llama");
  copies.push_back("qwen2");
  for (const std::string& name : copies) {
    v1::UnloadModelRequest unload;
    unload.set_name(name);
    unload.set_cancel_in_flight(true);
    ASSERT_TRUE(client_->UnloadModel(unload).ok()) << name;
  }
  const v1::NodeStatus after = Status();
  ExpectAccounted(after);
  // Everything but the forward pass's buffers (workspace), which stay from pass to pass.
  EXPECT_EQ(after.devices(0).weights(), start.devices(0).weights());
  EXPECT_EQ(after.devices(0).scratch(), start.devices(0).scratch());
  EXPECT_EQ(after.devices(0).kv_pool_free(), kKvPool);
  EXPECT_EQ(after.devices(0).used() - after.devices(0).workspace(),
            start.devices(0).used() - start.devices(0).workspace());
  EXPECT_EQ(after.devices(0).driver_free(), driver_free);

  // df11ctl and /metrics show the GPU.
  const std::string ctl =
      testing::MustRun(testing::Df11ctlBinary() + " --addr " + daemon_.address() + " status");
  EXPECT_THAT(ctl, HasSubstr("cuda:0: "));
  EXPECT_THAT(testing::HttpGet(daemon_.http_port(), "/metrics"),
              HasSubstr(absl::StrCat("df11_device_memory_bytes{device=\"cuda:0\",kind=\"arena\"} ",
                                     kBudget)));
}

}  // namespace
}  // namespace df11
