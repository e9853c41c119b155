// df11d end to end: the real daemon on 127.0.0.1 with three models of three architectures
// (the DF11 demo model, a BF16 Llama and a DF11 Qwen2 made by `df11 synth` / `df11 compress`),
// driven through libdf11client, df11ctl and raw gRPC, and compared with `df11 generate`; and the
// engine goldens' other architectures, compared with transformers.
#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/df11_client.h"
#include "codec/interleaved.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/daemon/daemon_process.h"
#include "tests/hub/fake_hub.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_data_dir.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::df11::v1;
using ::df11::testing::DaemonProcess;
using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

const std::string kDemo = std::string(DF11_SOURCE_DIR) + "/models/demo";

std::string Tool() { return std::getenv("DF11_TOOL"); }

// A copy of `model_dir` in a Hugging Face hub cache at `cache` as `huggingface_hub` lays it out:
// blobs/, snapshots/{commit}/ of relative symlinks to them, and refs/main naming the commit.
void MakeHubCache(const std::string& cache, const std::string& repo_id, const std::string& commit,
                  const std::string& model_dir) {
  std::string folder = "models--" + repo_id;
  folder.replace(folder.find('/'), 1, "--");
  const fs::path repo = fs::path(cache) / folder;
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / commit);
  fs::create_directories(repo / "refs");
  int blob = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(model_dir)) {
    const std::string name = absl::StrCat("0000000000blob", blob++);
    fs::copy_file(e.path(), repo / "blobs" / name);
    fs::create_symlink(fs::path("../../blobs") / name,
                       repo / "snapshots" / commit / e.path().filename());
  }
  std::ofstream(repo / "refs" / "main") << commit;
}

// A BF16 Llama whose tied embedding has `vocab` rows of zeros, stored sparsely: a model of
// gigabytes that costs no disk and no time to make, for loads that must last a while.
std::string MakeSparseModel(const std::string& root, int64_t vocab) {
  const std::string dir = root + "/sparse";
  testing::MustRun(absl::StrCat(Tool(), " synth ", dir, " --arch llama --layers 1 --hidden 64",
                                " --intermediate 128 --heads 2 --kv-heads 1 --vocab 256 --tied"));
  const std::string weights = dir + "/model.safetensors";
  uint64_t header_size = 0;
  nlohmann::ordered_json header;
  {
    std::ifstream in(weights, std::ios::binary);
    in.read(reinterpret_cast<char*>(&header_size), 8);
    std::string text(header_size, '\0');
    in.read(text.data(), static_cast<std::streamsize>(header_size));
    header = nlohmann::ordered_json::parse(text);
  }
  header["model.embed_tokens.weight"]["shape"][0] = vocab;
  // Data offsets again, in the file's order, for the new size.
  std::vector<std::pair<uint64_t, std::string>> order;
  for (const auto& [name, entry] : header.items()) {
    if (name != "__metadata__") order.emplace_back(entry["data_offsets"][0].get<uint64_t>(), name);
  }
  std::sort(order.begin(), order.end());
  uint64_t offset = 0;
  for (const auto& [begin, name] : order) {
    uint64_t bytes = 2;
    for (const auto& d : header[name]["shape"]) bytes *= d.get<uint64_t>();
    header[name]["data_offsets"] = {offset, offset + bytes};
    offset += bytes;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  const uint64_t size = text.size();
  {
    std::ofstream out(weights, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&size), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  fs::resize_file(weights, 8 + size + offset);  // the data: zeros, as a hole
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  config["vocab_size"] = vocab;
  std::ofstream(dir + "/config.json", std::ios::trunc) << config.dump(2);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(kDemo + "/" + file, dir + "/" + file, fs::copy_options::overwrite_existing);
  }
  return dir;
}

constexpr char kHubRepo[] = "test-org/demo-df11";
constexpr char kHubCommit[] = "4f1c2a9e7b3d5f60718293a4b5c6d7e8f9a0b1c2";
// The demo model on the fake hub that the test daemon downloads from.
constexpr char kFakeHubRepo[] = "test-org/demo-hub";

std::string FileBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Every file of `dir` as fake hub files (safetensors as LFS, served from disk).
std::vector<testing::FakeFile> HubFiles(const std::string& dir) {
  std::vector<testing::FakeFile> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    files.push_back({.path = name,
                     .content = "",
                     .disk_path = e.path().string(),
                     .lfs = e.path().extension() == ".safetensors"});
  }
  return files;
}

struct Generated {
  absl::Status status;
  std::vector<int32_t> token_ids;
  std::string text;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  v1::Usage usage;
  v1::Timings timings;
  int messages = 0;
};

Generated Generate(client::Df11Client& client, const v1::GenerateRequest& request,
                   const std::function<bool(const v1::GenerateResponse&)>& each = nullptr) {
  Generated g;
  g.status = client.Generate(request, [&](const v1::GenerateResponse& r) {
    ++g.messages;
    g.text += r.text();
    g.token_ids.insert(g.token_ids.end(), r.token_ids().begin(), r.token_ids().end());
    if (r.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      g.finish_reason = r.finish_reason();
      g.usage = r.usage();
      g.timings = r.timings();
    }
    return each == nullptr || each(r);
  });
  return g;
}

v1::GenerateRequest TextRequest(const std::string& model, const std::string& prompt, int seed,
                                int max_tokens) {
  v1::GenerateRequest r;
  r.set_model(model);
  r.set_text(prompt);
  r.mutable_sampling()->set_temperature(0.8f);
  r.mutable_sampling()->set_top_k(40);
  r.mutable_sampling()->set_seed(seed);
  r.set_max_tokens(max_tokens);
  return r;
}

// What `df11 generate` makes offline for the same model, prompt and sampling.
nlohmann::json Offline(const std::string& dir, const std::string& prompt, int seed,
                       int max_tokens) {
  const std::string out = testing::MustRun(absl::StrCat(
      Tool(), " generate ", dir, " --prompt '", prompt, "' --temperature 0.8 --top-k 40 --seed ",
      seed, " --max-tokens ", max_tokens, " --json"));
  return nlohmann::json::parse(out.substr(out.find('{')));
}

uint64_t Weights(const v1::ModelInfo& m) {
  return m.bytes(0).df11_units() + m.bytes(0).passthrough();
}

std::string BaseConfig(const std::string& extra) {
  return absl::StrCat(R"(devices: [cpu]
cpu_threads: 2
preload:
  - source: )",
                      kDemo, R"(
    name: demo
    pin: true
limits:
  max_prompt_tokens: 64
  max_tokens: 1024
  default_max_tokens: 16
  queue_size: 64
shutdown:
  drain: 20s
)",
                      extra);
}

class DaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(testing::MakeTempDir());
    llama_ = new std::string(testing::MakeTestModel(*root_, "llama", "llama", false, 3, kDemo));
    qwen2_ = new std::string(testing::MakeTestModel(*root_, "qwen2", "qwen2", true, 4, kDemo));
    MakeHubCache(*root_ + "/hub", kHubRepo, kHubCommit, kDemo);
    fake_hub_ = new testing::FakeHub();
    fake_hub_commit_ = new std::string(fake_hub_->AddCommit(kFakeHubRepo, "main", HubFiles(kDemo)));
    daemon_ = new DaemonProcess();
    const absl::Status started =
        daemon_->Start(BaseConfig(absl::StrCat("hub:\n  cache_dir: ", *root_,
                                               "/hub\n  endpoint: ", fake_hub_->endpoint(), "\n")),
                       *root_);
    ASSERT_TRUE(started.ok()) << started;
    client_ = client::Df11Client::Connect(daemon_->address())->release();
    for (const auto& [name, dir] : {std::pair{"llama", *llama_}, std::pair{"qwen2", *qwen2_}}) {
      v1::LoadModelRequest load;
      load.set_source(dir);
      load.set_name(name);
      absl::StatusOr<v1::LoadModelProgress> done = client_->LoadModel(load, nullptr);
      ASSERT_TRUE(done.ok()) << done.status();
      ASSERT_EQ(done->model().state(), v1::MODEL_STATE_READY);
    }
  }
  static void TearDownTestSuite() {
    delete client_;
    EXPECT_EQ(daemon_->Terminate(), 0);
    delete daemon_;
    delete fake_hub_;
    fs::remove_all(*root_);
  }

  static std::string* root_;
  static std::string* llama_;
  static std::string* qwen2_;
  static DaemonProcess* daemon_;
  static client::Df11Client* client_;
  static testing::FakeHub* fake_hub_;
  static std::string* fake_hub_commit_;
};

std::string* DaemonTest::root_;
testing::FakeHub* DaemonTest::fake_hub_;
std::string* DaemonTest::fake_hub_commit_;
std::string* DaemonTest::llama_;
std::string* DaemonTest::qwen2_;
DaemonProcess* DaemonTest::daemon_;
client::Df11Client* DaemonTest::client_;

TEST_F(DaemonTest, HealthAndReflectionAnswer) {
  EXPECT_EQ(testing::HealthStatus(daemon_->address()), 1);
  const std::string services = testing::ReflectedServices(daemon_->address());
  EXPECT_THAT(services, HasSubstr("df11.v1.ModelHost"));
  EXPECT_THAT(services, HasSubstr("grpc.health.v1.Health"));
  // The same over HTTP for probes that speak it; a route asked with another method is 405.
  httplib::Client http("127.0.0.1", daemon_->http_port());
  const httplib::Result health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  const httplib::Result ready = http.Get("/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(ready->body, R"({"status":"ready"})");
  const httplib::Result wrong = http.Post("/v1/models", "{}", "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->get_header_value("Allow"), "GET");
  EXPECT_THAT(wrong->body, HasSubstr("method_not_allowed"));
  const httplib::Result get_completion = http.Get("/v1/completions");
  ASSERT_TRUE(get_completion);
  EXPECT_EQ(get_completion->status, 405);
  EXPECT_EQ(get_completion->get_header_value("Allow"), "POST");
  const httplib::Result model = http.Get("/v1/models/demo");
  ASSERT_TRUE(model);
  EXPECT_EQ(model->status, 200);
  EXPECT_THAT(model->body, HasSubstr(R"("id":"demo")"));
  EXPECT_EQ(http.Get("/v1/models/nothing")->status, 404);
  // An id may come percent-encoded (as clients send hub ids such as Qwen%2FQwen3-8B).
  const httplib::Result encoded = http.Get("/v1/models/de%6Do");
  ASSERT_TRUE(encoded);
  EXPECT_EQ(encoded->status, 200);
  EXPECT_EQ(http.Get("/nothing")->status, 404);
}

TEST_F(DaemonTest, ConcurrentStreamsAcrossModelsMatchOfflineGeneration) {
  const std::vector<std::pair<std::string, std::string>> models = {
      {"demo", kDemo}, {"llama", *llama_}, {"qwen2", *qwen2_}};
  const std::vector<std::string> prompts = {
      "def main(", "import os", "class Foo:", "The quick brown fox jumps over the lazy dog"};
  constexpr int kStreams = 32, kTokens = 12;
  std::vector<Generated> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      const auto& [name, dir] = models[i % models.size()];
      std::string prompt = prompts[i % prompts.size()];
      // The shell in Offline() turns "\n" into a newline for df11 generate; do the same here.
      for (size_t at; (at = prompt.find("\\n")) != std::string::npos;) prompt.replace(at, 2, "\n");
      results[i] = Generate(*client_, TextRequest(name, prompt, 100 + i, kTokens));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    const auto& [name, dir] = models[i % models.size()];
    SCOPED_TRACE(absl::StrCat("stream ", i, " on ", name));
    ASSERT_TRUE(results[i].status.ok()) << results[i].status;
    const nlohmann::json expected = Offline(dir, prompts[i % prompts.size()], 100 + i, kTokens);
    EXPECT_EQ(results[i].token_ids, expected["token_ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(results[i].text, expected["text"].get<std::string>());
    EXPECT_EQ(results[i].usage.completion_tokens(), static_cast<int>(results[i].token_ids.size()));
    EXPECT_EQ(results[i].usage.prompt_tokens(), expected["prompt_tokens"].get<int>());
    EXPECT_GT(results[i].timings.total_seconds(), 0);
  }
  // The engine switched models while serving them.
  EXPECT_THAT(testing::HttpGet(daemon_->http_port(), "/metrics"),
              HasSubstr("df11_model_swaps_total{device=\"cpu\"}"));
}

// Every architecture of the engine goldens (tests/data/engine: Mistral, Gemma 2, Gemma 3 text and
// multimodal, Phi-3) served by df11d from its DF11 directory, written by `df11 compress`: the
// greedy tokens transformers gave. The fixtures have no tokenizer, so the test gives each a
// byte-fallback tokenizer.json covering its vocabulary and sends token ids.
TEST_F(DaemonTest, ServesEveryArchitectureOfTheEngineGoldens) {
  std::ifstream in(testing::TestDataDir("engine") / "goldens.json");
  const nlohmann::json goldens = nlohmann::json::parse(in)["models"];
  for (const char* name : {"mistral", "gemma2", "gemma3", "gemma3_mm", "phi3"}) {
    SCOPED_TRACE(name);
    const fs::path bf16 = fs::path(*root_) / absl::StrCat("engine_", name);
    const fs::path df11 = fs::path(*root_) / absl::StrCat("engine_", name, "_df11");
    fs::copy(testing::TestDataDir("engine") / name, bf16);
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
      vocab[hex] = b;
    }
    for (int id = 256; id < 320; ++id) vocab[absl::StrCat("t", id)] = id;
    const nlohmann::json tokenizer = {
        {"version", "1.0"},
        {"added_tokens", nlohmann::json::array()},
        {"normalizer", nullptr},
        {"pre_tokenizer", nullptr},
        {"post_processor", nullptr},
        {"decoder",
         {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}},
        {"model",
         {{"type", "BPE"},
          {"byte_fallback", true},
          {"fuse_unk", false},
          {"unk_token", nullptr},
          {"vocab", vocab},
          {"merges", nlohmann::json::array()}}}};
    std::ofstream(bf16 / "tokenizer.json") << tokenizer.dump();
    testing::MustRun(absl::StrCat(Tool(), " compress ", bf16.string(), " ", df11.string()));
    v1::LoadModelRequest load;
    load.set_source(df11.string());
    load.set_name(name);
    absl::StatusOr<v1::LoadModelProgress> done = client_->LoadModel(load, nullptr);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_TRUE(done->model().df11());
    const nlohmann::json& golden = goldens[name][1];
    v1::GenerateRequest r;
    r.set_model(name);
    for (int32_t id : golden["prompt"]) r.mutable_token_ids()->add_ids(id);
    r.set_max_tokens(static_cast<int32_t>(golden["greedy"].size()));
    r.set_ignore_eos(true);
    r.mutable_sampling()->set_temperature(0);
    const Generated g = Generate(*client_, r);
    ASSERT_TRUE(g.status.ok()) << g.status;
    EXPECT_EQ(g.token_ids, golden["greedy"].get<std::vector<int32_t>>());
    v1::UnloadModelRequest unload;
    unload.set_name(name);
    EXPECT_TRUE(client_->UnloadModel(unload).ok());
  }
}

// The node's status while a long request of "llama" runs, once it runs and holds its KV cache (a
// request counts as running a moment before its cache is taken); `during` is called then too.
// The request is cancelled before this returns.
v1::NodeStatus StatusDuringALongRequest(client::Df11Client& client,
                                        const std::function<void()>& during = {}) {
  std::atomic<bool> stop{false};
  std::thread runner([&] {
    v1::GenerateRequest r = TextRequest("llama", "import os", 1, 1000);
    r.set_ignore_eos(true);
    Generate(client, r, [&](const v1::GenerateResponse&) { return !stop.load(); });
  });
  auto holds_kv = [](const v1::NodeStatus& status) {
    for (const v1::ModelInfo& m : status.models()) {
      if (m.bytes_size() > 0 && m.bytes(0).kv_cache_in_use() > 0) return true;
    }
    return false;
  };
  v1::NodeStatus status;
  for (int i = 0; i < 500; ++i) {
    status = *client.GetNodeStatus();
    if (status.running_requests() == 1 && holds_kv(status)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (during) during();
  stop = true;
  runner.join();
  return status;
}

TEST_F(DaemonTest, EveryByteIsAccounted) {
  // While a long request runs, its KV cache shows on its model and on the device.
  const v1::NodeStatus status = StatusDuringALongRequest(*client_);
  ASSERT_EQ(status.running_requests(), 1);
  ASSERT_EQ(status.devices_size(), 1);
  const v1::DeviceStatus& d = status.devices(0);
  uint64_t weights = 0, kv = 0;
  for (const v1::ModelInfo& m : status.models()) {
    weights += Weights(m);
    kv += m.bytes(0).kv_cache_in_use();
    EXPECT_EQ(m.bytes(0).total(), Weights(m) + m.bytes(0).kv_cache_in_use());
  }
  EXPECT_EQ(d.weights(), weights);
  EXPECT_EQ(d.kv_cache(), kv);
  EXPECT_GT(kv, 0u);
  EXPECT_EQ(d.used(), d.weights() + d.scratch() + d.kv_cache() + d.workspace());
  EXPECT_EQ(d.free(), d.budget() - d.used());
  // Each model's bytes are what EstimateModel said before loading.
  for (const v1::ModelInfo& m : status.models()) {
    absl::StatusOr<v1::EstimateModelResponse> e = client_->EstimateModel(m.source());
    ASSERT_TRUE(e.ok()) << e.status();
    // The CPU backend re-encodes DF11 units where the CPU has AVX-512, into no more bytes.
    if (codec::InterleavedUnit::Supported()) {
      EXPECT_LE(m.bytes(0).df11_units(), e->df11_units()) << m.name();
    } else {
      EXPECT_EQ(e->df11_units(), m.bytes(0).df11_units()) << m.name();
    }
    EXPECT_EQ(e->passthrough(), m.bytes(0).passthrough()) << m.name();
    EXPECT_EQ(e->df11(), m.df11());
  }
}

TEST_F(DaemonTest, LoadingAResidentModelReturnsItsState) {
  v1::LoadModelRequest load;
  load.set_source(kDemo);
  load.set_name("demo");
  absl::StatusOr<v1::LoadModelProgress> again = client_->LoadModel(load, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->model().state(), v1::MODEL_STATE_READY);
  EXPECT_TRUE(again->model().pinned());
  load.set_source(*llama_);  // the same name for another source
  EXPECT_THAT(client_->LoadModel(load, nullptr).status(),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already serves")));
}

TEST_F(DaemonTest, BadRequestsGetTheRightCodesAndTheDaemonKeepsServing) {
  v1::GenerateRequest r = TextRequest("nope", "hi", 1, 4);
  EXPECT_THAT(Generate(*client_, r).status,
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
  r = TextRequest("demo", "hi", 1, 4);
  r.mutable_sampling()->set_top_p(2);
  EXPECT_THAT(Generate(*client_, r).status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top_p")));
  std::string words;
  for (int i = 0; i < 100; ++i) words += " word" + std::to_string(i);
  r = TextRequest("demo", words, 1, 4);
  EXPECT_THAT(Generate(*client_, r).status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_prompt_tokens")));
  r = TextRequest("demo", "hi", 1, 5000);
  EXPECT_THAT(Generate(*client_, r).status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_tokens")));
  r = TextRequest("demo", "hi", 1, 4);
  r.mutable_token_ids()->add_ids(99999);
  EXPECT_THAT(Generate(*client_, r).status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("token_ids")));
  r.clear_token_ids();
  r.clear_text();
  EXPECT_THAT(Generate(*client_, r).status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("prompt")));

  // A corrupt model directory: a DF11 unit file cut short.
  const std::string corrupt = *root_ + "/corrupt";
  fs::copy(kDemo, corrupt);
  fs::resize_file(corrupt + "/model_layers_1.safetensors",
                  fs::file_size(corrupt + "/model_layers_1.safetensors") / 2);
  v1::LoadModelRequest load;
  load.set_source(corrupt);
  EXPECT_THAT(client_->LoadModel(load, nullptr).status(), StatusIs(absl::StatusCode::kDataLoss));
  absl::StatusOr<v1::ModelInfo> failed = client_->GetModel("corrupt");
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->state(), v1::MODEL_STATE_FAILED);
  EXPECT_FALSE(failed->failure_reason().empty());
  EXPECT_THAT(Generate(*client_, TextRequest("corrupt", "hi", 1, 4)).status,
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("FAILED")));
  v1::UnloadModelRequest unload;
  unload.set_name("corrupt");
  EXPECT_TRUE(client_->UnloadModel(unload).ok());
  load.set_source(*root_ + "/does-not-exist");
  EXPECT_THAT(client_->LoadModel(load, nullptr).status(), StatusIs(absl::StatusCode::kNotFound));
  load.set_source("some-org/not-on-the-hub@main");
  EXPECT_THAT(client_->LoadModel(load, nullptr).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("repository not found")));

  // Still serving.
  const Generated ok = Generate(*client_, TextRequest("demo", "def f(", 7, 4));
  EXPECT_TRUE(ok.status.ok()) << ok.status;
  EXPECT_EQ(ok.token_ids.size(), 4u);
  EXPECT_EQ(testing::HealthStatus(daemon_->address()), 1);
}

TEST_F(DaemonTest, UnloadDuringTrafficEndsRequestsCleanlyAndReturnsTheMemory) {
  v1::LoadModelRequest load;
  load.set_source(*llama_);
  load.set_name("llama-b");
  ASSERT_TRUE(client_->LoadModel(load, nullptr).ok());
  const uint64_t weights_before = client_->GetNodeStatus()->devices(0).weights();
  const uint64_t model_bytes = Weights(*client_->GetModel("llama-b"));

  constexpr int kStreams = 4;
  std::vector<Generated> results(kStreams);
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      v1::GenerateRequest r = TextRequest("llama-b", "import os", i, 1000);
      r.set_ignore_eos(true);
      bool first = true;
      results[i] = Generate(*client_, r, [&](const v1::GenerateResponse&) {
        if (first) ++started;
        first = false;
        return true;
      });
    });
  }
  for (int i = 0; i < 1000 && started < kStreams; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  v1::UnloadModelRequest unload;
  unload.set_name("llama-b");
  unload.set_cancel_in_flight(true);
  absl::StatusOr<v1::UnloadModelResponse> unloaded = client_->UnloadModel(unload);
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(unloaded.ok()) << unloaded.status();
  EXPECT_EQ(unloaded->bytes_freed(), model_bytes);
  int cancelled = 0;
  for (const Generated& g : results) {
    if (!g.status.ok()) {
      EXPECT_THAT(g.status, StatusIs(absl::StatusCode::kCancelled, HasSubstr("unloaded")));
      ++cancelled;
    } else {
      EXPECT_EQ(g.finish_reason, v1::FINISH_REASON_LENGTH);
    }
  }
  EXPECT_EQ(cancelled, unloaded->requests_cancelled());
  EXPECT_GT(cancelled, 0);
  const v1::NodeStatus after = *client_->GetNodeStatus();
  EXPECT_EQ(after.devices(0).weights(), weights_before - model_bytes);
  EXPECT_EQ(after.devices(0).kv_cache(), 0u);
  EXPECT_THAT(client_->GetModel("llama-b").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Generate(*client_, TextRequest("llama-b", "hi", 1, 4)).status,
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(DaemonTest, ClientCancellationStopsTheWork) {
  v1::GenerateRequest r = TextRequest("qwen2", "import os", 1, 1000);
  r.set_ignore_eos(true);
  int messages = 0;
  const Generated g =
      Generate(*client_, r, [&](const v1::GenerateResponse&) { return ++messages < 3; });
  EXPECT_THAT(g.status, StatusIs(absl::StatusCode::kCancelled));
  v1::NodeStatus status;
  for (int i = 0; i < 500; ++i) {
    status = *client_->GetNodeStatus();
    if (status.running_requests() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status.running_requests(), 0);
  EXPECT_EQ(status.devices(0).kv_cache(), 0u);
}

TEST_F(DaemonTest, AHotModelDoesNotStarveAnother) {
  // Eight long generations keep qwen2 busy; a short request for llama must get turns between
  // their steps and end long before them.
  constexpr int kHot = 8, kHotTokens = 400;
  std::array<std::atomic<int>, kHot> tokens{};
  std::atomic<bool> stop{false};
  std::vector<std::thread> hot;
  for (int i = 0; i < kHot; ++i) {
    hot.emplace_back([&, i] {
      v1::GenerateRequest r = TextRequest("qwen2", "import os", i, kHotTokens);
      r.set_ignore_eos(true);
      Generate(*client_, r, [&](const v1::GenerateResponse& m) {
        tokens[i] += m.token_ids_size();
        return !stop.load();
      });
    });
  }
  for (int i = 0; i < 1000 && client_->GetNodeStatus()->running_requests() < kHot; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const Generated cold = Generate(*client_, TextRequest("llama", "def f(", 2, 4));
  std::vector<int> hot_tokens_then;
  for (const std::atomic<int>& t : tokens) hot_tokens_then.push_back(t.load());
  stop = true;
  for (std::thread& t : hot) t.join();
  ASSERT_TRUE(cold.status.ok()) << cold.status;
  EXPECT_EQ(cold.token_ids.size(), 4u);
  for (int n : hot_tokens_then) EXPECT_LT(n, kHotTokens);
}

TEST_F(DaemonTest, LoadsAHubIdFromTheSharedCacheWithoutNetwork) {
  // An offline daemon on the cache a huggingface_hub-layout copy was put in.
  const std::string dir = testing::MakeTempDir();
  DaemonProcess offline;
  ASSERT_TRUE(offline
                  .Start(BaseConfig(absl::StrCat("hub:\n  cache_dir: ", *root_,
                                                 "/hub\n  endpoint: http://127.0.0.1:1\n"
                                                 "  offline: true\n")),
                         dir)
                  .ok());
  std::unique_ptr<client::Df11Client> client = *client::Df11Client::Connect(offline.address());
  v1::LoadModelRequest load;
  load.set_source(kHubRepo);
  absl::StatusOr<v1::LoadModelProgress> done = client->LoadModel(load, nullptr);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->model().state(), v1::MODEL_STATE_READY);
  EXPECT_EQ(done->model().name(), kHubRepo);
  EXPECT_EQ(done->model().resolved_revision(), kHubCommit);
  // The same weights as the demo model: the same tokens.
  const Generated hub = Generate(*client, TextRequest(kHubRepo, "def main(", 9, 6));
  const Generated local = Generate(*client_, TextRequest("demo", "def main(", 9, 6));
  ASSERT_TRUE(hub.status.ok()) << hub.status;
  EXPECT_EQ(hub.token_ids, local.token_ids);

  load.set_source(absl::StrCat(kHubRepo, "@", kHubCommit));
  load.set_name("by-commit");
  done = client->LoadModel(load, nullptr);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->model().resolved_revision(), kHubCommit);
  load.set_source(absl::StrCat(kHubRepo, "@v2"));
  load.set_name("by-tag");
  EXPECT_THAT(client->LoadModel(load, nullptr).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("v2")));
  for (const char* name : {kHubRepo, "by-commit"}) {
    v1::UnloadModelRequest unload;
    unload.set_name(name);
    EXPECT_TRUE(client->UnloadModel(unload).ok()) << name;
  }
  EXPECT_EQ(offline.Terminate(), 0);
  fs::remove_all(dir);
}

TEST_F(DaemonTest, LoadsAModelFromTheHubWhileItDownloads) {
  // Slow enough that placing the first shards overlaps downloading the others. The throttle is
  // per connection and the shards download side by side: the 1 MB shards arrive after ~0.5 s and
  // the 2 MB one after ~1 s, so several 100 ms progress messages fall between.
  fake_hub_->SetThrottle(2 << 20);
  v1::LoadModelRequest load;
  load.set_source(kFakeHubRepo);
  std::vector<v1::LoadModelProgress> messages;
  absl::StatusOr<v1::LoadModelProgress> done =
      client_->LoadModel(load, [&](const v1::LoadModelProgress& p) { messages.push_back(p); });
  fake_hub_->SetThrottle(0);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->model().state(), v1::MODEL_STATE_READY);
  EXPECT_EQ(done->model().resolved_revision(), *fake_hub_commit_);
  // Some shard was placed while another was still downloading.
  bool overlapped = false;
  for (const v1::LoadModelProgress& p : messages) {
    bool placing = false, downloading = false;
    for (const v1::LoadFileProgress& f : p.files()) {
      placing = placing || f.bytes_placed() > 0;
      downloading = downloading || f.bytes_downloaded() < f.size();
    }
    overlapped = overlapped || (placing && downloading);
  }
  EXPECT_TRUE(overlapped) << messages.size() << " progress messages";
  // The same weights as the local demo model: the same tokens.
  const Generated hub = Generate(*client_, TextRequest(kFakeHubRepo, "def main(", 9, 6));
  const Generated local = Generate(*client_, TextRequest("demo", "def main(", 9, 6));
  ASSERT_TRUE(hub.status.ok()) << hub.status;
  EXPECT_EQ(hub.token_ids, local.token_ids);
  v1::UnloadModelRequest unload;
  unload.set_name(kFakeHubRepo);
  EXPECT_TRUE(client_->UnloadModel(unload).ok());

  // df11ctl load, now from the cache: nothing is downloaded again.
  fake_hub_->ClearRequests();
  const std::string ctl =
      absl::StrCat(testing::Df11ctlBinary(), " --addr ", daemon_->address(), " ");
  testing::MustRun(absl::StrCat(ctl, "load ", kFakeHubRepo, " --name via-ctl"));
  for (const testing::FakeHub::Request& r : fake_hub_->requests()) {
    EXPECT_NE(r.server, "cdn") << r.path;
  }
  EXPECT_EQ(Generate(*client_, TextRequest("via-ctl", "def main(", 9, 6)).token_ids,
            local.token_ids);
  unload.set_name("via-ctl");
  EXPECT_TRUE(client_->UnloadModel(unload).ok());
}

TEST_F(DaemonTest, HubErrorsReachTheClientWithTheirCodes) {
  fake_hub_->SetGated("test-org/gated", "hf_secret");
  fake_hub_->AddCommit("test-org/gated", "main", HubFiles(kDemo));
  v1::LoadModelRequest load;
  load.set_source("test-org/gated");
  EXPECT_THAT(client_->LoadModel(load, nullptr).status(),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("gated")));
  load.set_source(absl::StrCat(kFakeHubRepo, "@no-such-branch"));
  EXPECT_THAT(client_->LoadModel(load, nullptr).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no-such-branch")));
  // A corrupt shard: DATA_LOSS, and nothing of it enters the cache.
  fake_hub_->AddCommit("test-org/corrupt", "main", HubFiles(kDemo));
  fake_hub_->ServeCorrupt("test-org/corrupt", "model_layers_2.safetensors",
                          std::string(1066805, 'x'));
  load.set_source("test-org/corrupt");
  EXPECT_THAT(client_->LoadModel(load, nullptr).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("does not match its etag")));
  std::error_code ec;
  for (const auto& e :
       fs::recursive_directory_iterator(*root_ + "/hub/models--test-org--corrupt/snapshots", ec)) {
    EXPECT_NE(e.path().filename(), "model_layers_2.safetensors");
  }
  // Still serving.
  EXPECT_TRUE(Generate(*client_, TextRequest("demo", "def f(", 7, 2)).status.ok());
}

TEST_F(DaemonTest, AKilledDaemonResumesItsDownloadAfterRestart) {
  const std::string dir = testing::MakeTempDir();
  const std::string cache = dir + "/hub";
  const std::string config =
      BaseConfig(absl::StrCat("hub:\n  cache_dir: ", cache, "\n  endpoint: ", fake_hub_->endpoint(),
                              "\n  max_connections: 1\n"));
  fake_hub_->AddCommit("test-org/resume", "main", HubFiles(kDemo));
  fake_hub_->SetThrottle(1 << 20);
  auto daemon = std::make_unique<DaemonProcess>();
  ASSERT_TRUE(daemon->Start(config, dir).ok());
  std::thread loader([address = daemon->address()] {
    auto client = *client::Df11Client::Connect(address);
    v1::LoadModelRequest load;
    load.set_source("test-org/resume");
    (void)client->LoadModel(load, nullptr);  // ends when the daemon dies
  });
  // Wait until the first shard is partly downloaded, then kill -9.
  const fs::path blobs = fs::path(cache) / "models--test-org--resume" / "blobs";
  bool partial = false;
  for (int i = 0; i < 200 && !partial; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(blobs, ec)) {
      partial = partial || (e.path().extension() == ".incomplete" && fs::file_size(e.path()) > 0);
    }
  }
  ASSERT_TRUE(partial);
  ::kill(daemon->pid(), SIGKILL);
  loader.join();
  daemon.reset();
  fake_hub_->SetThrottle(0);

  daemon = std::make_unique<DaemonProcess>();
  ASSERT_TRUE(daemon->Start(config, dir).ok());
  auto client = *client::Df11Client::Connect(daemon->address());
  v1::LoadModelRequest load;
  load.set_source("test-org/resume");
  absl::StatusOr<v1::LoadModelProgress> done = client->LoadModel(load, nullptr);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->model().state(), v1::MODEL_STATE_READY);
  // Every shard was sent about once: the partial one was resumed, not restarted.
  int64_t sent = 0, size = 0;
  for (const auto& e : fs::directory_iterator(kDemo)) {
    if (e.path().extension() != ".safetensors") continue;
    sent += fake_hub_->body_bytes_sent("test-org/resume", e.path().filename().string());
    size += static_cast<int64_t>(fs::file_size(e.path()));
    // The cached blob is the file itself.
    EXPECT_TRUE(FileBytes(fs::path(cache) / "models--test-org--resume" / "snapshots" /
                          done->model().resolved_revision() / e.path().filename()) ==
                FileBytes(e.path()))
        << e.path();
  }
  EXPECT_LT(sent, size + (1 << 20)) << "sent " << sent << " of " << size;
  for (const auto& e : fs::directory_iterator(blobs)) {
    EXPECT_NE(e.path().extension(), ".incomplete") << e.path();
  }
  EXPECT_EQ(daemon->Terminate(), 0);
  fs::remove_all(dir);
}

// A LoadModel of `dir` as "big" (a 1 GiB sparse model), read until it places its files: the load
// goes on while the test looks at the daemon. Every message until then says LOADING.
struct SlowLoad {
  std::unique_ptr<v1::ModelHost::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::LoadModelProgress>> reader;
  v1::LoadModelProgress progress;
};

std::unique_ptr<SlowLoad> StartSlowLoad(const std::string& address, const std::string& dir) {
  auto load = std::make_unique<SlowLoad>();
  load->stub =
      v1::ModelHost::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  v1::LoadModelRequest request;
  request.set_source(dir);
  request.set_name("big");
  load->reader = load->stub->LoadModel(&load->context, request);
  do {
    if (!load->reader->Read(&load->progress)) {
      ADD_FAILURE() << "the load ended before placing its files";
      break;
    }
    EXPECT_EQ(load->progress.model().state(), v1::MODEL_STATE_LOADING);
  } while (load->progress.phase() != v1::LOAD_PHASE_PLACING);
  return load;
}

TEST_F(DaemonTest, CancellingALoadFreesWhatItPlaced) {
  // 1 GiB of embedding to read: the load is still running when the cancellation arrives.
  const std::string big = MakeSparseModel(*root_, int64_t{1} << 23);
  const uint64_t weights_before = client_->GetNodeStatus()->devices(0).weights();
  // Once it reads its files, its estimate is reserved and it is listed as LOADING.
  std::unique_ptr<SlowLoad> slow = StartSlowLoad(daemon_->address(), big);
  if (HasFailure()) return;
  grpc::ClientContext& context = slow->context;
  const std::unique_ptr<grpc::ClientReader<v1::LoadModelProgress>>& reader = slow->reader;
  v1::LoadModelProgress& progress = slow->progress;
  EXPECT_EQ(progress.bytes_total(), fs::file_size(big + "/model.safetensors"));
  absl::StatusOr<v1::ModelInfo> loading = client_->GetModel("big");
  ASSERT_TRUE(loading.ok()) << loading.status();
  EXPECT_EQ(loading->state(), v1::MODEL_STATE_LOADING);
  EXPECT_GE(Weights(*loading), uint64_t{1} << 30);
  EXPECT_EQ(client_->GetNodeStatus()->devices(0).weights(), weights_before + Weights(*loading));
  context.TryCancel();
  while (reader->Read(&progress)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  absl::Status gone;
  for (int i = 0; i < 500; ++i) {
    gone = client_->GetModel("big").status();
    if (!gone.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_THAT(gone, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(client_->GetNodeStatus()->devices(0).weights(), weights_before);
  EXPECT_TRUE(Generate(*client_, TextRequest("demo", "x", 1, 2)).status.ok());
}

TEST_F(DaemonTest, DaemonBenchRunsEveryScenarioWithoutErrors) {
  const std::string out = testing::MustRun(absl::StrCat(
      Tool(), " daemon-bench --addr ", daemon_->address(), " --model ", kDemo,
      " --prompt-tokens 8 --tokens 4 --swap-requests 4 --rounds 1 --clients 2 --seconds 0.3",
      " --idle-streams 40 --connections 4 --hold 0.4 --threads 2 --daemon-pid ", daemon_->pid(),
      " --http 127.0.0.1:", daemon_->http_port(), " --chunked-mib 32 --slow-connections 20",
      " --trickle 0.1 --slow-seconds 0.5 --only swap,overhead,rps,idle,http,chunked,slow --json"));
  const nlohmann::json bench = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_GT(bench["swap"]["ratio"].get<double>(), 0);
  EXPECT_GT(bench["overhead"]["grpc_ms_per_token"].get<double>(), 0);
  EXPECT_GT(bench["rps"]["requests"].get<int>(), 0);
  EXPECT_EQ(bench["rps"]["errors"], 0);
  EXPECT_EQ(bench["idle"]["opened"], 40);
  EXPECT_EQ(bench["idle"]["ended_by_cancellation"], 40);
  EXPECT_EQ(bench["idle"]["errors"], 0);
  EXPECT_EQ(bench["idle"]["request_errors_during_hold"], 0);
  // Watch streams are callback streams: holding 40 costs the daemon no thread each.
  EXPECT_LT(bench["idle"]["daemon_held"]["threads"].get<int>() -
                bench["idle"]["daemon_before"]["threads"].get<int>(),
            20);
  EXPECT_GT(bench["http"]["http_ms_per_token"].get<double>(), 0);
  // A 32 MiB chunked body is refused once limits.max_request_bytes (4 MiB) have come in.
  EXPECT_EQ(bench["chunked"]["answers_by_status"], nlohmann::json({{"413", 1}}));
  EXPECT_LT(bench["chunked"]["bytes_sent_before_answer_p50"].get<double>(), 32 << 20);
  // Requests are served while 20 clients trickle their headers, each still held.
  EXPECT_EQ(bench["slow"]["held_at_end"], 20);
  EXPECT_EQ(bench["slow"]["with_slow_errors"], 0);
  EXPECT_GT(bench["slow"]["requests_with_slow"].get<int>(), 0);
  // Its models are gone afterwards.
  EXPECT_THAT(client_->GetModel("bench-a").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(client_->GetModel("bench-b").status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(DaemonTest, Df11ctlDrivesTheDaemon) {
  const std::string ctl =
      absl::StrCat(testing::Df11ctlBinary(), " --addr ", daemon_->address(), " ");
  const nlohmann::json list = nlohmann::json::parse(testing::MustRun(ctl + "list --json"));
  std::vector<std::string> names;
  for (const auto& m : list["models"]) names.push_back(m["name"]);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"demo", "llama", "qwen2"}));

  const std::string out =
      testing::MustRun(ctl +
                       "generate demo --prompt 'def main(' --temperature 0.8 --top-k 40 --seed 5 "
                       "--max-tokens 8 --json");
  const nlohmann::json generated = nlohmann::json::parse(out.substr(out.find('{')));
  const nlohmann::json offline = Offline(kDemo, "def main(", 5, 8);
  EXPECT_EQ(generated["token_ids"], offline["token_ids"]);
  EXPECT_EQ(generated["text"], offline["text"]);
  EXPECT_EQ(generated["finish_reason"], offline["finish_reason"]);

  const nlohmann::json estimate =
      nlohmann::json::parse(testing::MustRun(ctl + "estimate " + kDemo + " --json"));
  EXPECT_EQ(estimate["architecture"], "Qwen3ForCausalLM");
  const nlohmann::json status = nlohmann::json::parse(testing::MustRun(ctl + "status --json"));
  EXPECT_EQ(status["devices"][0]["device"], "cpu");
  testing::MustRun(ctl + "load " + *llama_ + " --name llama-c");
  testing::MustRun(ctl + "unload llama-c");
  std::string missing;
  EXPECT_EQ(testing::RunCommand(ctl + "unload llama-c 2>&1", &missing), 1);
  EXPECT_THAT(missing, HasSubstr("NOT_FOUND"));
}

// The labels of info gauge `name` in a Prometheus text scrape, and its value, as the endpoint
// picker reads them; empty when absent.
std::map<std::string, std::string> InfoLabels(const std::string& metrics, const std::string& name,
                                              double* value = nullptr) {
  std::map<std::string, std::string> labels;
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + "{", 0) != 0) continue;
    const std::regex label(R"re((\w+)="((?:[^"\\]|\\.)*)")re");
    const size_t close = line.rfind('}');
    const std::string inside = line.substr(name.size() + 1, close - name.size() - 1);
    for (auto it = std::sregex_iterator(inside.begin(), inside.end(), label);
         it != std::sregex_iterator(); ++it) {
      labels[(*it)[1]] = (*it)[2];
    }
    if (value != nullptr) *value = std::stod(line.substr(close + 2));
    break;
  }
  return labels;
}

// While a model loads it is a waiting adapter; resident models are running ones, within max_lora.
TEST_F(DaemonTest, RouterGaugesShowResidentAndLoadingModels) {
  std::unique_ptr<SlowLoad> slow =
      StartSlowLoad(daemon_->address(), MakeSparseModel(*root_, int64_t{1} << 23));
  if (HasFailure()) return;
  grpc::ClientContext& context = slow->context;
  const std::unique_ptr<grpc::ClientReader<v1::LoadModelProgress>>& reader = slow->reader;
  v1::LoadModelProgress& progress = slow->progress;
  double loading_since = 0;
  const std::map<std::string, std::string> loading =
      InfoLabels(testing::HttpGet(daemon_->http_port(), "/metrics"), "vllm:lora_requests_info",
                 &loading_since);
  context.TryCancel();
  while (reader->Read(&progress)) {
  }
  EXPECT_EQ(loading.at("waiting_lora_adapters"), "big");
  const std::vector<std::string> running = absl::StrSplit(loading.at("running_lora_adapters"), ',');
  for (const char* name : {"demo", "llama", "qwen2"}) {
    EXPECT_THAT(running, ::testing::Contains(name));
  }
  EXPECT_GE(std::stoll(loading.at("max_lora")), static_cast<int64_t>(running.size()) + 1);
  EXPECT_GT(loading_since, 1.7e9);  // a Unix time
  const std::map<std::string, std::string> cache =
      InfoLabels(testing::HttpGet(daemon_->http_port(), "/metrics"), "vllm:cache_config_info");
  EXPECT_GE(std::stoll(cache.at("block_size")), 1);
  EXPECT_GT(std::stoll(cache.at("num_gpu_blocks")), 0);
  // Once the load is gone, nothing waits, and the value says when that changed.
  double since = 0;
  std::map<std::string, std::string> after;
  for (int i = 0; i < 500; ++i) {
    after = InfoLabels(testing::HttpGet(daemon_->http_port(), "/metrics"),
                       "vllm:lora_requests_info", &since);
    if (after.at("waiting_lora_adapters").empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(after.at("waiting_lora_adapters"), "");
  EXPECT_GE(since, loading_since);
}

// max_lora is the node's capacity in models: KV caches taken and given back by requests do not
// change it, so its series stays one series.
TEST_F(DaemonTest, MaxLoraStaysWhileRequestsHoldKvCaches) {
  const std::string before =
      InfoLabels(testing::HttpGet(daemon_->http_port(), "/metrics"), "vllm:lora_requests_info")
          .at("max_lora");
  std::string during;
  const v1::NodeStatus status = StatusDuringALongRequest(*client_, [&] {
    during =
        InfoLabels(testing::HttpGet(daemon_->http_port(), "/metrics"), "vllm:lora_requests_info")
            .at("max_lora");
  });
  ASSERT_EQ(status.running_requests(), 1);
  ASSERT_GT(status.devices(0).kv_cache(), 0u);
  EXPECT_EQ(during, before);
  EXPECT_GE(std::stoll(before), status.models_size());
}

TEST_F(DaemonTest, MetricsShowMemoryRequestsAndRouterGauges) {
  ASSERT_TRUE(Generate(*client_, TextRequest("demo", "import", 3, 4)).status.ok());
  const std::string metrics = testing::HttpGet(daemon_->http_port(), "/metrics");
  for (const char* expected :
       {"df11_model_resident_bytes{model=\"demo\",tenant=\"shared\",device=\"cpu\",kind=\"df11_"
        "units\"}",
        "df11_device_memory_bytes{device=\"cpu\",kind=\"budget\"}",
        "df11_requests_total{model=\"demo\",outcome=\"ok\",tenant=\"shared\"}",
        "df11_generated_tokens_total{model=\"demo\",tenant=\"shared\"}",
        "df11_time_to_first_token_seconds_bucket", "df11_time_per_output_token_seconds_bucket",
        "df11_model_loads_total{outcome=\"ok\"}",
        "df11_requests_waiting{model=\"demo\",tenant=\"shared\"}", "vllm:num_requests_waiting",
        "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:cache_config_info{",
        "vllm:lora_requests_info{"}) {
    EXPECT_THAT(metrics, HasSubstr(expected));
  }
  // promtool's lint of a live scrape. The one problem it may report is the ':' in vLLM's names,
  // which the routers read as they are; df11d's own names pass.
  std::string which;
  if (testing::RunCommand("command -v promtool", &which) != 0) {
    GTEST_SKIP() << "promtool (Debian package prometheus, tools/install-deps.sh) is missing";
  }
  const std::string scrape = *root_ + "/scrape.txt";
  std::ofstream(scrape) << metrics;
  std::string problems;
  const int code = testing::RunCommand("promtool check metrics < " + scrape + " 2>&1", &problems);
  EXPECT_THAT(code, ::testing::AnyOf(0, 3)) << problems;
  std::istringstream lines(problems);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    EXPECT_THAT(line, ::testing::StartsWith("vllm:")) << problems;
    EXPECT_THAT(line, HasSubstr("metric names should not contain ':'")) << problems;
  }
}

// A daemon whose budget holds the demo model and one more.
class DaemonBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir();
    llama_ = testing::MakeTestModel(root_, "llama", "llama", false, 3, kDemo);
    qwen2_ = testing::MakeTestModel(root_, "qwen2", "qwen2", true, 4, kDemo);
  }
  void TearDown() override { fs::remove_all(root_); }
  uint64_t Size(const std::string& dir) {
    uint64_t total = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".safetensors") total += fs::file_size(e.path());
    }
    return total;
  }
  std::string Config(const std::string& eviction) {
    // Headers make files a little larger than their tensors: the budget holds demo + llama, and
    // not qwen2 on top.
    const uint64_t budget = Size(kDemo) + Size(llama_) + 64 * 1024;
    return BaseConfig(absl::StrCat("memory:\n  budget: ", budget, "\n  eviction: ", eviction,
                                   "\n  keep_alive: 0s\n"));
  }
  v1::LoadModelRequest Load(const std::string& dir, const std::string& name) {
    v1::LoadModelRequest load;
    load.set_source(dir);
    load.set_name(name);
    return load;
  }
  std::string root_, llama_, qwen2_;
};

TEST_F(DaemonBudgetTest, LruEvictsTheIdleUnpinnedModel) {
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(Config("lru"), root_).ok());
  auto client = *client::Df11Client::Connect(daemon.address());
  ASSERT_TRUE(client->LoadModel(Load(llama_, "llama"), nullptr).ok());
  absl::StatusOr<v1::LoadModelProgress> qwen2 = client->LoadModel(Load(qwen2_, "qwen2"), nullptr);
  ASSERT_TRUE(qwen2.ok()) << qwen2.status();
  EXPECT_THAT(client->GetModel("llama").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(client->GetModel("demo").ok());  // pinned
  EXPECT_THAT(testing::HttpGet(daemon.http_port(), "/metrics"),
              HasSubstr("df11_model_evictions_total{model=\"llama\",tenant=\"shared\"} 1"));
  EXPECT_EQ(daemon.Terminate(), 0);
  // And in the audit log.
  std::ifstream log(root_ + "/df11d.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr(R"("audit":"eviction")"));
  EXPECT_THAT(text.str(),
              HasSubstr(R"("model":"llama","outcome":"OK","message":"room for qwen2"})"));
}

TEST_F(DaemonBudgetTest, WithoutEvictionAnOverBudgetLoadFailsWithTheNumbers) {
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(Config("none"), root_).ok());
  auto client = *client::Df11Client::Connect(daemon.address());
  ASSERT_TRUE(client->LoadModel(Load(llama_, "llama"), nullptr).ok());
  EXPECT_THAT(
      client->LoadModel(Load(qwen2_, "qwen2"), nullptr).status(),
      StatusIs(absl::StatusCode::kResourceExhausted,
               ::testing::AllOf(HasSubstr("needs"), HasSubstr("free"), HasSubstr("evictable"))));
  EXPECT_TRUE(client->GetModel("llama").ok());
  EXPECT_THAT(client->GetModel("qwen2").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(daemon.Terminate(), 0);
}

// A GPU the machine does not have (or a build without CUDA) stops the start with exit 1 and the
// reason, before any port is opened.
TEST(DaemonDeviceTest, AMissingGpuStopsTheStartWithTheReason) {
  const std::string root = testing::MakeTempDir();
  std::ofstream(root + "/config.yaml") << "devices: [\"cuda:1023\"]\npreload: []\n";
  std::string out;
  const int code = testing::RunCommand(
      absl::StrCat(testing::Df11dBinary(), " --config ", root, "/config.yaml --listen 127.0.0.1:0",
                   " --http-listen 127.0.0.1:0 2>&1"),
      &out);
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("devices: cuda:1023"));
  fs::remove_all(root);
}

// Options take their value as --option VALUE or --option=VALUE; a bad command line exits 2.
TEST(DaemonCommandLineTest, ValuesInlineOrNextAndBadLinesExitTwo) {
  const std::string root = testing::MakeTempDir();
  std::ofstream(root + "/config.yaml") << "preload: []\nlisten: {grpc: 127.0.0.1:7999}\n";
  std::string out;
  EXPECT_EQ(testing::RunCommand(absl::StrCat(testing::Df11dBinary(), " --config=", root,
                                             "/config.yaml --print-config 2>&1"),
                                &out),
            0);
  EXPECT_THAT(out, HasSubstr("grpc: 127.0.0.1:7999"));
  for (const char* bad : {"--config=", "--bogus=1", "--print-config=yes", "--listen"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(testing::RunCommand(absl::StrCat(testing::Df11dBinary(), " ", bad, " 2>&1"), &out),
              2);
    EXPECT_THAT(out, HasSubstr("Try 'df11d --help'"));
  }
  testing::RunCommand(absl::StrCat(testing::Df11dBinary(), " --bogus=1 2>&1"), &out);
  EXPECT_THAT(out, HasSubstr("unknown argument --bogus"));
  fs::remove_all(root);
}

TEST(DaemonShutdownTest, SigtermDrainsInFlightStreamsAndExitsZero) {
  const std::string root = testing::MakeTempDir();
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(BaseConfig(""), root).ok());
  auto client = *client::Df11Client::Connect(daemon.address());
  // A watch that would otherwise send its next status in an hour ends at the signal.
  absl::Status watch_end;
  std::atomic<bool> watching{false};
  std::thread watcher([&] {
    v1::WatchNodeStatusRequest watch;
    watch.set_interval_seconds(3600);
    watch_end = client->WatchNodeStatus(watch, [&](const v1::NodeStatus&) {
      watching = true;
      return true;
    });
  });
  while (!watching) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  v1::GenerateRequest r = TextRequest("demo", "def main(", 1, 600);
  r.set_ignore_eos(true);
  bool signalled = false;
  const Generated g = Generate(*client, r, [&](const v1::GenerateResponse&) {
    if (!signalled) daemon.SendTerm();  // after the first token: the stream is in flight
    signalled = true;
    return true;
  });
  EXPECT_TRUE(g.status.ok()) << g.status;
  EXPECT_EQ(g.token_ids.size(), 600u);
  EXPECT_EQ(g.finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(daemon.Wait(), 0);
  watcher.join();
  EXPECT_TRUE(watch_end.ok()) << watch_end;
  fs::remove_all(root);
}

}  // namespace
}  // namespace df11
