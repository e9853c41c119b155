// deploy/k8s/router against what df11d exports: the endpoint picker's df11d engine maps onto
// metric families a node's /metrics has, the pool targets df11d's default HTTP port, and every
// file the kustomization names exists.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>
#include <string>

#include "daemon/config/config.h"
#include "daemon/server/node.h"
#include "daemon/server/node_collector.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace df11::server {
namespace {

namespace fs = std::filesystem;

fs::path RouterDir() { return fs::path(DF11_SOURCE_DIR) / "deploy" / "k8s" / "router"; }

TEST(RouterManifestsTest, ThePickersEngineReadsMetricsDf11dExports) {
  const YAML::Node config_map = YAML::LoadFile((RouterDir() / "epp-config.yaml").string());
  const YAML::Node epp = YAML::Load(config_map["data"]["epp-config.yaml"].as<std::string>());
  EXPECT_EQ(epp["kind"].as<std::string>(), "EndpointPickerConfig");
  YAML::Node engine;
  for (const YAML::Node& plugin : epp["plugins"]) {
    if (plugin["type"].as<std::string>() != "core-metrics-extractor") continue;
    EXPECT_EQ(plugin["parameters"]["engineLabelKey"].as<std::string>(), "llm-d.ai/engine-type");
    for (const YAML::Node& e : plugin["parameters"]["engineConfigs"]) {
      if (e["name"].as<std::string>() == "df11d") engine = e;
    }
  }
  ASSERT_TRUE(engine.IsDefined()) << "no df11d engine in epp-config.yaml";

  // The metric families of a node with no model.
  absl::StatusOr<config::Config> config = config::ParseConfig("preload: []\n", "");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<Node>> node = Node::Create(*config);
  ASSERT_TRUE(node.ok()) << node.status();
  std::set<std::string> families;
  for (const prometheus::MetricFamily& f : NodeCollector(**node).Collect()) families.insert(f.name);
  for (const char* spec :
       {"queuedRequestsSpec", "runningRequestsSpec", "kvUsageSpec", "loraSpec", "cacheInfoSpec"}) {
    SCOPED_TRACE(spec);
    ASSERT_TRUE(engine[spec].IsDefined());
    EXPECT_THAT(families, ::testing::Contains(engine[spec].as<std::string>()));
  }

  const YAML::Node pool = YAML::LoadFile((RouterDir() / "inferencepool.yaml").string());
  const std::string http = config->http_listen;
  EXPECT_EQ(pool["spec"]["targetPorts"][0]["number"].as<std::string>(),
            http.substr(http.rfind(':') + 1));
  EXPECT_EQ(pool["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(),
            "df11d");
}

TEST(RouterManifestsTest, TheKustomizationNamesFilesThatExist) {
  const YAML::Node k = YAML::LoadFile((RouterDir() / "kustomization.yaml").string());
  ASSERT_GT(k["resources"].size(), 0u);
  for (const YAML::Node& r : k["resources"]) {
    EXPECT_TRUE(fs::exists(RouterDir() / r.as<std::string>())) << r.as<std::string>();
    // Every file parses as YAML documents, each with a kind.
    for (const YAML::Node& doc :
         YAML::LoadAllFromFile((RouterDir() / r.as<std::string>()).string())) {
      EXPECT_TRUE(doc["kind"].IsDefined()) << r.as<std::string>();
    }
  }
}

}  // namespace
}  // namespace df11::server
