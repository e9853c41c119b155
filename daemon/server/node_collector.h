// The gauges of /metrics, read from the node's status at each scrape: memory per device and per
// model by kind, queue depths and running requests per model, and the gauges LLM-aware Kubernetes
// routers read under vLLM's names (waiting and running requests, a 0-1 KV cache utilisation).
//
//   HttpServer::Start(address, {metrics.registry(), std::make_shared<NodeCollector>(*node)});
#ifndef DF11_DAEMON_SERVER_NODE_COLLECTOR_H_
#define DF11_DAEMON_SERVER_NODE_COLLECTOR_H_

#include <vector>

#include "daemon/server/node.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace df11::server {

class NodeCollector final : public prometheus::Collectable {
 public:
  explicit NodeCollector(Node& node) : node_(node) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  Node& node_;
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_NODE_COLLECTOR_H_
