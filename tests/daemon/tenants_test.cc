// Tenants, tried by breaking them: a user token sees, uses and unloads only its own tenant's models
// and the shared ones (another tenant's model is NOT_FOUND, under the same name too, on gRPC, HTTP
// and /metrics); each tenant's quotas on models, bytes, running requests and rate give
// RESOURCE_EXHAUSTED / HTTP 429 with the numbers and an audit line; and eviction for one tenant's
// load takes another tenant's idle model only while that tenant holds more than its fair share.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/df11_client.h"
#include "daemon/server/auth.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/daemon/daemon_process.h"
#include "tests/testing/status_matchers.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

std::string DemoDir() { return (fs::path(DF11_SOURCE_DIR) / "models" / "demo").string(); }

uint64_t DemoBytes() {
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(DemoDir())) {
    if (e.path().extension() == ".safetensors") total += fs::file_size(e.path());
  }
  return total;
}

// A user token of each tenant is "df11_" + the tenant; ops is an admin.
void WriteTokens(const std::string& path, const std::string& quotas) {
  std::ofstream out(path);
  out << "tokens:\n";
  for (const char* tenant : {"team-a", "team-b", "team-q", "team-bytes", "team-r", "team-s"}) {
    out << "  - {name: " << tenant
        << "-token, sha256: " << server::Sha256Hex(absl::StrCat("df11_", tenant))
        << ", tenant: " << tenant << ", role: user}\n";
  }
  out << "  - {name: ops, sha256: " << server::Sha256Hex("df11_ops")
      << ", tenant: ops, role: admin}\n"
      << quotas;
}

v1::LoadModelRequest Load(const std::string& name) {
  v1::LoadModelRequest load;
  load.set_source(DemoDir());
  load.set_name(name);
  return load;
}

v1::GenerateRequest Generate(const std::string& model, int max_tokens) {
  v1::GenerateRequest generate;
  generate.set_model(model);
  generate.set_text("def ");
  generate.set_max_tokens(max_tokens);
  generate.set_ignore_eos(true);
  return generate;
}

absl::Status RunToEnd(client::Df11Client& c, const v1::GenerateRequest& request) {
  return c.Generate(request, [](const v1::GenerateResponse&) { return true; });
}

std::unique_ptr<client::Df11Client> ConnectAs(const std::string& address,
                                              const std::string& tenant) {
  client::ConnectOptions options;
  options.token = "df11_" + tenant;
  return *client::Df11Client::Connect(address, options);
}

std::vector<nlohmann::json> AuditEvents(const std::string& log_path) {
  std::ifstream in(log_path);
  std::vector<nlohmann::json> events;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("{\"audit\":", 0) == 0) events.push_back(nlohmann::json::parse(line));
  }
  return events;
}

class TenantsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir());
    WriteTokens(*dir_ + "/tokens.yaml",
                absl::StrCat("tenants:\n", "  team-q: {max_models: 1}\n",
                             "  team-bytes: {max_resident_bytes: ", DemoBytes() / 2, "}\n",
                             "  team-r: {requests_per_minute: 2}\n",
                             "  team-s: {max_running_requests: 1}\n"));
    daemon_ = new testing::DaemonProcess();
    const absl::Status started = daemon_->Start(
        absl::StrCat("preload: [{source: ", DemoDir(), ", name: demo, pin: true}]\n",
                     "catalog: [{source: ", DemoDir(), ", name: demo-catalog}]\n",
                     "auth: {tokens_file: ", *dir_, "/tokens.yaml, metrics: token}\n",
                     "hub: {offline: true, cache_dir: ", *dir_, "/hub}\n"),
        *dir_);
    ASSERT_TRUE(started.ok()) << started;
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->Terminate(), 0);
    delete daemon_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  static std::unique_ptr<client::Df11Client> As(const std::string& tenant) {
    return ConnectAs(daemon_->address(), tenant);
  }
  static httplib::Headers Bearer(const std::string& tenant) {
    return {{"Authorization", "Bearer df11_" + tenant}};
  }

  static std::string* dir_;
  static testing::DaemonProcess* daemon_;
};
std::string* TenantsTest::dir_;
testing::DaemonProcess* TenantsTest::daemon_;

TEST_F(TenantsTest, ATenantSeesUsesAndUnloadsOnlyItsOwnModelsAndTheSharedOnes) {
  auto a = As("team-a"), b = As("team-b"), ops = As("ops");
  // The same name in two tenants: two models.
  ASSERT_TRUE(a->LoadModel(Load("chat"), nullptr).ok());
  ASSERT_TRUE(b->LoadModel(Load("chat"), nullptr).ok());
  ASSERT_TRUE(b->LoadModel(Load("b-secret"), nullptr).ok());

  absl::StatusOr<v1::ModelInfo> chat = a->GetModel("chat");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->owner(), "team-a");
  EXPECT_EQ(a->GetModel("demo")->owner(), "shared");
  absl::StatusOr<v1::ListModelsResponse> listed = a->ListModels();
  ASSERT_TRUE(listed.ok());
  std::vector<std::string> seen;
  for (const v1::ModelInfo& m : listed->models()) seen.push_back(m.name() + "@" + m.owner());
  EXPECT_THAT(seen,
              ::testing::UnorderedElementsAre("chat@team-a", "demo@shared", "demo-catalog@shared"));

  // b's models do not exist for a: not by name, not by owner, not in errors or the node status.
  v1::GetModelRequest get;
  get.set_name("b-secret");
  for (const char* owner : {"", "team-b"}) {
    get.set_owner(owner);
    absl::StatusOr<v1::ModelInfo> info = a->GetModel(get);
    EXPECT_THAT(info.status(), StatusIs(absl::StatusCode::kNotFound, Not(HasSubstr("team-b"))));
    EXPECT_THAT(std::string(info.status().message()), HasSubstr("models: "));
  }
  get.set_name("chat");
  get.set_owner("team-b");
  EXPECT_THAT(a->GetModel(get).status(), StatusIs(absl::StatusCode::kNotFound));
  v1::GenerateRequest generate = Generate("b-secret", 2);
  EXPECT_THAT(RunToEnd(*a, generate),
              StatusIs(absl::StatusCode::kNotFound, Not(HasSubstr("team-b"))));
  generate = Generate("chat", 2);
  generate.set_owner("team-b");
  EXPECT_THAT(RunToEnd(*a, generate), StatusIs(absl::StatusCode::kNotFound));
  v1::UnloadModelRequest unload;
  unload.set_name("b-secret");
  EXPECT_THAT(a->UnloadModel(unload).status(),
              StatusIs(absl::StatusCode::kNotFound, Not(HasSubstr("team-b"))));
  absl::StatusOr<v1::NodeStatus> status = a->GetNodeStatus();
  ASSERT_TRUE(status.ok());
  for (const v1::ModelInfo& m : status->models()) EXPECT_NE(m.owner(), "team-b") << m.name();
  // Only an admin may load a model that every tenant shares.
  v1::LoadModelRequest shared = Load("for-everyone");
  shared.set_shared(true);
  EXPECT_THAT(a->LoadModel(shared, nullptr).status(),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("admin")));

  // HTTP: the same rules.
  httplib::Client http("127.0.0.1", daemon_->http_port());
  auto models = http.Get("/v1/models", Bearer("team-a"));
  ASSERT_TRUE(models);
  EXPECT_THAT(models->body, HasSubstr("\"chat\""));
  EXPECT_THAT(models->body, Not(HasSubstr("b-secret")));
  // One model by id: the tenant's own, never another's (404 as for a name that does not exist).
  auto own = http.Get("/v1/models/chat", Bearer("team-a"));
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, 200) << own->body;
  EXPECT_THAT(own->body, HasSubstr(R"("id":"chat")"));
  EXPECT_THAT(own->body, HasSubstr(R"("object":"model")"));
  auto secret = http.Get("/v1/models/b-secret", Bearer("team-a"));
  ASSERT_TRUE(secret);
  EXPECT_EQ(secret->status, 404);
  EXPECT_THAT(secret->body, HasSubstr("model_not_found"));
  EXPECT_EQ(http.Get("/v1/models/b-secret", Bearer("team-b"))->status, 200);
  auto completion =
      http.Post("/v1/completions", Bearer("team-a"),
                R"({"model": "b-secret", "prompt": "def ", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(completion);
  EXPECT_EQ(completion->status, 404);
  completion =
      http.Post("/v1/completions", Bearer("team-a"),
                R"({"model": "chat", "prompt": "def ", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(completion);
  EXPECT_EQ(completion->status, 200) << completion->body;

  // /metrics with auth.metrics: token: a's series and the shared ones only.
  auto metrics = http.Get("/metrics", Bearer("team-a"));
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->body, HasSubstr("df11_model_state{model=\"chat\",tenant=\"team-a\""));
  EXPECT_THAT(metrics->body, HasSubstr("df11_requests_total{model=\"chat\",outcome=\"ok\","
                                       "tenant=\"team-a\"} 1"));
  EXPECT_THAT(metrics->body, HasSubstr("tenant=\"shared\""));
  EXPECT_THAT(metrics->body, Not(HasSubstr("team-b")));
  EXPECT_THAT(metrics->body, Not(HasSubstr("b-secret")));
  EXPECT_THAT(metrics->body, Not(HasSubstr("vllm:lora_requests_info")));
  auto all_metrics = http.Get("/metrics", Bearer("ops"));
  ASSERT_TRUE(all_metrics);
  EXPECT_THAT(all_metrics->body,
              HasSubstr("df11_model_state{model=\"b-secret\",tenant=\"team-b\""));
  EXPECT_THAT(all_metrics->body, HasSubstr("vllm:lora_requests_info"));
  EXPECT_EQ(http.Get("/metrics")->status, 401);

  // An admin sees both chats; naming one needs its owner.
  absl::StatusOr<v1::ListModelsResponse> everything = ops->ListModels();
  ASSERT_TRUE(everything.ok());
  EXPECT_EQ(std::count_if(everything->models().begin(), everything->models().end(),
                          [](const v1::ModelInfo& m) { return m.name() == "chat"; }),
            2);
  EXPECT_THAT(ops->GetModel("chat").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("team-a, team-b")));
  get.set_owner("team-b");
  EXPECT_EQ(ops->GetModel(get)->owner(), "team-b");
  EXPECT_EQ(ops->GetModel("b-secret")->owner(), "team-b");  // only one tenant has it

  // a unloads its chat; b's stays and serves.
  unload.set_name("chat");
  ASSERT_TRUE(a->UnloadModel(unload).ok());
  EXPECT_THAT(a->GetModel("chat").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(RunToEnd(*b, Generate("chat", 2)).ok());
  for (const char* name : {"chat", "b-secret"}) {
    unload.set_name(name);
    EXPECT_TRUE(b->UnloadModel(unload).ok()) << name;
  }
}

TEST_F(TenantsTest, QuotasOnModelsAndBytesRefuseLoadsWithTheNumbers) {
  auto q = As("team-q"), bytes = As("team-bytes");
  ASSERT_TRUE(q->LoadModel(Load("one"), nullptr).ok());
  EXPECT_THAT(q->LoadModel(Load("two"), nullptr).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("tenant team-q: max_models is 1; it has 1 (one) and two would be "
                                 "one more")));
  // Loading the one it has again is no new model.
  EXPECT_TRUE(q->LoadModel(Load("one"), nullptr).ok());
  absl::Status too_big = bytes->LoadModel(Load("big"), nullptr).status();
  EXPECT_THAT(too_big, StatusIs(absl::StatusCode::kResourceExhausted,
                                HasSubstr(absl::StrCat("tenant team-bytes: max_resident_bytes is ",
                                                       DemoBytes() / 2))));
  EXPECT_THAT(too_big.message(), HasSubstr("its models hold 0 and big needs "));
  v1::UnloadModelRequest unload;
  unload.set_name("one");
  EXPECT_TRUE(q->UnloadModel(unload).ok());
  EXPECT_TRUE(q->LoadModel(Load("two"), nullptr).ok());
  unload.set_name("two");
  EXPECT_TRUE(q->UnloadModel(unload).ok());

  const std::vector<nlohmann::json> events = AuditEvents(*dir_ + "/df11d.log");
  EXPECT_TRUE(std::any_of(events.begin(), events.end(), [](const nlohmann::json& e) {
    return e["audit"] == "quota_refusal" && e["tenant"] == "team-q" && e["model"] == "two" &&
           e["outcome"] == "RESOURCE_EXHAUSTED";
  }));
}

// Pinning, a keep-alive past auth.user_max_keep_alive (1 h by default) and unloading a shared
// model would let one tenant hold memory against the others: a user token is refused them with
// the reason; an admin token has them.
TEST_F(TenantsTest, PinLongKeepAliveAndUnloadingSharedModelsAreAdminPowers) {
  auto a = As("team-a"), ops = As("ops");
  v1::LoadModelRequest pinned = Load("a-pinned");
  pinned.set_pin(true);
  EXPECT_THAT(a->LoadModel(pinned, nullptr).status(),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("pin: only an admin")));
  v1::LoadModelRequest forever = Load("a-forever");
  forever.set_keep_alive_seconds(1e12);
  EXPECT_THAT(a->LoadModel(forever, nullptr).status(),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("is more than the 3600 s a user token may ask for")));
  v1::LoadModelRequest hour = Load("a-hour");
  hour.set_keep_alive_seconds(3600);
  ASSERT_TRUE(a->LoadModel(hour, nullptr).ok());
  v1::UnloadModelRequest unload;
  unload.set_name("demo");  // the pinned, preloaded shared model
  EXPECT_THAT(a->UnloadModel(unload).status(),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("shared by every tenant: only an admin token may unload it")));
  EXPECT_TRUE(RunToEnd(*a, Generate("demo", 2)).ok());  // still serving
  unload.set_name("a-hour");
  EXPECT_TRUE(a->UnloadModel(unload).ok());
  // An admin may pin and keep a model as long as it likes.
  forever.set_name("ops-forever");
  forever.set_pin(true);
  ASSERT_TRUE(ops->LoadModel(forever, nullptr).ok());
  unload.set_name("ops-forever");
  EXPECT_TRUE(ops->UnloadModel(unload).ok());
  const std::vector<nlohmann::json> events = AuditEvents(*dir_ + "/df11d.log");
  EXPECT_TRUE(std::any_of(events.begin(), events.end(), [](const nlohmann::json& e) {
    return e["audit"] == "permission_refusal" && e["tenant"] == "team-a" &&
           e["model"] == "a-pinned" && e["outcome"] == "PERMISSION_DENIED";
  }));
}

// A model name holding a line break and a JSON object is refused, and neither its log line nor
// its audit record lets the object read as an audit record of its own.
TEST_F(TenantsTest, NoClientStringForgesAnAuditRecord) {
  auto a = As("team-a");
  const std::string forged =
      "x\n{\"audit\":\"load\",\"tenant\":\"forged\",\"outcome\":\"OK\"}\r\n"
      "{\"audit\":\"unload\",\"tenant\":\"forged\",\"outcome\":\"OK\"}\xe2\x80\xa8";
  EXPECT_THAT(a->LoadModel(Load(forged), nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const std::vector<nlohmann::json> events = AuditEvents(*dir_ + "/df11d.log");
  EXPECT_TRUE(std::none_of(events.begin(), events.end(), [](const nlohmann::json& e) {
    return e.value("tenant", "") == "forged";
  }));
  // Every line is a log line (a timestamp first) or a whole record; the refusal's record keeps
  // the name as it was sent.
  std::ifstream in(*dir_ + "/df11d.log");
  bool recorded = false;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(record.is_object()) << line;
    recorded = recorded || record.value("model", "") == forged;
  }
  EXPECT_TRUE(recorded);
}

TEST_F(TenantsTest, TheRateQuotaIsATokenBucketOnGrpcAndHttpAlike) {
  auto r = As("team-r");
  EXPECT_TRUE(RunToEnd(*r, Generate("demo", 1)).ok());
  EXPECT_TRUE(RunToEnd(*r, Generate("demo", 1)).ok());
  EXPECT_THAT(RunToEnd(*r, Generate("demo", 1)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("tenant team-r: requests_per_minute is 2 (a burst of 2, then "
                                 "one each 30.00 s) and is used up")));
  httplib::Client http("127.0.0.1", daemon_->http_port());
  auto refused =
      http.Post("/v1/completions", Bearer("team-r"),
                R"({"model": "demo", "prompt": "def ", "max_tokens": 1})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 429);
  EXPECT_THAT(refused->body, HasSubstr("requests_per_minute is 2"));
  // Other tenants are not slowed.
  EXPECT_TRUE(RunToEnd(*As("team-a"), Generate("demo", 1)).ok());
  const std::vector<nlohmann::json> events = AuditEvents(*dir_ + "/df11d.log");
  EXPECT_TRUE(std::any_of(events.begin(), events.end(), [](const nlohmann::json& e) {
    return e["audit"] == "quota_refusal" && e["tenant"] == "team-r" &&
           e["token"] == "team-r-token" && e["outcome"] == "RESOURCE_EXHAUSTED";
  }));
}

TEST_F(TenantsTest, RunningRequestsAreCappedPerTenant) {
  auto s = As("team-s"), s2 = As("team-s");
  absl::Status second;
  bool asked = false;
  // The second request is made while the first streams; then the first is cancelled.
  const absl::Status first = s->Generate(Generate("demo", 500), [&](const v1::GenerateResponse&) {
    if (!asked) {
      second = RunToEnd(*s2, Generate("demo", 1));
      asked = true;
    }
    return false;
  });
  EXPECT_TRUE(asked);
  EXPECT_THAT(second, StatusIs(absl::StatusCode::kResourceExhausted,
                               HasSubstr("tenant team-s: max_running_requests is 1; 1 of its "
                                         "requests are queued or running")));
  EXPECT_THAT(first, StatusIs(absl::StatusCode::kCancelled));
  // Once the first has ended, the slot is free again.
  absl::Status next = absl::UnknownError("not run");
  for (int i = 0; i < 50 && !next.ok(); ++i) {
    next = RunToEnd(*s2, Generate("demo", 1));
    if (!next.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(next.ok()) << next;
}

// Loads under a budget of five demo copies, by up to four tenants, with every model idle at once.
TEST(TenantFairShareTest, EvictionTakesAnotherTenantsModelOnlyBeyondItsFairShare) {
  const std::string dir = testing::MakeTempDir();
  WriteTokens(dir + "/tokens.yaml", "");
  // Headers make the files a little larger than what is placed: five fit, six do not.
  const uint64_t budget = 5 * DemoBytes() + 64 * 1024;
  testing::DaemonProcess daemon;
  ASSERT_TRUE(
      daemon
          .Start(absl::StrCat("preload: []\n", "auth: {tokens_file: ", dir, "/tokens.yaml}\n",
                              "memory: {budget: ", budget, ", eviction: lru, keep_alive: 0s}\n"),
                 dir)
          .ok());
  auto a = ConnectAs(daemon.address(), "team-a"), b = ConnectAs(daemon.address(), "team-b"),
       ops = ConnectAs(daemon.address(), "ops");
  auto load = [](client::Df11Client& c, const std::string& name) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // distinct last-used times
    return c.LoadModel(Load(name), nullptr).status();
  };
  auto resident = [&] {
    std::vector<std::string> names;
    const absl::StatusOr<v1::ListModelsResponse> list = ops->ListModels();
    if (!list.ok()) return std::vector<std::string>{list.status().ToString()};
    for (const v1::ModelInfo& m : list->models()) names.push_back(m.owner() + "/" + m.name());
    std::sort(names.begin(), names.end());
    return names;
  };
  for (const char* name : {"b1", "b2", "b3", "b4"}) ASSERT_TRUE(load(*b, name).ok()) << name;
  ASSERT_TRUE(load(*a, "a1").ok());
  // The fair share is the budget over two tenants, 2.5 models. b holds 4 and keeps 3 without its
  // least recently used model, which makes room for a's.
  ASSERT_TRUE(load(*a, "a2").ok());
  EXPECT_THAT(resident(), ::testing::ElementsAre("team-a/a1", "team-a/a2", "team-b/b2", "team-b/b3",
                                                 "team-b/b4"));
  // b would keep 2, below its share: a's next load evicts a's own least recently used model,
  // though b's are older.
  ASSERT_TRUE(load(*a, "a3").ok());
  EXPECT_THAT(resident(), ::testing::ElementsAre("team-a/a2", "team-a/a3", "team-b/b2", "team-b/b3",
                                                 "team-b/b4"));
  // A third tenant: the share is 5/3 models. b keeps 2 without b2, a would keep only 1.
  auto r = ConnectAs(daemon.address(), "team-r"), q = ConnectAs(daemon.address(), "team-q");
  ASSERT_TRUE(load(*r, "r1").ok());
  // Now a and b hold 2 each, within their share once one more is gone: r evicts its own.
  ASSERT_TRUE(load(*r, "r2").ok());
  EXPECT_THAT(resident(), ::testing::ElementsAre("team-a/a2", "team-a/a3", "team-b/b3", "team-b/b4",
                                                 "team-r/r2"));
  // A fourth tenant: the share is 1.25 models, and every other tenant is kept at it. The refusal
  // says so, without naming another tenant's model.
  const absl::Status refused = load(*q, "q1");
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted,
                                HasSubstr("(models: none; other tenants' idle models: 0 bytes "
                                          "evictable and ")));
  EXPECT_THAT(refused.message(), HasSubstr("kept for their fair share of the budget"));
  for (const char* other : {"a2", "a3", "b3", "b4", "r2", "team-"}) {
    EXPECT_THAT(refused.message(), Not(HasSubstr(other)));
  }
  EXPECT_EQ(daemon.Terminate(), 0);
  const std::vector<nlohmann::json> events = AuditEvents(dir + "/df11d.log");
  std::vector<std::string> evicted;
  for (const nlohmann::json& e : events) {
    if (e["audit"] == "eviction")
      evicted.push_back(e["tenant"].get<std::string>() + "/" + e["model"].get<std::string>());
  }
  EXPECT_THAT(evicted, ::testing::ElementsAre("team-b/b1", "team-a/a1", "team-b/b2", "team-r/r1"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace df11
