#include "daemon/config/config.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "codec/base/duration.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace df11::config {
namespace {

using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ConfigTest, EmptyYamlGivesTheDefaults) {
  absl::StatusOr<Config> c = ParseConfig("", "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->grpc_listen, "127.0.0.1:7411");
  EXPECT_EQ(c->http_listen, "127.0.0.1:7412");
  ASSERT_EQ(c->devices.size(), 1u);
  EXPECT_TRUE(c->devices[0].cpu);
  EXPECT_EQ(c->budget.Resolve(1000), 900u);
  EXPECT_EQ(c->kv_cache.Resolve(900), 90u);
  EXPECT_EQ(c->kv_page_bytes, 2 << 20);
  EXPECT_EQ(c->fused_max_rows, 8);
  EXPECT_EQ(c->gpu_layout, Config::GpuLayout::kTiled);
  EXPECT_EQ(c->eviction, Eviction::kLru);
  EXPECT_EQ(c->keep_alive_seconds, 300);
  EXPECT_TRUE(c->preload.empty());
  EXPECT_EQ(c->max_request_bytes, 4 << 20);
}

TEST(ConfigTest, EmbeddedDefaultPreloadsTheDemoModel) {
  const std::string repo = DF11_SOURCE_DIR;
  absl::StatusOr<Config> c = ParseConfig(DefaultConfigYaml(), repo + "/configs");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->preload.size(), 1u);
  EXPECT_EQ(c->preload[0].name, "demo");
  EXPECT_TRUE(c->preload[0].pin);
  // Relative to the config's directory when that directory holds it, else left as written.
  EXPECT_EQ(c->preload[0].source, "models/demo");
  absl::StatusOr<Config> from_repo = ParseConfig(DefaultConfigYaml(), repo);
  ASSERT_TRUE(from_repo.ok()) << from_repo.status();
  EXPECT_EQ(from_repo->preload[0].source, repo + "/models/demo");
}

TEST(ConfigTest, EveryFieldIsRead) {
  absl::StatusOr<Config> c = ParseConfig(R"(
listen: {grpc: "0.0.0.0:0", http: ""}
devices: [0, "cuda:3"]
cpu_threads: 4
memory: {budget: 20GiB, kv_cache: 4GiB, kv_page: 1MiB, eviction: none, keep_alive: 90s}
preload:
  - {source: org/model@main, name: m, pin: false, keep_alive: 1h}
catalog:
  - {source: org/chat, name: chat, keep_alive: 0s, device: "cuda:1"}
  - {source: org/other}
catalog_file: /etc/df11d/catalog.yaml
on_demand: false
hub: {endpoint: "http://127.0.0.1:9", cache_dir: /c, token_file: /t, offline: true}
limits:
  max_prompt_tokens: 100
  max_tokens: 50
  default_max_tokens: 10
  queue_size: 0
  max_running_requests: 8
  max_concurrent_loads: 3
  max_request_bytes: 64KiB
  load_wait: 90s
  http_requests: 16
  http_max_connections: 100
  http_max_connections_per_client: 20
  http_idle_timeout: 5s
  http_header_timeout: 2s
  http_body_timeout: 3s
shutdown: {drain: 250ms}
)",
                                         "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->grpc_listen, "0.0.0.0:0");
  EXPECT_EQ(c->http_listen, "");
  ASSERT_EQ(c->devices.size(), 2u);
  EXPECT_EQ(c->devices[0].Name(), "cuda:0");
  EXPECT_EQ(c->devices[1].Name(), "cuda:3");
  EXPECT_EQ(c->cpu_threads, 4);
  EXPECT_EQ(c->budget.Resolve(1), uint64_t{20} << 30);
  EXPECT_EQ(c->kv_cache.Resolve(1), uint64_t{4} << 30);
  EXPECT_EQ(c->kv_page_bytes, 1 << 20);
  EXPECT_EQ(c->eviction, Eviction::kNone);
  EXPECT_EQ(c->keep_alive_seconds, 90);
  ASSERT_EQ(c->preload.size(), 1u);
  EXPECT_EQ(c->preload[0].source, "org/model@main");
  EXPECT_EQ(c->preload[0].keep_alive_seconds, 3600);
  EXPECT_EQ(c->hub_endpoint, "http://127.0.0.1:9");
  EXPECT_TRUE(c->hub_offline);
  EXPECT_EQ(c->max_prompt_tokens, 100);
  EXPECT_EQ(c->max_tokens, 50);
  EXPECT_EQ(c->default_max_tokens, 10);
  EXPECT_EQ(c->queue_size, 0);
  EXPECT_EQ(c->max_running_requests, 8);
  EXPECT_EQ(c->max_concurrent_loads, 3);
  EXPECT_EQ(c->max_request_bytes, 64 << 10);
  EXPECT_DOUBLE_EQ(c->load_wait_seconds, 90);
  EXPECT_EQ(c->http_requests, 16);
  EXPECT_EQ(c->http_max_connections, 100);
  EXPECT_EQ(c->http_max_connections_per_client, 20);
  EXPECT_DOUBLE_EQ(c->http_idle_timeout_seconds, 5);
  EXPECT_DOUBLE_EQ(c->http_header_timeout_seconds, 2);
  EXPECT_DOUBLE_EQ(c->http_body_timeout_seconds, 3);
  EXPECT_DOUBLE_EQ(c->drain_seconds, 0.25);
  ASSERT_EQ(c->catalog.size(), 2u);
  EXPECT_EQ(c->catalog[0].name, "chat");
  EXPECT_EQ(c->catalog[0].device, "cuda:1");
  EXPECT_EQ(c->catalog[0].keep_alive_seconds, 0);
  EXPECT_EQ(c->catalog[1].source, "org/other");
  EXPECT_EQ(c->catalog_file, "/etc/df11d/catalog.yaml");
  EXPECT_FALSE(c->on_demand);
}

TEST(ConfigTest, PeersAreAListOrADnsName) {
  absl::StatusOr<Config> c = ParseConfig(R"(
peers:
  addresses: ["10.0.0.5:7411", "node-b.df11d:7411"]
  refresh: 10s
  timeout: 2s
  min_rate: 32MiB
  token_file: peer-token
  ca_file: /etc/df11d/ca.pem
)",
                                         "/etc/df11d");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->peers_asked());
  EXPECT_THAT(c->peer_addresses, ::testing::ElementsAre("10.0.0.5:7411", "node-b.df11d:7411"));
  EXPECT_DOUBLE_EQ(c->peer_refresh_seconds, 10);
  EXPECT_DOUBLE_EQ(c->peer_timeout_seconds, 2);
  EXPECT_EQ(c->peer_min_rate, 32 << 20);
  EXPECT_EQ(c->peer_token_file, "/etc/df11d/peer-token");  // relative to the config file
  EXPECT_EQ(c->peer_ca_file, "/etc/df11d/ca.pem");
  absl::StatusOr<Config> again = ParseConfig(ConfigToYaml(*c), "");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ConfigToYaml(*again), ConfigToYaml(*c));

  absl::StatusOr<Config> dns = ParseConfig("peers: {dns: df11d-peers.df11.svc, port: 7411}", "");
  ASSERT_TRUE(dns.ok()) << dns.status();
  EXPECT_EQ(dns->peer_dns, "df11d-peers.df11.svc");
  EXPECT_TRUE(dns->peers_asked());
  EXPECT_FALSE(ParseConfig("", "")->peers_asked());
}

TEST(ConfigTest, CatalogFilesHoldAListOrACatalogKey) {
  const std::string dir = ::testing::TempDir();
  const std::string map = dir + "/catalog_map.yaml", list = dir + "/catalog_list.yaml",
                    bad = dir + "/catalog_bad.yaml";
  std::ofstream(map) << "catalog:\n  - {source: org/a, name: a}\n";
  std::ofstream(list) << "- {source: org/b}\n- {source: org/c, pin: true}\n";
  std::ofstream(bad) << "catalog:\n  - {source: org/d, nmae: d}\n";
  absl::StatusOr<std::vector<ModelSpec>> a = LoadCatalogFile(map);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 1u);
  EXPECT_EQ((*a)[0].name, "a");
  absl::StatusOr<std::vector<ModelSpec>> b = LoadCatalogFile(list);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->size(), 2u);
  EXPECT_TRUE((*b)[1].pin);
  EXPECT_THAT(LoadCatalogFile(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("catalog[0].nmae")));
  EXPECT_THAT(LoadCatalogFile(dir + "/none.yaml").status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST(ConfigTest, PrintedConfigReadsBackTheSame) {
  absl::StatusOr<Config> c = ParseConfig(R"(
devices: [1]
memory: {budget: 3000000, kv_cache: 25%, kv_page: 65536, keep_alive: 250ms, fused_max_rows: 0,
         gpu_layout: lane}
preload: [{source: a/b, name: x, pin: true}]
)",
                                         "");
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string printed = ConfigToYaml(*c);
  absl::StatusOr<Config> again = ParseConfig(printed, "");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << printed;
  EXPECT_EQ(ConfigToYaml(*again), printed);
  EXPECT_EQ(again->budget.Resolve(1), 3000000u);
  EXPECT_EQ(again->kv_cache.Resolve(1000), 250u);
  EXPECT_EQ(again->kv_page_bytes, 65536);
  EXPECT_EQ(again->fused_max_rows, 0);
  EXPECT_EQ(again->gpu_layout, Config::GpuLayout::kLane);
  EXPECT_DOUBLE_EQ(again->keep_alive_seconds, 0.25);
  EXPECT_EQ(again->preload[0].name, "x");
}

struct BadCase {
  const char* yaml;
  const char* field;  // named in the error
};

TEST(ConfigTest, ErrorsNameTheField) {
  const BadCase cases[] = {
      {"listen: {grpc: localhost}", "listen.grpc"},
      {"listen: {grpc: 'a:70000'}", "listen.grpc"},
      {"listen: {http: ':x'}", "listen.http"},
      {"listen: {gprc: 'a:1'}", "listen.gprc"},
      {"listen: [1]", "listen"},
      {"devices: []", "devices"},
      {"devices: [gpu]", "devices[0]"},
      {"devices: [cpu, cpu]", "devices[1]"},
      {"cpu_threads: many", "cpu_threads"},
      {"cpu_threads: -1", "cpu_threads"},
      {"memory: {budget: 0}", "memory.budget"},
      {"memory: {budget: 120%}", "memory.budget"},
      {"memory: {budget: 5 parsecs}", "memory.budget"},
      {"memory: {eviction: fifo}", "memory.eviction"},
      {"memory: {kv_cache: 0}", "memory.kv_cache"},
      {"memory: {kv_cache: 101%}", "memory.kv_cache"},
      {"memory: {kv_page: 100}", "memory.kv_page"},
      {"memory: {fused_max_rows: 9}", "memory.fused_max_rows"},
      {"memory: {gpu_layout: blocked}", "memory.gpu_layout"},
      {"memory: {keep_alive: 3 days}", "memory.keep_alive"},
      {"preload: [{name: x}]", "preload[0].source"},
      {"preload: [{source: a, name: x}, {source: b, name: x}]", "preload[1].name"},
      {"preload: [{source: a, pinned: true}]", "preload[0].pinned"},
      {"preload: [{source: a, pin: maybe}]", "preload[0].pin"},
      {"preload: [a]", "preload[0]"},
      {"catalog: [{name: x}]", "catalog[0].source"},
      {"catalog: [{source: a, name: x}, {source: b, name: x}]", "catalog[1].name"},
      {"catalog: [{source: a, device: tpu}]", "catalog[0].device"},
      {"on_demand: maybe", "on_demand"},
      {"limits: {load_wait: soon}", "limits.load_wait"},
      {"limits: {http_requests: 0}", "limits.http_requests"},
      {"limits: {http_connections: 16}", "limits.http_connections"},  // before http_requests
      {"limits: {http_max_connections_per_client: 0}", "limits.http_max_connections_per_client"},
      {"limits: {http_header_timeout: 0s}", "limits.http_header_timeout"},
      {"hub: {endpoint: ftp://x}", "hub.endpoint"},
      {"hub: {offline: 2}", "hub.offline"},
      {"limits: {max_tokens: 0}", "limits.max_tokens"},
      {"limits: {max_tokens: 10, default_max_tokens: 20}", "limits.default_max_tokens"},
      {"limits: {max_request_bytes: 10}", "limits.max_request_bytes"},
      {"limits: {queue: 1}", "limits.queue"},
      {"shutdown: {drain: soon}", "shutdown.drain"},
      {"peers: {addresses: 'a:1'}", "peers.addresses"},
      {"peers: {addresses: [nohost]}", "peers.addresses[0]"},
      {"peers: {addresses: ['a:1'], dns: b}", "peers"},
      {"peers: {dns: b, port: 0}", "peers.port"},
      {"peers: {timeout: 0s}", "peers.timeout"},
      {"peers: {min_rate: fast}", "peers.min_rate"},
      {"peers: {cert_file: c.pem}", "peers"},
      {"colour: blue", "colour"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.yaml);
    EXPECT_THAT(ParseConfig(c.yaml, ""),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(std::string("config field ") + c.field + ":")));
  }
}

TEST(ConfigTest, MalformedYamlIsInvalidArgument) {
  EXPECT_THAT(ParseConfig("listen: {grpc: [", ""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ConfigTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadConfigFile("/nonexistent/df11d.yaml"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/df11d.yaml")));
}

TEST(ConfigTest, FileErrorsNameTheFile) {
  const std::string path = ::testing::TempDir() + "/bad_config.yaml";
  std::ofstream(path) << "limits: {queue_size: -5}\n";
  EXPECT_THAT(LoadConfigFile(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(path + ": config field limits.queue_size: -5 is outside")));
}

TEST(ConfigTest, SizesAndDurations) {
  EXPECT_EQ(*ParseBytes("1000"), 1000u);
  EXPECT_EQ(*ParseBytes("2KB"), 2000u);
  EXPECT_EQ(*ParseBytes("1.5 GiB"), uint64_t{3} << 29);
  EXPECT_THAT(ParseBytes("12 furlongs"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseBytes("GiB"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_DOUBLE_EQ(*base::ParseDuration("5m"), 300);
  EXPECT_DOUBLE_EQ(*base::ParseDuration("2h"), 7200);
  EXPECT_DOUBLE_EQ(*base::ParseDuration("20"), 20);
  EXPECT_DOUBLE_EQ(*base::ParseDuration("1500ms"), 1.5);
  EXPECT_THAT(base::ParseDuration("1d"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace df11::config
