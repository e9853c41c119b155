// deploy/k8s against df11d itself. Each overlay's df11d.yaml is a valid configuration whose ports
// are those the DaemonSet's probes and container ports name, whose drain ends within the pod's
// grace period, and whose paths are where the DaemonSet mounts the ConfigMaps, the Secret and the
// cache; a df11d on that configuration answers the probes' grpc.health.v1 services as the probes
// expect, during a long preload and after it; the dashboard queries only metrics df11d exports.
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/config/config.h"
#include "daemon/server/node.h"
#include "daemon/server/node_collector.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon/daemon_process.h"
#include "tests/hub/fake_hub.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;

const fs::path kK8s = fs::path(DF11_SOURCE_DIR) / "deploy" / "k8s";
constexpr const char* kOverlays[] = {"gpu", "cpu"};

int Port(const std::string& host_port) {
  return std::stoi(host_port.substr(host_port.rfind(':') + 1));
}

YAML::Node Container(const YAML::Node& daemonset, const std::string& name) {
  for (const YAML::Node& c : daemonset["spec"]["template"]["spec"]["containers"]) {
    if (c["name"].as<std::string>() == name) return c;
  }
  ADD_FAILURE() << "no container " << name;
  return YAML::Node();
}

// The mount path of the volume named `volume` in `container`.
std::string MountPath(const YAML::Node& container, const std::string& volume) {
  for (const YAML::Node& m : container["volumeMounts"]) {
    if (m["name"].as<std::string>() == volume) return m["mountPath"].as<std::string>();
  }
  ADD_FAILURE() << "no mount of " << volume;
  return "";
}

std::string Env(const YAML::Node& container, const std::string& name) {
  for (const YAML::Node& e : container["env"]) {
    if (e["name"].as<std::string>() == name) return e["value"].as<std::string>();
  }
  return "";
}

TEST(K8sDaemonTest, EachOverlaysConfigurationMatchesTheDaemonSet) {
  const YAML::Node ds = YAML::LoadFile((kK8s / "base" / "daemonset.yaml").string());
  const YAML::Node pod = ds["spec"]["template"]["spec"];
  const YAML::Node df11d = Container(ds, "df11d");
  std::map<std::string, int> ports;
  for (const YAML::Node& p : df11d["ports"]) {
    ports[p["name"].as<std::string>()] = p["containerPort"].as<int>();
  }
  const YAML::Node catalog_map = YAML::LoadFile((kK8s / "base" / "catalog.yaml").string());
  for (const char* overlay : kOverlays) {
    SCOPED_TRACE(overlay);
    const fs::path file = kK8s / "overlays" / overlay / "df11d.yaml";
    absl::StatusOr<config::Config> config = config::LoadConfigFile(file.string());
    ASSERT_TRUE(config.ok()) << config.status();

    // The container runs on the generated ConfigMap's key, where the config volume is mounted.
    const YAML::Node args = df11d["args"];
    ASSERT_EQ(args.size(), 2u);
    EXPECT_EQ(args[0].as<std::string>(), "--config");
    EXPECT_EQ(args[1].as<std::string>(), MountPath(df11d, "config") + "/df11d.yaml");

    EXPECT_EQ(Port(config->grpc_listen), ports.at("grpc"));
    EXPECT_EQ(Port(config->http_listen), ports.at("http"));
    EXPECT_EQ(config->grpc_listen.substr(0, config->grpc_listen.rfind(':')), "0.0.0.0");
    for (const char* probe : {"startupProbe", "readinessProbe", "livenessProbe"}) {
      EXPECT_EQ(df11d[probe]["grpc"]["port"].as<int>(), ports.at("grpc")) << probe;
    }
    // In-flight streams get the whole drain, and the process time to exit after it.
    EXPECT_LE(config->drain_seconds + 10, pod["terminationGracePeriodSeconds"].as<double>());
    // The listener closes when the drain begins; liveness must not give up before it ends.
    const YAML::Node liveness = df11d["livenessProbe"];
    EXPECT_LT(config->drain_seconds,
              liveness["periodSeconds"].as<double>() * liveness["failureThreshold"].as<double>());

    // The catalog, the hub token and the cache are where the DaemonSet puts them.
    EXPECT_EQ(fs::path(config->catalog_file).parent_path(), MountPath(df11d, "catalog"));
    EXPECT_TRUE(catalog_map["data"][fs::path(config->catalog_file).filename().string()])
        << config->catalog_file;
    EXPECT_EQ(fs::path(config->hub_token_file).parent_path(), MountPath(df11d, "hf-token"));
    EXPECT_EQ(fs::path(config->auth_tokens_file).parent_path(), MountPath(df11d, "api-tokens"));
    // Peers: the headless Service's pods, on the gRPC port, with the peer token's Secret.
    EXPECT_EQ(config->peer_dns, "df11d-nodes");
    EXPECT_EQ(config->peer_port, ports.at("grpc"));
    EXPECT_EQ(fs::path(config->peer_token_file).parent_path(), MountPath(df11d, "peer-token"));
    EXPECT_FALSE(config->metrics_need_token);  // the PodMonitor and the picker scrape openly
    EXPECT_EQ(config->hub_cache_dir, "");  // then $HF_HOME/hub
    EXPECT_EQ(Env(df11d, "HF_HOME"), MountPath(df11d, "hf-home"));
  }
  // The catalog the ConfigMap ships is one df11d reads.
  const std::string dir = testing::MakeTempDir();
  std::ofstream(dir + "/catalog.yaml") << catalog_map["data"]["catalog.yaml"].as<std::string>();
  absl::StatusOr<std::vector<config::ModelSpec>> catalog =
      config::LoadCatalogFile(dir + "/catalog.yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_GT(catalog->size(), 0u);
  // Long enough for preloads to download: 10 minutes at least.
  const YAML::Node startup = df11d["startupProbe"];
  EXPECT_GE(startup["periodSeconds"].as<int>() * startup["failureThreshold"].as<int>(), 600);
  fs::remove_all(dir);
}

// The demo model as hub files.
std::vector<testing::FakeFile> DemoHubFiles() {
  std::vector<testing::FakeFile> files;
  for (const fs::directory_entry& e :
       fs::directory_iterator(fs::path(DF11_SOURCE_DIR) / "models" / "demo")) {
    if (!e.is_regular_file()) continue;
    files.push_back({.path = e.path().filename().string(),
                     .content = "",
                     .disk_path = e.path().string(),
                     .lfs = e.path().extension() == ".safetensors"});
  }
  return files;
}

int ReadPortFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  return j.is_object() ? j.value("grpc", 0) : 0;
}

TEST(K8sDaemonTest, TheProbesGetTheAnswersTheyExpect) {
  const YAML::Node df11d =
      Container(YAML::LoadFile((kK8s / "base" / "daemonset.yaml").string()), "df11d");
  const std::string readiness = df11d["readinessProbe"]["grpc"]["service"].as<std::string>();
  const std::string startup = df11d["startupProbe"]["grpc"]["service"].as<std::string>();
  const std::string liveness = df11d["livenessProbe"]["grpc"]["service"].as<std::string>();

  // The GPU overlay's configuration on this machine's CPU, with a preload from a slow hub, the
  // hub token Secret absent, and the catalog where the test can write it.
  testing::FakeHub hub;
  hub.AddCommit("test-org/demo", "main", DemoHubFiles());
  const std::string dir = testing::MakeTempDir();
  YAML::Node config = YAML::LoadFile((kK8s / "overlays" / "gpu" / "df11d.yaml").string());
  config["devices"] = YAML::Load("[cpu]");
  config["memory"]["budget"] = "1GiB";
  config["preload"] = YAML::Load("[{source: test-org/demo, name: demo}]");
  config["catalog_file"] = dir + "/catalog.yaml";
  config["hub"]["endpoint"] = hub.endpoint();
  config["hub"]["cache_dir"] = dir + "/hub";
  config["hub"]["token_file"] = dir + "/no-secret/token";
  config["auth"]["tokens_file"] = dir + "/tokens.yaml";  // the probes need no token
  config.remove("peers");                                // no cluster DNS here
  std::ofstream(dir + "/tokens.yaml") << "tokens: []\n";
  std::ofstream(dir + "/catalog.yaml") << "catalog: []\n";

  hub.SetLatency(400);  // the preload takes a few seconds
  testing::DaemonProcess daemon;
  absl::Status started;
  std::thread start([&] { started = daemon.Start(YAML::Dump(config), dir); });
  int port = 0;
  for (int i = 0; i < 500 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    port = ReadPortFile(dir + "/ports.json");
  }
  ASSERT_NE(port, 0) << "no port file";
  const std::string address = absl::StrCat("127.0.0.1:", port);
  // Preloading: alive, not ready.
  EXPECT_EQ(testing::HealthStatus(address, liveness), 1);
  EXPECT_EQ(testing::HealthStatus(address, startup), 2);
  EXPECT_EQ(testing::HealthStatus(address, readiness), 2);
  start.join();
  hub.SetLatency(0);
  ASSERT_TRUE(started.ok()) << started;
  // Ready.
  for (const std::string& service :
       {readiness, startup, liveness, std::string("df11.v1.ModelHost")}) {
    EXPECT_EQ(testing::HealthStatus(daemon.address(), service), 1) << '"' << service << '"';
  }
  EXPECT_EQ(testing::HealthStatus(daemon.address(), "no-such-service"), -1);
  EXPECT_EQ(daemon.Terminate(), 0);
  fs::remove_all(dir);
}

TEST(K8sDaemonTest, TheDashboardQueriesMetricsDf11dExports) {
  absl::StatusOr<config::Config> config = config::ParseConfig("preload: []\n", "");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<server::Node>> node = server::Node::Create(*config);
  ASSERT_TRUE(node.ok()) << node.status();
  // A family is exported once it has a sample: a resident model, and one of each event.
  absl::StatusOr<registry::ModelInfo> demo = (*node)->registry().Load(
      {.source = (fs::path(DF11_SOURCE_DIR) / "models" / "demo").string(), .name = "demo"},
      [](const registry::LoadProgress&) { return true; });
  ASSERT_TRUE(demo.ok()) << demo.status();
  metrics::Metrics& m = (*node)->metrics();
  m.RequestFinished("shared", "demo", "ok");
  m.TokensGenerated("shared", "demo", 1);
  m.TimeToFirstToken("shared", "demo", 0.1);
  m.TimePerToken("shared", "demo").Observe(0.01);
  m.ModelLoad("ok", 1);
  m.ModelEvicted("shared", "demo");
  m.ModelSwap("cpu");
  // Each family's type and label names.
  std::map<std::string, std::pair<prometheus::MetricType, std::set<std::string>>> families;
  auto add = [&](const std::vector<prometheus::MetricFamily>& collected) {
    for (const prometheus::MetricFamily& f : collected) {
      families[f.name].first = f.type;
      for (const prometheus::ClientMetric& sample : f.metric) {
        for (const prometheus::ClientMetric::Label& l : sample.label) {
          families[f.name].second.insert(l.name);
        }
      }
    }
  };
  add(m.registry()->Collect());
  add(server::NodeCollector(**node).Collect());

  std::ifstream in(kK8s / "monitoring" / "df11d-dashboard.json");
  const nlohmann::json dashboard = nlohmann::json::parse(in);
  const std::regex metric(R"((df11_[a-z_]+|vllm:[a-z_]+))");
  const std::regex histogram_series("(.*)_(bucket|sum|count)$");
  const std::regex by(R"(by \(([^)]*)\))");
  const std::regex matcher(R"(([a-z_]+)\s*(=~|!=|!~|=))");
  const std::regex selector(R"(\{([^}]*)\})");
  // Labels Prometheus adds to every series (the PodMonitor adds node), and histograms' le.
  const std::set<std::string> added = {"node", "pod", "namespace", "instance", "job", "le"};
  // Every panel, rows' nested panels included.
  std::vector<nlohmann::json> panels;
  for (const nlohmann::json& p : dashboard["panels"]) {
    panels.push_back(p);
    for (const nlohmann::json& nested : p.value("panels", nlohmann::json::array())) {
      panels.push_back(nested);
    }
  }
  int queries = 0;
  for (const nlohmann::json& panel : panels) {
    for (const nlohmann::json& target : panel.value("targets", nlohmann::json::array())) {
      const std::string expr = target["expr"];
      SCOPED_TRACE(expr);
      ++queries;
      std::set<std::string> labels = added;
      for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it) {
        std::string name = (*it)[1];
        std::smatch series;
        if (!families.count(name) && std::regex_match(name, series, histogram_series) &&
            families.count(series[1]) &&
            families.at(series[1]).first == prometheus::MetricType::Histogram) {
          name = series[1];
        }
        ASSERT_TRUE(families.count(name)) << panel["title"] << ": " << name;
        labels.insert(families.at(name).second.begin(), families.at(name).second.end());
      }
      // Labels grouped by and matched on exist on the series queried.
      std::vector<std::string> used;
      for (std::sregex_iterator it(expr.begin(), expr.end(), by), end; it != end; ++it) {
        for (absl::string_view l : absl::StrSplit((*it)[1].str(), ',')) {
          used.emplace_back(absl::StripAsciiWhitespace(l));
        }
      }
      for (std::sregex_iterator it(expr.begin(), expr.end(), selector), end; it != end; ++it) {
        const std::string inside = (*it)[1];
        for (std::sregex_iterator j(inside.begin(), inside.end(), matcher), e; j != e; ++j) {
          used.push_back((*j)[1]);
        }
      }
      for (const std::string& l : used) EXPECT_TRUE(labels.count(l)) << panel["title"] << ": " << l;
    }
  }
  EXPECT_GE(queries, 10);
  // The templating variables too.
  for (const nlohmann::json& variable : dashboard["templating"]["list"]) {
    if (!variable.contains("definition")) continue;
    std::smatch found;
    const std::string definition = variable["definition"];
    ASSERT_TRUE(std::regex_search(definition, found, metric)) << definition;
    EXPECT_TRUE(families.count(found[1])) << definition;
  }
}

}  // namespace
}  // namespace df11
