#include "daemon/server/model_host_service.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/audit/audit.h"
#include "daemon/hub/cache.h"
#include "daemon/runtime/engine/estimate.h"
#include "daemon/server/generate_stream.h"
#include "daemon/server/grpc_caller.h"
#include "daemon/server/log.h"
#include "daemon/server/model_roots.h"
#include "daemon/server/proto_conversion.h"
#include "daemon/server/status_conversion.h"

namespace df11::server {
namespace {

absl::Status ValidSeconds(const char* field, double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must be a finite number >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

grpc::Status ModelHostService::Authorize(const grpc::ServerContext& context, Caller* caller) const {
  absl::StatusOr<Caller> found = ModelHostCaller(node_, context);
  if (!found.ok()) return ToGrpcStatus(found.status());
  if (caller != nullptr) *caller = *std::move(found);
  return grpc::Status::OK;
}

grpc::Status ModelHostService::LoadModel(grpc::ServerContext* context,
                                         const df11::v1::LoadModelRequest* request,
                                         grpc::ServerWriter<df11::v1::LoadModelProgress>* writer) {
  Caller caller;
  if (grpc::Status s = Authorize(*context, &caller); !s.ok()) return s;
  auto refuse = [&](const absl::Status& refusal) {
    audit::Record({.event = "permission_refusal",
                   .tenant = caller.tenant,
                   .token = caller.token_name,
                   .peer = context->peer(),
                   .source = request->source(),
                   .model = request->name(),
                   .outcome = refusal});
    return ToGrpcStatus(refusal);
  };
  absl::StatusOr<CheckedSource> checked = node_.CheckLoadSource(request->source(), caller);
  if (!checked.ok()) return refuse(checked.status());
  if (absl::Status s = ValidSeconds("keep_alive_seconds", request->keep_alive_seconds()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<registry::LoadRequest> load =
      node_.LoadRequestFor(caller,
                           {.source = checked->source,
                            // The name from the source as the client wrote it.
                            .name = registry::ModelName(request->source(), request->name()),
                            .pin = request->pin(),
                            .keep_alive_seconds =
                                request->keep_alive_seconds() > 0
                                    ? std::optional<double>(request->keep_alive_seconds())
                                    : std::nullopt,
                            .device = request->device(),
                            .hub_only = checked->hub},
                           request->shared());
  if (!load.ok()) return refuse(load.status());
  // Progress goes out when the phase changes, and at most every 100 ms within a phase.
  df11::v1::LoadPhase last_phase = df11::v1::LOAD_PHASE_UNSPECIFIED;
  auto last_sent = std::chrono::steady_clock::time_point();
  auto on_progress = [&](const registry::LoadProgress& p) {
    if (context->IsCancelled()) return false;
    const df11::v1::LoadPhase phase = ToProto(p.phase);
    const auto now = std::chrono::steady_clock::now();
    if (phase == df11::v1::LOAD_PHASE_DONE) return true;  // the final message follows
    if (phase == last_phase && now - last_sent < std::chrono::milliseconds(100) &&
        p.bytes_done < p.bytes_total) {
      return true;
    }
    last_phase = phase;
    last_sent = now;
    df11::v1::LoadModelProgress message;
    message.set_phase(phase);
    message.set_bytes_done(p.bytes_done);
    message.set_bytes_total(p.bytes_total);
    for (const registry::FileProgress& f : p.files) {
      df11::v1::LoadFileProgress* file = message.add_files();
      file->set_path(f.path);
      file->set_size(f.size);
      file->set_bytes_downloaded(f.downloaded);
      file->set_source(f.source);
      file->set_bytes_placed(f.placed);
    }
    message.mutable_model()->set_state(df11::v1::MODEL_STATE_LOADING);
    message.mutable_model()->set_source(request->source());
    return stall_watchdog_.Write(context, writer, message);
  };
  absl::StatusOr<registry::ModelInfo> info = node_.registry().Load(*load, on_progress);
  audit::Record({.event = config::IsQuotaExceeded(info.status()) ? "quota_refusal" : "load",
                 .tenant = caller.tenant,
                 .token = caller.token_name,
                 .peer = context->peer(),
                 .source = request->source(),
                 .model = info.ok() ? info->name : request->name(),
                 .outcome = info.status()});
  if (!info.ok()) {
    Log(absl::StrCat("load of ", request->source(), " failed: ", info.status().ToString()));
    return ToGrpcStatus(info.status());
  }
  Log(absl::StrCat("loaded ", info->name, " from ", info->source,
                   info->load_note.empty() ? "" : absl::StrCat(" (", info->load_note, ")")));
  df11::v1::LoadModelProgress done;
  done.set_phase(df11::v1::LOAD_PHASE_DONE);
  const uint64_t bytes = info->bytes.df11_units + info->bytes.passthrough;
  done.set_bytes_done(bytes);
  done.set_bytes_total(bytes);
  *done.mutable_model() = ToProto(*info);
  if (!stall_watchdog_.Write(context, writer, done)) return grpc::Status::CANCELLED;
  return grpc::Status::OK;
}

grpc::Status ModelHostService::UnloadModel(grpc::ServerContext* context,
                                           const df11::v1::UnloadModelRequest* request,
                                           df11::v1::UnloadModelResponse* response) {
  Caller caller;
  if (grpc::Status s = Authorize(*context, &caller); !s.ok()) return s;
  if (request->name().empty()) return ToGrpcStatus(absl::InvalidArgumentError("name: empty"));
  if (absl::Status s = ValidSeconds("drain_seconds", request->drain_seconds()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  // No drain time given: cancel at once when asked to, else the configured shutdown drain.
  const double drain = request->drain_seconds() > 0  ? request->drain_seconds()
                       : request->cancel_in_flight() ? 0
                                                     : node_.config().drain_seconds;
  absl::StatusOr<UnloadOutcome> outcome =
      node_.Unload(caller, request->name(), request->owner(), absl::Seconds(drain), drain == 0);
  audit::Record({.event = "unload",
                 .tenant = caller.tenant,
                 .token = caller.token_name,
                 .peer = context->peer(),
                 .model = request->name(),
                 .outcome = outcome.status()});
  if (!outcome.ok()) return ToGrpcStatus(outcome.status());
  *response->mutable_model() = ToProto(outcome->result.model);
  response->set_bytes_freed(outcome->result.bytes_freed);
  response->set_requests_cancelled(outcome->requests_cancelled);
  return grpc::Status::OK;
}

grpc::Status ModelHostService::ListModels(grpc::ServerContext* context,
                                          const df11::v1::ListModelsRequest*,
                                          df11::v1::ListModelsResponse* response) {
  Caller caller;
  if (grpc::Status s = Authorize(*context, &caller); !s.ok()) return s;
  for (const registry::ModelInfo& info : node_.ListModels(caller)) {
    *response->add_models() = ToProto(info);
  }
  return grpc::Status::OK;
}

grpc::Status ModelHostService::GetModel(grpc::ServerContext* context,
                                        const df11::v1::GetModelRequest* request,
                                        df11::v1::ModelInfo* response) {
  Caller caller;
  if (grpc::Status s = Authorize(*context, &caller); !s.ok()) return s;
  absl::StatusOr<registry::ModelInfo> info =
      node_.GetModel(caller, request->name(), request->owner());
  if (!info.ok()) return ToGrpcStatus(info.status());
  *response = ToProto(*info);
  return grpc::Status::OK;
}

grpc::Status ModelHostService::EstimateModel(grpc::ServerContext* context,
                                             const df11::v1::EstimateModelRequest* request,
                                             df11::v1::EstimateModelResponse* response) {
  Caller caller;
  if (grpc::Status s = Authorize(*context, &caller); !s.ok()) return s;
  absl::StatusOr<CheckedSource> checked = node_.CheckLoadSource(request->source(), caller);
  if (!checked.ok()) {
    audit::Record({.event = "permission_refusal",
                   .tenant = caller.tenant,
                   .token = caller.token_name,
                   .peer = context->peer(),
                   .source = request->source(),
                   .outcome = checked.status()});
    return ToGrpcStatus(checked.status());
  }
  absl::StatusOr<hub::ModelSource> source =
      hub::ParseModelSource(checked->source, /*allow_local=*/!checked->hub);
  if (!source.ok()) return ToGrpcStatus(source.status());
  absl::StatusOr<runtime::ModelEstimate> e;
  if (source->is_hub) {
    // Only the small files are fetched; the weights' sizes come from the hub's listing.
    registry::HubFetch fetch(node_.hub_settings(), node_.peers(), &node_.metrics());
    absl::Status prepared = fetch.Prepare(*source, [&] { return !context->IsCancelled(); });
    if (!prepared.ok()) return ToGrpcStatus(prepared);
    absl::StatusOr<codec::ModelDirectory> dir = codec::ModelDirectory::Read(fetch.directory());
    e = dir.ok() ? fetch.Estimate(*dir) : absl::StatusOr<runtime::ModelEstimate>(dir.status());
  } else {
    e = runtime::EstimateModel(source->directory);
  }
  if (!e.ok()) return ToGrpcStatus(e.status());
  response->set_architecture(e->config.architecture_name);
  response->set_df11(e->df11);
  const runtime::PlacementEstimate placed = node_.backend().EstimatePlacement(*e);
  response->set_df11_units(placed.unit_bytes);
  response->set_passthrough(placed.plain_bytes);
  response->set_total(placed.unit_bytes + placed.plain_bytes);
  response->set_kv_bytes_per_token(node_.backend().KvBytesPerPosition(e->config));
  response->set_context_length(e->config.max_position_embeddings);
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<df11::v1::GenerateResponse>* ModelHostService::Generate(
    grpc::CallbackServerContext* context, const df11::v1::GenerateRequest* request) {
  return StartGenerate(node_, timer_, stall_watchdog_, context, request);
}

grpc::Status ModelHostService::GetNodeStatus(grpc::ServerContext* context,
                                             const df11::v1::GetNodeStatusRequest*,
                                             df11::v1::NodeStatus* response) {
  Caller caller;
  if (grpc::Status s = Authorize(*context, &caller); !s.ok()) return s;
  *response = ToProto(node_.Status(caller));
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<df11::v1::NodeStatus>* ModelHostService::WatchNodeStatus(
    grpc::CallbackServerContext* context, const df11::v1::WatchNodeStatusRequest* request) {
  return watches_.Start(context, request);
}

}  // namespace df11::server
