#include "daemon/server/model_host_service.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/audit/audit.h"
#include "daemon/hub/cache.h"
#include "daemon/runtime/engine/estimate.h"
#include "daemon/server/generate_request.h"
#include "daemon/server/grpc_caller.h"
#include "daemon/server/log.h"
#include "daemon/server/model_roots.h"
#include "daemon/server/proto_conversion.h"
#include "daemon/server/status_conversion.h"

namespace df11::server {
namespace {

// How often a stream looks for its client's cancellation while it waits.
constexpr absl::Duration kPoll = absl::Milliseconds(100);
// The same for watch streams, which sit idle between statuses: many of them may be held (routers,
// dashboards), and a wake-up each 100 ms costs 1,000 of them about half a core. Shutdown wakes
// them at once; a cancelled watch keeps its thread for up to this long.
constexpr absl::Duration kWatchPoll = absl::Seconds(1);

absl::Status ValidSeconds(const char* field, double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must be a finite number >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

grpc::Status ModelHostService::Authorize(const grpc::ServerContext& context, Caller* caller) const {
  absl::StatusOr<Caller> found = GrpcCaller(node_, context);
  if (!found.ok()) return ToGrpcStatus(found.status());
  if (absl::Status s = RefusePeer(*found); !s.ok()) return ToGrpcStatus(s);
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

grpc::Status ModelHostService::Generate(grpc::ServerContext* context,
                                        const df11::v1::GenerateRequest* request,
                                        grpc::ServerWriter<df11::v1::GenerateResponse>* writer) {
  Caller caller;
  if (grpc::Status s = Authorize(*context, &caller); !s.ok()) return s;
  if (request->model().empty()) return ToGrpcStatus(absl::InvalidArgumentError("model: empty"));
  absl::StatusOr<TenantLimits::Slot> slot = node_.AdmitRequest(caller, context->peer());
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  // A catalog model that is not resident is loaded now, within the call's deadline.
  const absl::Time deadline =
      std::min(absl::FromChrono(context->deadline()),
               absl::Now() + absl::Seconds(node_.config().load_wait_seconds));
  absl::StatusOr<registry::ModelHandle> model =
      node_.AcquireForRequest(caller, request->model(), request->owner(), deadline,
                              [context] { return context->IsCancelled(); });
  if (!model.ok()) return ToGrpcStatus(model.status());
  absl::StatusOr<runtime::GenerationRequest> prepared =
      PrepareGenerate(*request, **model, node_.config());
  if (!prepared.ok()) {
    node_.metrics().RequestFinished((*model)->owner, (*model)->name, "invalid_argument");
    return ToGrpcStatus(prepared.status());
  }
  absl::StatusOr<std::shared_ptr<scheduler::Job>> job =
      node_.scheduler().Submit(*std::move(model), *std::move(prepared));
  if (!job.ok()) return ToGrpcStatus(job.status());
  const registry::ResidentModel& served = (*job)->model();
  const std::string peer = context->peer();  // "unknown" once the call is cancelled
  // Writes the next response; false (the job cancelled) when the client went away or read nothing
  // for limits.stream_stall.
  auto write = [&](const df11::v1::GenerateResponse& response) {
    bool stalled = false;
    if (stall_watchdog_.Write(context, writer, response, &stalled)) return true;
    if (stalled) {
      node_.metrics().StreamStalled(served.owner, served.name);
      Log(absl::StrCat("Generate of ", served.name, " from ", peer,
                       ": the client read nothing for ",
                       absl::FormatDuration(stall_watchdog_.stall()), "; cancelled"));
    }
    (*job)->Cancel(
        absl::CancelledError(stalled ? "the client stopped reading" : "the client went away"));
    return false;
  };
  AuthorizationWatch authorized(node_, caller);
  scheduler::Job::Update update;
  while (true) {
    // A revoked token ends the call: the job stops before its next step with that status.
    if (absl::Status still = authorized.Check(); !still.ok()) (*job)->Cancel(still);
    if (!(*job)->Next(&update, kPoll)) {
      if (context->IsCancelled()) {
        (*job)->Cancel(absl::CancelledError("the client cancelled the request"));
        return grpc::Status::CANCELLED;
      }
      continue;
    }
    df11::v1::GenerateResponse response;
    for (const runtime::GeneratedToken& t : update.tokens) {
      response.mutable_text()->append(t.text);
      response.add_token_ids(t.id);
      if (request->logprobs()) response.add_logprobs(t.logprob);
      if (request->top_logprobs() > 0) {
        df11::v1::TopLogprobs* top = response.add_top_logprobs();
        for (int32_t k = 0; k < t.top_logprobs_count; ++k) {
          top->add_token_ids(t.top_logprobs[k].token_id);
          top->add_logprobs(t.top_logprobs[k].logprob);
        }
      }
    }
    if (update.done) {
      if (!update.status.ok()) {
        if (!update.tokens.empty()) write(response);
        return ToGrpcStatus(update.status);
      }
      response.set_finish_reason(ToProto(update.finish_reason));
      response.mutable_usage()->set_prompt_tokens(static_cast<int32_t>(update.prompt_tokens));
      response.mutable_usage()->set_completion_tokens(
          static_cast<int32_t>(update.completion_tokens));
      df11::v1::Timings* t = response.mutable_timings();
      t->set_queue_seconds(update.timings.queue);
      t->set_time_to_first_token_seconds(update.timings.first_token);
      t->set_seconds_per_token(update.timings.per_token);
      t->set_total_seconds(update.timings.total);
      return write(response) ? grpc::Status::OK : grpc::Status::CANCELLED;
    }
    if (!write(response)) return grpc::Status::CANCELLED;
  }
}

grpc::Status ModelHostService::GetNodeStatus(grpc::ServerContext* context,
                                             const df11::v1::GetNodeStatusRequest*,
                                             df11::v1::NodeStatus* response) {
  Caller caller;
  if (grpc::Status s = Authorize(*context, &caller); !s.ok()) return s;
  *response = ToProto(node_.Status(caller));
  return grpc::Status::OK;
}

grpc::Status ModelHostService::WatchNodeStatus(grpc::ServerContext* context,
                                               const df11::v1::WatchNodeStatusRequest* request,
                                               grpc::ServerWriter<df11::v1::NodeStatus>* writer) {
  Caller caller;
  if (grpc::Status s = Authorize(*context, &caller); !s.ok()) return s;
  const double interval = request->interval_seconds();
  if (absl::Status s = ValidSeconds("interval_seconds", interval); !s.ok()) return ToGrpcStatus(s);
  const absl::Duration every =
      interval > 0 ? absl::Seconds(std::max(interval, 0.05)) : absl::Seconds(1);
  while (!context->IsCancelled() && !node_.shutting_down()) {
    // Each status is for the caller as the tokens file says now: a revoked token ends the watch.
    if (grpc::Status s = Authorize(*context, &caller); !s.ok()) return s;
    if (!stall_watchdog_.Write(context, writer, ToProto(node_.Status(caller)))) {
      return grpc::Status::CANCELLED;
    }
    for (absl::Time until = absl::Now() + every; absl::Now() < until;) {
      if (context->IsCancelled() ||
          node_.WaitForShutdown(std::min(kWatchPoll, until - absl::Now()))) {
        break;
      }
    }
  }
  return grpc::Status::OK;
}

}  // namespace df11::server
