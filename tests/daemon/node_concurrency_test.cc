// A Node and its HTTP front end in one process under concurrent traffic: completions plain and
// streamed, a catalog model loaded on demand while another thread unloads it again and again,
// clients that leave mid-stream, /metrics scrapes and status snapshots. Every completion that
// succeeds gives the greedy text; the others fail with the answer an unload race calls for; the
// node ends with nothing running. Also run by the ThreadSanitizer configuration (label tsan),
// where this is the daemon's check: the gRPC service is left out of it, since Debian's gRPC is not
// built with TSan, which then cannot see the hand-offs between gRPC's threads and reports them.
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/config/config.h"
#include "daemon/server/http_server.h"
#include "daemon/server/node.h"
#include "daemon/server/node_collector.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/testing/test_models.h"

namespace df11 {
namespace {

using ::testing::AnyOf;
using ::testing::Eq;
using ::testing::HasSubstr;

constexpr int kRounds = 6;  // of each worker; enough to overlap under ThreadSanitizer

// A greedy completion of `model`: its HTTP status and text (the error body when not 200).
struct Completion {
  int status = 0;
  std::string text;
};

Completion Complete(int port, const std::string& model, bool stream) {
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(std::chrono::seconds(120));
  const nlohmann::json body = {{"model", model},   {"prompt", "def "},   {"max_tokens", 8},
                               {"temperature", 0}, {"ignore_eos", true}, {"stream", stream}};
  const httplib::Result r = http.Post("/v1/completions", body.dump(), "application/json");
  if (!r) return {.status = -1, .text = httplib::to_string(r.error())};
  if (r->status != 200) return {.status = r->status, .text = r->body};
  if (!stream) {
    return {.status = 200,
            .text = nlohmann::json::parse(r->body)["choices"][0]["text"].get<std::string>()};
  }
  // Server-Sent Events: the text is the events' texts in order.
  Completion out{.status = 200};
  size_t at = 0;
  for (size_t end; (end = r->body.find("\n\n", at)) != std::string::npos; at = end + 2) {
    const std::string event = r->body.substr(at, end - at);
    if (event.rfind("data: {", 0) != 0) continue;
    const nlohmann::json chunk = nlohmann::json::parse(event.substr(6));
    if (chunk.contains("error")) return {.status = 500, .text = event};
    out.text += chunk["choices"][0]["text"].get<std::string>();
  }
  return out;
}

// Starts a streamed completion and leaves after its first event.
void LeaveMidStream(int port) {
  httplib::Client http("127.0.0.1", port);
  const nlohmann::json body = {
      {"model", "demo"}, {"prompt", "def "}, {"max_tokens", 64}, {"stream", true}};
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  request.content_receiver = [](const char*, size_t, uint64_t, uint64_t) { return false; };
  httplib::Response response;
  httplib::Error error;
  (void)http.send(request, response, error);
}

TEST(NodeConcurrencyTest, RequestsLoadsUnloadsAndLeavingClientsAtOnce) {
  const std::string demo = testing::DemoDir();
  absl::StatusOr<config::Config> config = config::ParseConfig(
      absl::StrCat("listen: {grpc: \"127.0.0.1:0\", http: \"127.0.0.1:0\"}\n", "cpu_threads: 2\n",
                   "preload: [{source: ", demo, ", name: demo, pin: true}]\n",
                   "catalog: [{source: ", demo, ", name: demo-catalog}]\n"),
      "");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<server::Node>> node = server::Node::Create(*config);
  ASSERT_TRUE(node.ok()) << node.status();
  (*node)->StartPreload();
  while (!(*node)->preload_done()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  absl::StatusOr<std::unique_ptr<server::HttpServer>> http = server::HttpServer::Start(
      **node, {(*node)->metrics().registry(), std::make_shared<server::NodeCollector>(**node)});
  ASSERT_TRUE(http.ok()) << http.status();
  const int port = (*http)->port();
  const Completion reference = Complete(port, "demo", false);
  ASSERT_EQ(reference.status, 200) << reference.text;
  absl::StatusOr<server::Caller> admin = (*node)->Authenticate(std::nullopt);
  ASSERT_TRUE(admin.ok());

  std::mutex mu;
  std::map<std::string, std::vector<Completion>> results;  // by worker kind
  auto record = [&](const std::string& kind, Completion c) {
    std::lock_guard<std::mutex> lock(mu);
    results[kind].push_back(std::move(c));
  };
  std::atomic<int> unloads{0}, scrapes{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) record("plain", Complete(port, "demo", false));
    });
  }
  workers.emplace_back([&] {
    for (int i = 0; i < kRounds; ++i) record("streamed", Complete(port, "demo", true));
  });
  workers.emplace_back([&] {
    for (int i = 0; i < kRounds; ++i) record("catalog", Complete(port, "demo-catalog", i % 2));
  });
  workers.emplace_back([&] {
    for (int i = 0; i < kRounds; ++i) LeaveMidStream(port);
  });
  std::atomic<bool> done{false};
  std::thread unloader([&] {
    while (!done) {
      if ((*node)->Unload(*admin, "demo-catalog", "", absl::Seconds(5), false).ok()) ++unloads;
      httplib::Client scrape("127.0.0.1", port);
      const httplib::Result metrics = scrape.Get("/metrics");
      if (metrics && metrics->status == 200) ++scrapes;
      (void)(*node)->Status(*admin);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  for (std::thread& t : workers) t.join();
  done = true;
  unloader.join();

  for (const std::string kind : {"plain", "streamed"}) {
    ASSERT_EQ(results[kind].size(), kind == "plain" ? 2u * kRounds : kRounds);
    for (const Completion& c : results[kind]) {
      EXPECT_EQ(c.status, 200) << kind << ": " << c.text;
      EXPECT_EQ(c.text, reference.text) << kind;
    }
  }
  // A request for the catalog model gives the same text, or, when an unload took the model from
  // under it, 503 saying so; never anything else.
  ASSERT_EQ(results["catalog"].size(), kRounds);
  int catalog_served = 0;
  for (const Completion& c : results["catalog"]) {
    EXPECT_THAT(c.status, AnyOf(Eq(200), Eq(503))) << c.text;
    if (c.status == 200) {
      EXPECT_EQ(c.text, reference.text);
      ++catalog_served;
    }
  }
  RecordProperty("catalog_served", catalog_served);
  RecordProperty("catalog_unloads", unloads.load());
  EXPECT_GT(catalog_served, 0);
  EXPECT_GT(unloads.load(), 0);
  EXPECT_GT(scrapes.load(), 0);

  // Nothing is left running or queued once the clients are gone.
  server::NodeStatus status;
  for (int i = 0; i < 500; ++i) {
    status = (*node)->Status();
    if (status.running_requests == 0 && status.queued_requests == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(status.running_requests, 0);
  EXPECT_EQ(status.queued_requests, 0);
  const Completion after = Complete(port, "demo", false);
  EXPECT_EQ(after.status, 200);
  EXPECT_EQ(after.text, reference.text);
  (*node)->BeginShutdown();
  http->reset();
}

}  // namespace
}  // namespace df11
