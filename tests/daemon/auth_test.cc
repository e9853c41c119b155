// API tokens, tried by breaking them: a df11d with auth.tokens_file refuses every ModelHost call
// and every /v1/ request that has no token, an unknown one or a malformed header (UNAUTHENTICATED,
// HTTP 401, nothing else said), serves the same calls with a listed token, keeps grpc.health.v1 and
// (unless auth.metrics is token) /metrics open, and takes a changed tokens file while serving.
// df11ctl sends the token from --token-file or $DF11_TOKEN. Without tokens, a listen address
// beyond loopback is refused unless the config says insecure: true.
#include "daemon/server/auth.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/df11_client.h"
#include "daemon/config/config.h"
#include "daemon/server/node.h"
#include "daemon/server/node_collector.h"
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

constexpr char kToken[] = "df11_team-a-secret";
constexpr char kOtherToken[] = "df11_rotated-secret";
constexpr char kAdminToken[] = "df11_ops-secret";

// The tokens file with `token` (a user of team-a, named `name`) and the ops admin token.
void WriteTokens(const std::string& path, const std::string& token, const std::string& name) {
  // Written whole and renamed, as a Kubernetes Secret volume swaps its files.
  std::ofstream(path + ".tmp") << "tokens:\n  - {name: " << name
                               << ", sha256: " << server::Sha256Hex(token)
                               << ", tenant: team-a, role: user}\n  - {name: ops, sha256: "
                               << server::Sha256Hex(kAdminToken) << ", tenant: ops, role: admin}\n";
  fs::rename(path + ".tmp", path);
}

std::string DemoDir() { return (fs::path(DF11_SOURCE_DIR) / "models" / "demo").string(); }

class AuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir());
    WriteTokens(*dir_ + "/tokens.yaml", kToken, "ci");
    daemon_ = new testing::DaemonProcess();
    const absl::Status started = daemon_->Start(
        absl::StrCat("preload: [{source: ", DemoDir(), ", name: demo}]\n",
                     "catalog: [{source: ", DemoDir(), ", name: demo-catalog}]\n",
                     "auth: {tokens_file: ", *dir_, "/tokens.yaml, user_loads: catalog}\n",
                     "hub: {offline: true, cache_dir: ", *dir_, "/hub}\n"),
        *dir_);
    ASSERT_TRUE(started.ok()) << started;  // its health check answered without a token
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->Terminate(), 0);
    delete daemon_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  static std::unique_ptr<client::Df11Client> Client(const std::string& token) {
    return *client::Df11Client::Connect(daemon_->address(), {.token = token});
  }

  static std::string* dir_;
  static testing::DaemonProcess* daemon_;
};
std::string* AuthTest::dir_;
testing::DaemonProcess* AuthTest::daemon_;

// Every RPC of df11.v1.ModelHost through `c`; their statuses.
std::vector<absl::Status> CallEveryRpc(client::Df11Client& c) {
  const client::CallOptions quick{.timeout = absl::Seconds(10)};
  v1::LoadModelRequest load;
  load.set_source(DemoDir());
  load.set_name("demo-2");
  v1::UnloadModelRequest unload;
  unload.set_name("demo");
  v1::GenerateRequest generate;
  generate.set_model("demo");
  generate.set_text("def ");
  generate.set_max_tokens(2);
  v1::WatchNodeStatusRequest watch;
  return {c.LoadModel(load, nullptr, quick).status(),
          c.UnloadModel(unload, quick).status(),
          c.ListModels(quick).status(),
          c.GetModel("demo", quick).status(),
          c.EstimateModel(DemoDir(), quick).status(),
          c.Generate(
              generate, [](const v1::GenerateResponse&) { return true; }, quick),
          c.GetNodeStatus(quick).status(),
          c.WatchNodeStatus(
              watch, [](const v1::NodeStatus&) { return false; }, quick)};
}

TEST_F(AuthTest, EveryRpcWithoutAGoodTokenIsUnauthenticated) {
  const struct {
    std::string token;
    std::string error;
  } cases[] = {
      {"", "no authorization header"},
      {"df11_wrong", "unknown token"},
      {"two words", "malformed authorization header"},  // "Bearer two words"
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.token);
    std::unique_ptr<client::Df11Client> client = Client(c.token);
    const std::vector<absl::Status> statuses = CallEveryRpc(*client);
    ASSERT_EQ(statuses.size(), 8u);
    for (size_t i = 0; i < statuses.size(); ++i) {
      EXPECT_EQ(statuses[i].code(), absl::StatusCode::kUnauthenticated) << i << statuses[i];
      EXPECT_THAT(statuses[i].message(), HasSubstr(c.error)) << i;
    }
  }
  // Another scheme than Bearer.
  auto stub = v1::ModelHost::NewStub(
      grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Basic ", kToken));
  v1::ListModelsResponse response;
  const grpc::Status s = stub->ListModels(&context, {}, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(response.models_size(), 0);
  // Refused calls changed nothing: demo is still there, and demo-2 was never loaded.
  EXPECT_TRUE(Client(kToken)->GetModel("demo").ok());
  EXPECT_THAT(Client(kToken)->GetModel("demo-2").status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(AuthTest, AListedTokenIsServed) {
  std::unique_ptr<client::Df11Client> client = Client(kToken);
  v1::GenerateRequest generate;
  generate.set_model("demo");
  generate.set_text("def ");
  generate.set_max_tokens(3);
  int messages = 0;
  EXPECT_TRUE(client
                  ->Generate(generate,
                             [&](const v1::GenerateResponse&) {
                               ++messages;
                               return true;
                             })
                  .ok());
  EXPECT_GT(messages, 0);
  EXPECT_TRUE(client->GetNodeStatus().ok());
  EXPECT_EQ(testing::HealthStatus(daemon_->address()), 1);  // probes need no token
}

TEST_F(AuthTest, HttpRoutesNeedTheTokenAndMetricsStayOpen) {
  httplib::Client http("127.0.0.1", daemon_->http_port());
  const std::string chat = R"({"model": "demo", "messages": [{"role": "user", "content": "hi"}],
                               "max_tokens": 2})";
  const std::string completion = R"({"model": "demo", "prompt": "def ", "max_tokens": 2})";
  for (const std::string& header : {std::string(""), std::string("Bearer df11_wrong"),
                                    std::string("Bearer"), absl::StrCat("Basic ", kToken)}) {
    SCOPED_TRACE(header);
    httplib::Headers headers;
    if (!header.empty()) headers.emplace("Authorization", header);
    std::vector<httplib::Result> results;
    results.push_back(http.Get("/v1/models", headers));
    results.push_back(http.Post("/v1/completions", headers, completion, "application/json"));
    results.push_back(http.Post("/v1/chat/completions", headers, chat, "application/json"));
    results.push_back(http.Get("/v1/no-such-route", headers));
    for (const httplib::Result& result : results) {
      ASSERT_TRUE(result);
      EXPECT_EQ(result->status, 401);
      EXPECT_EQ(result->get_header_value("WWW-Authenticate"), "Bearer");
      EXPECT_THAT(result->body, HasSubstr("\"code\":\"invalid_api_key\""));
      EXPECT_THAT(result->body, ::testing::Not(HasSubstr("demo")));
    }
  }
  const httplib::Headers good = {{"Authorization", absl::StrCat("Bearer ", kToken)}};
  auto models = http.Get("/v1/models", good);
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_THAT(models->body, HasSubstr("\"demo\""));
  auto completed = http.Post("/v1/completions", good, completion, "application/json");
  ASSERT_TRUE(completed);
  EXPECT_EQ(completed->status, 200) << completed->body;
  // auth.metrics: open, for Prometheus and routers.
  EXPECT_THAT(testing::HttpGet(daemon_->http_port(), "/metrics"), HasSubstr("df11_insecure 0"));
}

TEST_F(AuthTest, Df11ctlSendsTheTokenFromAFileOrTheEnvironment) {
  const std::string token_file = *dir_ + "/ci.token";
  std::ofstream(token_file) << kToken << "\n";
  const std::string ctl = absl::StrCat(testing::Df11ctlBinary(), " --addr ", daemon_->address());
  std::string out;
  EXPECT_EQ(testing::RunCommand(absl::StrCat(ctl, " --token-file ", token_file, " list"), &out), 0);
  EXPECT_THAT(out, HasSubstr("demo"));
  EXPECT_EQ(testing::RunCommand(absl::StrCat(ctl, " list --token-file=", token_file), &out), 0);
  EXPECT_EQ(testing::RunCommand(absl::StrCat("DF11_TOKEN=", kToken, " ", ctl, " list"), &out), 0);
  EXPECT_THAT(out, HasSubstr("demo"));
  EXPECT_EQ(testing::RunCommand(absl::StrCat(ctl, " list 2>&1"), &out), 1);
  EXPECT_THAT(out, HasSubstr("UNAUTHENTICATED"));
  EXPECT_EQ(
      testing::RunCommand(absl::StrCat(ctl, " --token-file ", *dir_, "/none list 2>&1"), &out), 2);
  EXPECT_THAT(out, HasSubstr("cannot read --token-file"));
}

TEST_F(AuthTest, AChangedTokensFileTakesEffectWhileServing) {
  auto status_with = [&](const std::string& token) {
    return Client(token)->ListModels({.timeout = absl::Seconds(5)}).status().code();
  };
  const std::string tokens = *dir_ + "/tokens.yaml";
  WriteTokens(tokens, kOtherToken, "rotated");
  absl::StatusCode code = absl::StatusCode::kUnknown;
  for (int i = 0; i < 100 && code != absl::StatusCode::kOk; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    code = status_with(kOtherToken);
  }
  EXPECT_EQ(code, absl::StatusCode::kOk);
  EXPECT_EQ(status_with(kToken), absl::StatusCode::kUnauthenticated);
  // A broken file keeps the tokens that were in force.
  std::ofstream(tokens) << "tokens: [{name: x}]\n";
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(status_with(kOtherToken), absl::StatusCode::kOk);
  WriteTokens(tokens, kToken, "ci");
  code = absl::StatusCode::kUnknown;
  for (int i = 0; i < 100 && code != absl::StatusCode::kOk; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    code = status_with(kToken);
  }
  EXPECT_EQ(code, absl::StatusCode::kOk);
}

TEST_F(AuthTest, LoadsStayInsideModelRootsAndUsersInsideTheCatalog) {
  std::unique_ptr<client::Df11Client> user = Client(kToken), admin = Client(kAdminToken);
  v1::LoadModelRequest load;
  load.set_source("/etc");
  for (client::Df11Client* c : {user.get(), admin.get()}) {
    EXPECT_THAT(c->LoadModel(load, nullptr).status(),
                StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("model_roots")));
    EXPECT_THAT(c->EstimateModel("/etc").status(),
                StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("model_roots")));
  }
  // auth.user_loads: catalog: a user loads the catalog's sources only; an admin anything inside
  // the roots.
  const std::string copy = *dir_ + "/demo-copy";
  fs::copy(DemoDir(), copy, fs::copy_options::recursive);
  load.set_source(copy);
  load.set_name("copy");
  EXPECT_THAT(user->LoadModel(load, nullptr).status(),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("auth.user_loads")));
  EXPECT_TRUE(admin->LoadModel(load, nullptr).ok());
  load.set_source(DemoDir());
  load.set_name("from-catalog");
  EXPECT_TRUE(user->LoadModel(load, nullptr).ok());
  for (const char* name : {"copy", "from-catalog"}) {
    v1::UnloadModelRequest unload;
    unload.set_name(name);
    EXPECT_TRUE(admin->UnloadModel(unload).ok()) << name;
  }
}

TEST_F(AuthTest, TheAuditLogRecordsLoadsUnloadsAndRefusalsButNeverATokensValue) {
  std::unique_ptr<client::Df11Client> user = Client(kToken), admin = Client(kAdminToken);
  EXPECT_FALSE(Client("df11_wrong")->ListModels().ok());
  httplib::Client http("127.0.0.1", daemon_->http_port());
  EXPECT_EQ(http.Get("/v1/models")->status, 401);
  v1::LoadModelRequest load;
  load.set_source("/etc");
  EXPECT_FALSE(user->LoadModel(load, nullptr).ok());
  load.set_source(DemoDir());
  load.set_name("audited");
  EXPECT_TRUE(user->LoadModel(load, nullptr).ok());
  v1::UnloadModelRequest unload;
  unload.set_name("audited");
  EXPECT_TRUE(admin->UnloadModel(unload).ok());

  std::ifstream in(*dir_ + "/df11d.log");
  std::stringstream text;
  text << in.rdbuf();
  for (const char* token : {kToken, kOtherToken, kAdminToken}) {
    EXPECT_THAT(text.str(), ::testing::Not(HasSubstr(token)));
  }
  std::vector<nlohmann::json> events;
  for (std::string line; std::getline(text, line);) {
    if (line.rfind("{\"audit\":", 0) == 0) events.push_back(nlohmann::json::parse(line));
  }
  auto find = [&](const std::function<bool(const nlohmann::json&)>& match) {
    return std::any_of(events.begin(), events.end(), match);
  };
  EXPECT_TRUE(find([](const nlohmann::json& e) {
    return e["audit"] == "authentication_failure" && e["outcome"] == "UNAUTHENTICATED" &&
           e["message"] == "unknown token" &&
           e["peer"].get<std::string>().find("127.0.0.1") != std::string::npos;
  }));
  EXPECT_TRUE(find([](const nlohmann::json& e) {  // HTTP, no header
    return e["audit"] == "authentication_failure" &&
           e["peer"].get<std::string>().rfind("127.0.0.1:", 0) == 0;
  }));
  EXPECT_TRUE(find([](const nlohmann::json& e) {
    return e["audit"] == "permission_refusal" && e["source"] == "/etc" && e["tenant"] == "team-a" &&
           e["token"] == "ci" && e["outcome"] == "PERMISSION_DENIED";
  }));
  EXPECT_TRUE(find([](const nlohmann::json& e) {
    return e["audit"] == "load" && e["model"] == "audited" && e["tenant"] == "team-a" &&
           e["token"] == "ci" && e["outcome"] == "OK" && e.contains("time");
  }));
  EXPECT_TRUE(find([](const nlohmann::json& e) {
    return e["audit"] == "unload" && e["model"] == "audited" && e["tenant"] == "ops" &&
           e["token"] == "ops" && e["outcome"] == "OK";
  }));
}

TEST(AuthConfigTest, BeyondLoopbackWithoutTokensNeedsInsecure) {
  // Node::Create decides before anything listens, so nothing here binds a public address.
  for (const char* listen : {"listen: {grpc: \"0.0.0.0:0\", http: \"\"}\n",
                             "listen: {grpc: \"127.0.0.1:0\", http: \"[::]:0\"}\n"}) {
    SCOPED_TRACE(listen);
    absl::StatusOr<config::Config> c =
        config::ParseConfig(absl::StrCat(listen, "preload: []\n"), "");
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<std::unique_ptr<server::Node>> node = server::Node::Create(*c);
    EXPECT_EQ(node.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(node.status().message(), HasSubstr("set auth.tokens_file, or insecure: true"));
    c->insecure = true;
    node = server::Node::Create(*c);
    ASSERT_TRUE(node.ok()) << node.status();
    bool insecure_gauge = false;
    for (const prometheus::MetricFamily& f : server::NodeCollector(**node).Collect()) {
      if (f.name == "df11_insecure") insecure_gauge = f.metric.at(0).gauge.value == 1;
    }
    EXPECT_TRUE(insecure_gauge);
  }
  // A tokens file that does not parse stops the start, naming it.
  const std::string dir = testing::MakeTempDir();
  std::ofstream(dir + "/tokens.yaml") << "tokens: [{name: a, sha256: nothex, tenant: a}]\n";
  absl::StatusOr<config::Config> c =
      config::ParseConfig(absl::StrCat("preload: []\nauth: {tokens_file: tokens.yaml}\n"), dir);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::unique_ptr<server::Node>> node = server::Node::Create(*c);
  EXPECT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(node.status().message(), HasSubstr("tokens[0].sha256"));
  fs::remove_all(dir);
}


// A token revoked while its generations run ends them (gRPC and HTTP alike) within the tokens
// file's reload interval, with UNAUTHENTICATED naming the token.
TEST(TokenRevocationTest, RevokingATokenEndsItsGenerationsInFlight) {
  const std::string dir = testing::MakeTempDir();
  // A small model with a long context: 12,000 tokens take longer than a revocation.
  const std::string model = testing::MakeTestModel(dir, "long", "qwen3", false, 5, DemoDir());
  {
    std::ifstream in(model + "/config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    config["max_position_embeddings"] = 16384;
    std::ofstream(model + "/config.json") << config.dump(2);
  }
  const std::string tokens = dir + "/tokens.yaml";
  WriteTokens(tokens, kToken, "ci");
  testing::DaemonProcess daemon;
  ASSERT_TRUE(daemon
                  .Start(absl::StrCat("preload: [{source: ", model, ", name: long, pin: true}]\n",
                                      "auth: {tokens_file: ", tokens, "}\n",
                                      "limits: {max_tokens: 12000}\n"),
                         dir)
                  .ok());
  // Waits until `token` is (or is no longer) accepted.
  auto wait_for = [&](const std::string& token, bool accepted) {
    auto c = *client::Df11Client::Connect(daemon.address(), {.token = token});
    for (int i = 0; i < 100; ++i) {
      if (c->ListModels({.timeout = absl::Seconds(5)}).ok() == accepted) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };

  v1::GenerateRequest generate;
  generate.set_model("long");
  generate.set_text("def ");
  generate.set_max_tokens(12000);
  generate.set_ignore_eos(true);
  auto c = *client::Df11Client::Connect(daemon.address(), {.token = kToken});
  int tokens_seen = 0;
  const absl::Status grpc = c->Generate(generate, [&](const v1::GenerateResponse& r) {
    if (tokens_seen == 0) WriteTokens(tokens, kOtherToken, "other");
    tokens_seen += r.token_ids_size();
    return true;
  });
  EXPECT_THAT(grpc, StatusIs(absl::StatusCode::kUnauthenticated,
                             HasSubstr("token ci was revoked while the request ran")));
  EXPECT_LT(tokens_seen, 12000);

  WriteTokens(tokens, kToken, "ci");
  ASSERT_TRUE(wait_for(kToken, true));
  httplib::Client http("127.0.0.1", daemon.http_port());
  http.set_read_timeout(std::chrono::seconds(60));
  std::string body;
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.headers = {{"Authorization", absl::StrCat("Bearer ", kToken)}};
  request.body = R"({"model": "long", "prompt": "def ", "max_tokens": 12000, "ignore_eos": true,
                     "stream": true})";
  request.set_header("Content-Type", "application/json");
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (body.empty()) WriteTokens(tokens, kOtherToken, "other");
    body.append(data, size);
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  ASSERT_TRUE(http.send(request, response, error)) << httplib::to_string(error);
  EXPECT_EQ(response.status, 200);
  EXPECT_THAT(body, HasSubstr("token ci was revoked while the request ran"));
  EXPECT_THAT(body, ::testing::Not(HasSubstr("[DONE]")));
  EXPECT_EQ(daemon.Terminate(), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace df11
