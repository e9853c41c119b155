#include "daemon/server/proto_conversion.h"

namespace df11::server {

df11::v1::ModelInfo ToProto(const registry::ModelInfo& info) {
  df11::v1::ModelInfo out;
  out.set_name(info.name);
  out.set_owner(info.owner);
  switch (info.state) {
    case registry::ModelState::kLoading: out.set_state(df11::v1::MODEL_STATE_LOADING); break;
    case registry::ModelState::kReady: out.set_state(df11::v1::MODEL_STATE_READY); break;
    case registry::ModelState::kUnloading: out.set_state(df11::v1::MODEL_STATE_UNLOADING); break;
    case registry::ModelState::kFailed: out.set_state(df11::v1::MODEL_STATE_FAILED); break;
    case registry::ModelState::kAvailable:
      out.set_state(df11::v1::MODEL_STATE_AVAILABLE);
      break;
  }
  out.set_failure_reason(info.failure_reason);
  out.set_source(info.source);
  out.set_resolved_revision(info.resolved_revision);
  out.set_architecture(info.architecture);
  out.set_df11(info.df11);
  df11::v1::DeviceBytes* bytes = out.add_bytes();
  bytes->set_device(info.device);
  bytes->set_df11_units(info.bytes.df11_units);
  bytes->set_passthrough(info.bytes.passthrough);
  bytes->set_kv_cache_in_use(info.bytes.kv_cache_in_use);
  bytes->set_total(info.bytes.total());
  out.set_pinned(info.pinned);
  out.set_keep_alive_seconds(info.keep_alive_seconds);
  out.set_last_used_unix_ms(info.last_used_unix_ms);
  out.set_requests_served(info.requests_served);
  out.set_tokens_generated(info.tokens_generated);
  out.set_context_length(info.context_length);
  out.set_running_requests(info.running_requests);
  out.set_queued_requests(info.queued_requests);
  return out;
}

df11::v1::DeviceStatus ToProto(const registry::DeviceMemory& memory) {
  df11::v1::DeviceStatus out;
  out.set_device(memory.device);
  out.set_total(memory.total);
  out.set_budget(memory.budget);
  out.set_weights(memory.weights);
  out.set_scratch(memory.scratch);
  out.set_kv_cache(memory.kv_cache);
  out.set_workspace(memory.workspace);
  out.set_used(memory.used());
  out.set_free(memory.free());
  out.set_placeable(memory.placeable);
  out.set_driver_free(memory.driver_free);
  out.set_arena(memory.arena);
  out.set_kv_pool_free(memory.kv_pool_free);
  out.set_description(memory.description);
  return out;
}

df11::v1::NodeStatus ToProto(const NodeStatus& status) {
  df11::v1::NodeStatus out;
  for (const registry::DeviceMemory& d : status.devices) *out.add_devices() = ToProto(d);
  for (const registry::ModelInfo& m : status.models) *out.add_models() = ToProto(m);
  out.set_queued_requests(static_cast<int32_t>(status.queued_requests));
  out.set_running_requests(static_cast<int32_t>(status.running_requests));
  out.set_version(DF11_VERSION);
  out.set_time_unix_ms(status.time_unix_ms);
  return out;
}

df11::v1::LoadPhase ToProto(registry::LoadProgress::Phase phase) {
  switch (phase) {
    case registry::LoadProgress::Phase::kResolving: return df11::v1::LOAD_PHASE_RESOLVING;
    case registry::LoadProgress::Phase::kDownloading: return df11::v1::LOAD_PHASE_DOWNLOADING;
    case registry::LoadProgress::Phase::kPlacing: return df11::v1::LOAD_PHASE_PLACING;
    case registry::LoadProgress::Phase::kDone: return df11::v1::LOAD_PHASE_DONE;
  }
  return df11::v1::LOAD_PHASE_UNSPECIFIED;
}

df11::v1::FinishReason ToProto(runtime::FinishReason reason) {
  switch (reason) {
    case runtime::FinishReason::kStop: return df11::v1::FINISH_REASON_STOP;
    case runtime::FinishReason::kLength: return df11::v1::FINISH_REASON_LENGTH;
    case runtime::FinishReason::kNone: break;
  }
  return df11::v1::FINISH_REASON_UNSPECIFIED;
}

}  // namespace df11::server
