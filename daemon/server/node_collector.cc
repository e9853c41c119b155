#include "daemon/server/node_collector.h"

#include <string>
#include <utility>

namespace df11::server {
namespace {

prometheus::MetricFamily Gauges(std::string name, std::string help) {
  return prometheus::MetricFamily{std::move(name), std::move(help), prometheus::MetricType::Gauge,
                                  {}};
}

void Add(prometheus::MetricFamily& family, std::vector<prometheus::ClientMetric::Label> labels,
         double value) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

}  // namespace

std::vector<prometheus::MetricFamily> NodeCollector::Collect() const {
  const NodeStatus status = node_.Status();
  auto device_bytes = Gauges("df11_device_memory_bytes",
                             "Memory of each device by kind: total, budget, used, free, weights, "
                             "scratch, kv_cache, kv_pool_free, workspace, placeable; driver_free "
                             "and arena from the driver (GPUs)");
  auto model_bytes = Gauges("df11_model_resident_bytes",
                            "Memory of each model by device and kind: df11_units, passthrough, "
                            "kv_cache");
  auto model_up = Gauges("df11_model_state", "1 for each model's current state");
  auto queued = Gauges("df11_requests_waiting", "Generate requests waiting, by model");
  auto running = Gauges("df11_requests_running", "Generate requests running, by model");
  auto waiting_all = Gauges("vllm:num_requests_waiting", "Requests waiting (all models)");
  auto running_all = Gauges("vllm:num_requests_running", "Requests running (all models)");
  auto kv_usage = Gauges("vllm:kv_cache_usage_perc",
                         "KV cache in use over what the budget leaves for it, 0-1");
  auto gpu_kv_usage = Gauges("vllm:gpu_cache_usage_perc",
                             "The same as vllm:kv_cache_usage_perc, under its older name");

  uint64_t kv = 0, kv_room = 0;
  for (const registry::DeviceMemory& d : status.devices) {
    for (const auto& [kind, value] :
         std::initializer_list<std::pair<const char*, uint64_t>>{{"total", d.total},
                                                                 {"budget", d.budget},
                                                                 {"used", d.used()},
                                                                 {"free", d.free()},
                                                                 {"weights", d.weights},
                                                                 {"scratch", d.scratch},
                                                                 {"kv_cache", d.kv_cache},
                                                                 {"kv_pool_free", d.kv_pool_free},
                                                                 {"workspace", d.workspace},
                                                                 {"placeable", d.placeable},
                                                                 {"driver_free", d.driver_free},
                                                                 {"arena", d.arena}}) {
      Add(device_bytes, {{"device", d.device}, {"kind", kind}}, static_cast<double>(value));
    }
    kv += d.kv_cache;
    // A GPU's KV cache lives in its pool; the CPU's takes what the budget leaves.
    kv_room += d.kv_cache + (d.arena > 0 ? d.kv_pool_free : d.free());
  }
  for (const registry::ModelInfo& m : status.models) {
    for (const auto& [kind, value] : std::initializer_list<std::pair<const char*, uint64_t>>{
             {"df11_units", m.bytes.df11_units},
             {"passthrough", m.bytes.passthrough},
             {"kv_cache", m.bytes.kv_cache_in_use}}) {
      Add(model_bytes, {{"model", m.name}, {"device", m.device}, {"kind", kind}},
          static_cast<double>(value));
    }
    Add(model_up, {{"model", m.name}, {"state", std::string(registry::ModelStateName(m.state))}},
        1);
    Add(queued, {{"model", m.name}}, m.queued_requests);
    Add(running, {{"model", m.name}}, m.running_requests);
  }
  Add(waiting_all, {}, static_cast<double>(status.queued_requests));
  Add(running_all, {}, static_cast<double>(status.running_requests));
  const double usage = kv_room > 0 ? static_cast<double>(kv) / static_cast<double>(kv_room) : 0;
  Add(kv_usage, {}, usage);
  Add(gpu_kv_usage, {}, usage);
  return {device_bytes, model_bytes, model_up, queued,    running,
          waiting_all,  running_all, kv_usage, gpu_kv_usage};
}

}  // namespace df11::server
