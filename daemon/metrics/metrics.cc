#include "daemon/metrics/metrics.h"

#include "prometheus/counter.h"
#include "prometheus/histogram.h"

namespace df11::metrics {
namespace {

// Seconds, from a fast decode step of a small model to a slow first token of a large one.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  return kBuckets;
}

const prometheus::Histogram::BucketBoundaries& LoadBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {0.1, 0.5, 1,   5,   10,
                                                                   30,  60,  120, 300, 900};
  return kBuckets;
}

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("df11_requests_total")
                    .Help("Generate requests that ended, by model and outcome")
                    .Register(*registry_)),
      stalled_(prometheus::BuildCounter()
                   .Name("df11_stalled_streams_total")
                   .Help("Streams cancelled because the client read nothing for "
                         "limits.stream_stall, by model")
                   .Register(*registry_)),
      tokens_(prometheus::BuildCounter()
                  .Name("df11_generated_tokens_total")
                  .Help("Tokens generated, by model")
                  .Register(*registry_)),
      ttft_(prometheus::BuildHistogram()
                .Name("df11_time_to_first_token_seconds")
                .Help("From a request's arrival to its first token, by model")
                .Register(*registry_)),
      tpot_(prometheus::BuildHistogram()
                .Name("df11_time_per_output_token_seconds")
                .Help("Time between consecutive tokens of a request, by model")
                .Register(*registry_)),
      loads_(prometheus::BuildCounter()
                 .Name("df11_model_loads_total")
                 .Help("Model loads that ended, by outcome")
                 .Register(*registry_)),
      load_seconds_(prometheus::BuildHistogram()
                        .Name("df11_model_load_duration_seconds")
                        .Help("Duration of model loads that ended, by outcome")
                        .Register(*registry_)),
      evictions_(prometheus::BuildCounter()
                     .Name("df11_model_evictions_total")
                     .Help("Models unloaded to make room for a load, by model")
                     .Register(*registry_)),
      swaps_(prometheus::BuildCounter()
                 .Name("df11_model_swaps_total")
                 .Help("Engine steps that ran a different model than the step before, by device")
                 .Register(*registry_)),
      received_(prometheus::BuildCounter()
                    .Name("df11_download_bytes_total")
                    .Help("Bytes of hub model files received into the hub cache, by source "
                          "(hub or peer)")
                    .Register(*registry_)),
      http_refused_(prometheus::BuildCounter()
                        .Name("df11_http_refused_total")
                        .Help("HTTP clients refused or dropped by the listener, by reason "
                              "(connection_limit, client_connection_limit, header_timeout, "
                              "body_timeout, body_too_large, header_too_large, busy, malformed, "
                              "stopping)")
                        .Register(*registry_)) {}

void Metrics::RequestFinished(const std::string& tenant, const std::string& model,
                              const std::string& outcome) {
  requests_.Add({{"model", model}, {"outcome", outcome}, {"tenant", tenant}}).Increment();
}

void Metrics::StreamStalled(const std::string& tenant, const std::string& model) {
  stalled_.Add({{"model", model}, {"tenant", tenant}}).Increment();
}

void Metrics::TokensGenerated(const std::string& tenant, const std::string& model,
                              uint64_t tokens) {
  tokens_.Add({{"model", model}, {"tenant", tenant}}).Increment(static_cast<double>(tokens));
}

void Metrics::TimeToFirstToken(const std::string& tenant, const std::string& model,
                               double seconds) {
  ttft_.Add({{"model", model}, {"tenant", tenant}}, LatencyBuckets()).Observe(seconds);
}

prometheus::Histogram& Metrics::TimePerToken(const std::string& tenant, const std::string& model) {
  return tpot_.Add({{"model", model}, {"tenant", tenant}}, LatencyBuckets());
}

void Metrics::ModelLoad(const std::string& outcome, double seconds) {
  loads_.Add({{"outcome", outcome}}).Increment();
  load_seconds_.Add({{"outcome", outcome}}, LoadBuckets()).Observe(seconds);
}

void Metrics::FilesReceived(const std::string& source, uint64_t bytes) {
  received_.Add({{"source", source}}).Increment(static_cast<double>(bytes));
}

void Metrics::HttpRefused(const std::string& reason) {
  http_refused_.Add({{"reason", reason}}).Increment();
}

void Metrics::ModelEvicted(const std::string& tenant, const std::string& model) {
  evictions_.Add({{"model", model}, {"tenant", tenant}}).Increment();
}

void Metrics::ModelSwap(const std::string& device) { swaps_.Add({{"device", device}}).Increment(); }

}  // namespace df11::metrics
