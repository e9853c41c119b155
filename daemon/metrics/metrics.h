// The daemon's event metrics (prometheus-cpp): counters and histograms that the registry and the
// scheduler bump as things happen. Gauges of the current state (bytes, queue depths) are read when
// scraped, from the node's status (daemon/server/node_collector.h). Thread-safe.
//
//   Metrics metrics;
//   metrics.RequestFinished("shared", "demo", "ok");
//   HttpServer::Start(address, {metrics.registry(), ...});   // serves it on /metrics
#ifndef DF11_DAEMON_METRICS_METRICS_H_
#define DF11_DAEMON_METRICS_METRICS_H_

#include <memory>
#include <string>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace df11::metrics {

class Metrics {
 public:
  Metrics();

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // Series of a model carry its labels `model` and `tenant` (its owner, "shared" for the
  // catalog's), so that /metrics can show a tenant only its own.
  //
  // A Generate request ended: `outcome` is "ok", "cancelled" or the lower-case gRPC code name
  // of its error ("invalid_argument", ...).
  void RequestFinished(const std::string& tenant, const std::string& model,
                       const std::string& outcome);
  // A stream was cancelled because its client read nothing for limits.stream_stall.
  void StreamStalled(const std::string& tenant, const std::string& model);
  void TokensGenerated(const std::string& tenant, const std::string& model, uint64_t tokens);
  void TimeToFirstToken(const std::string& tenant, const std::string& model, double seconds);
  // The histogram of the time between a model's tokens: found once per request (Family::Add
  // hashes the labels and locks the family), observed per token. It lives as long as this.
  prometheus::Histogram& TimePerToken(const std::string& tenant, const std::string& model);
  // A load ended ("ok", "failed" or "cancelled") after `seconds`.
  void ModelLoad(const std::string& outcome, double seconds);
  void ModelEvicted(const std::string& tenant, const std::string& model);
  // `bytes` of a hub model's files arrived into the hub cache from `source` ("hub" or "peer").
  void FilesReceived(const std::string& source, uint64_t bytes);
  // An engine step ran a different model than the step before on `device`.
  void ModelSwap(const std::string& device);
  // The HTTP listener refused or dropped a client (http_listener.h names the reasons).
  void HttpRefused(const std::string& reason);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& stalled_;
  prometheus::Family<prometheus::Counter>& tokens_;
  prometheus::Family<prometheus::Histogram>& ttft_;
  prometheus::Family<prometheus::Histogram>& tpot_;
  prometheus::Family<prometheus::Counter>& loads_;
  prometheus::Family<prometheus::Histogram>& load_seconds_;
  prometheus::Family<prometheus::Counter>& evictions_;
  prometheus::Family<prometheus::Counter>& swaps_;
  prometheus::Family<prometheus::Counter>& received_;
  prometheus::Family<prometheus::Counter>& http_refused_;
};

}  // namespace df11::metrics

#endif  // DF11_DAEMON_METRICS_METRICS_H_
