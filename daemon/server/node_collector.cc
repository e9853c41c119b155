#include "daemon/server/node_collector.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
  auto cache_config = Gauges("vllm:cache_config_info",
                             "The KV cache in blocks: positions per block of the resident model "
                             "with the largest positions, and blocks");
  auto lora = Gauges("vllm:lora_requests_info",
                     "Resident models (running_lora_adapters), loading ones "
                     "(waiting_lora_adapters) and how many models of the catalog's median size the "
                     "device holds "
                     "(max_lora); the value is when these last changed (Unix seconds)");

  auto insecure = Gauges("df11_insecure",
                         "1 when callers beyond loopback need no token (insecure: true and no "
                         "auth.tokens_file)");
  Add(insecure, {}, node_.config().insecure && node_.config().auth_tokens_file.empty() ? 1.0 : 0.0);

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
      Add(model_bytes,
          {{"model", m.name}, {"tenant", m.owner}, {"device", m.device}, {"kind", kind}},
          static_cast<double>(value));
    }
    Add(model_up,
        {{"model", m.name},
         {"tenant", m.owner},
         {"state", std::string(registry::ModelStateName(m.state))}},
        1);
    Add(queued, {{"model", m.name}, {"tenant", m.owner}}, m.queued_requests);
    Add(running, {{"model", m.name}, {"tenant", m.owner}}, m.running_requests);
  }
  // KV blocks: a GPU's pool pages; on the CPU a position is a block and the free budget holds them.
  uint64_t per_position = 0;
  std::vector<std::string> running_models, waiting_models;
  uint64_t resident_bytes_sum = 0;
  std::vector<uint64_t> sizes;
  for (const registry::ModelInfo& m : status.models) {
    per_position = std::max(per_position, m.kv_bytes_per_position);
    if (m.state == registry::ModelState::kReady) running_models.push_back(m.name);
    if (m.state == registry::ModelState::kLoading) waiting_models.push_back(m.name);
    // Weights only: a model's KV caches come and go with its requests.
    if (m.state == registry::ModelState::kReady) {
      resident_bytes_sum += m.bytes.df11_units + m.bytes.passthrough;
    }
  }
  uint64_t block_size = 1, blocks = 0;
  if (!status.devices.empty() && per_position > 0) {
    const registry::DeviceMemory& d = status.devices.front();
    if (d.arena > 0) {
      const uint64_t page = static_cast<uint64_t>(node_.config().kv_page_bytes);
      block_size = std::max<uint64_t>(1, page / per_position);
      blocks = (d.kv_cache + d.kv_pool_free) / page;
    } else {
      blocks = (d.kv_cache + d.free()) / per_position;
    }
  }
  Add(cache_config,
      {{"block_size", std::to_string(block_size)}, {"num_gpu_blocks", std::to_string(blocks)}}, 1);
  // max_lora: how many models of the catalog's median size the device holds besides its fixed
  // parts (workspace, a GPU's KV pool), and at least the models resident or loading. A capacity,
  // not what is free now: KV caches that requests take and give back would change it, and each
  // value is a new series of the info gauge.
  for (const config::ModelSpec& spec : node_.Catalog()) {
    if (std::optional<uint64_t> bytes = node_.CatalogModelBytes(spec)) sizes.push_back(*bytes);
  }
  if (sizes.empty() && !running_models.empty()) {
    sizes.push_back(resident_bytes_sum / running_models.size());
  }
  uint64_t max_lora = running_models.size() + waiting_models.size();
  if (!sizes.empty() && !status.devices.empty()) {
    std::nth_element(sizes.begin(), sizes.begin() + sizes.size() / 2, sizes.end());
    const uint64_t median = std::max<uint64_t>(1, sizes[sizes.size() / 2]);
    const registry::DeviceMemory& d = status.devices.front();
    const uint64_t fixed = d.workspace + (d.arena > 0 ? d.kv_cache + d.kv_pool_free : 0);
    const uint64_t room = d.budget > fixed ? d.budget - fixed : 0;
    max_lora = std::max<uint64_t>(max_lora, room / median);
  }
  const std::string running_list = absl::StrJoin(running_models, ",");
  const std::string waiting_list = absl::StrJoin(waiting_models, ",");
  double changed_at = 0;
  {
    absl::MutexLock lock(&mu_);
    const std::string labels = absl::StrCat(max_lora, "|", running_list, "|", waiting_list);
    if (labels != last_labels_ || changed_at_ == 0) {
      last_labels_ = labels;
      changed_at_ = static_cast<double>(status.time_unix_ms) / 1000.0;
    }
    changed_at = changed_at_;
  }
  Add(lora,
      {{"max_lora", std::to_string(max_lora)},
       {"running_lora_adapters", running_list},
       {"waiting_lora_adapters", waiting_list}},
      changed_at);

  Add(waiting_all, {}, static_cast<double>(status.queued_requests));
  Add(running_all, {}, static_cast<double>(status.running_requests));
  const double usage = kv_room > 0 ? static_cast<double>(kv) / static_cast<double>(kv_room) : 0;
  Add(kv_usage, {}, usage);
  Add(gpu_kv_usage, {}, usage);
  return {device_bytes, model_bytes, model_up,     queued,       running, waiting_all,
          running_all,  kv_usage,    gpu_kv_usage, cache_config, lora,    insecure};
}

std::vector<prometheus::MetricFamily> VisibleMetrics(std::vector<prometheus::MetricFamily> families,
                                                     const Caller& caller) {
  if (caller.admin()) return families;
  std::vector<prometheus::MetricFamily> out;
  for (prometheus::MetricFamily& family : families) {
    if (family.name == "vllm:lora_requests_info") continue;  // names every tenant's models
    std::erase_if(family.metric, [&](const prometheus::ClientMetric& metric) {
      return std::any_of(metric.label.begin(), metric.label.end(),
                         [&](const prometheus::ClientMetric::Label& label) {
                           return label.name == "tenant" && !caller.Sees(label.value);
                         });
    });
    out.push_back(std::move(family));
  }
  return out;
}

}  // namespace df11::server
