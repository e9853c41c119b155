// The gauges of /metrics, read from the node's status at each scrape: memory per device and per
// model by kind, queue depths and running requests per model, and the gauges LLM-aware Kubernetes
// routers (the Gateway API Inference Extension's endpoint picker, llm-d) read under vLLM's names:
// waiting and running requests, a 0-1 KV cache utilisation, the KV cache's blocks
// (vllm:cache_config_info) and the models as LoRA adapters (vllm:lora_requests_info: the resident
// models running, the loading ones waiting, and max_lora: how many models of the catalog's median
// size the device holds, a capacity that requests' KV caches do not move), so that the picker's
// LoRA-affinity scorer sends a request to a node where its model is resident, or else to one with
// room.
//
// Series of a model carry the labels `model` and `tenant` (its owner).
//
//   HttpServer::Start(address, {metrics.registry(), std::make_shared<NodeCollector>(*node)});
#ifndef DF11_DAEMON_SERVER_NODE_COLLECTOR_H_
#define DF11_DAEMON_SERVER_NODE_COLLECTOR_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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
  // vllm:lora_requests_info's value is the time its labels last changed, as vLLM's is.
  mutable absl::Mutex mu_;
  mutable std::string last_labels_ ABSL_GUARDED_BY(mu_);
  mutable double changed_at_ ABSL_GUARDED_BY(mu_) = 0;
};

// What `caller` may see of `families` (with auth.metrics: token): an admin everything; a user
// no series of another tenant's model, and not vllm:lora_requests_info, whose labels name every
// resident model (routers scrape with an admin token, or with auth.metrics: open).
std::vector<prometheus::MetricFamily> VisibleMetrics(std::vector<prometheus::MetricFamily> families,
                                                     const Caller& caller);

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_NODE_COLLECTOR_H_
