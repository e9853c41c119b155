#include "daemon/server/openai_server.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "codec/base/status_macros.h"
#include "daemon/server/generate_request.h"
#include "daemon/server/log.h"
#include "daemon/server/openai_api.h"
#include "daemon/server/status_conversion.h"

namespace df11::server {
namespace {

// How often a waiting request looks at its client.
constexpr absl::Duration kPoll = absl::Milliseconds(100);

void SendError(HttpResponse& res, const absl::Status& status) {
  res.Send(ToHttpStatus(status.code()), "application/json", openai::ErrorBody(status));
}

// Streams `job`'s updates to the client (SSE events, or the response object at the end) until the
// job is done or the client goes away, which cancels the job.
void Respond(Node& node, const openai::Request& request, scheduler::Job& job,
             openai::Responder& responder, scheduler::Job::Update update,
             AuthorizationWatch& authorized, HttpResponse& res) {
  auto gone = [&] {
    if (res.stalled()) {
      const registry::ResidentModel& model = job.model();
      node.metrics().StreamStalled(model.owner, model.name);
      Log(absl::StrCat("completion of ", model.name, ": the client read nothing for ",
                       absl::FormatDuration(absl::Seconds(node.config().stream_stall_seconds)),
                       "; cancelled"));
    }
    job.Cancel(absl::CancelledError("the client went away"));
  };
  if (request.stream && !res.Start(200, "text/event-stream", {{"Cache-Control", "no-cache"}})) {
    return gone();
  }
  for (;;) {
    if (update.done) break;
    if (request.stream) {
      if (!res.Write(responder.Chunk(update.tokens))) return gone();
    } else {
      responder.Add(update.tokens);
    }
    update = {};
    do {
      // A revoked token ends the request: the job stops before its next step with that status.
      if (absl::Status still = authorized.Check(); !still.ok()) job.Cancel(still);
      if (res.ClientGone()) return gone();
    } while (!job.Next(&update, kPoll));
  }
  if (!request.stream) {
    if (!update.status.ok()) {
      // Too late for the status code only when streaming; here the error gets its own.
      return SendError(res, update.status);
    }
    responder.Add(update.tokens);
    if (!res.Send(200, "application/json",
                  responder.Body(update.finish_reason, update.prompt_tokens,
                                 update.completion_tokens))) {
      gone();
    }
    return;
  }
  // Too late for a status code: an error object, as OpenAI sends one mid-stream.
  const std::string last =
      update.status.ok()
          ? responder.Chunk(update.tokens) + responder.FinishStream(update.finish_reason,
                                                                    update.prompt_tokens,
                                                                    update.completion_tokens)
          : absl::StrCat(responder.Chunk(update.tokens), "data: ", openai::ErrorBody(update.status),
                         "\n\n");
  if (!res.Write(last) || !res.End()) gone();
}

void HandleCompletion(Node& node, const Caller& caller, bool chat, const HttpRequest& req,
                      HttpResponse& res) {
  absl::StatusOr<openai::Request> request = openai::ParseRequest(req.body, chat);
  if (!request.ok()) return SendError(res, request.status());
  // One of the tenant's running requests, until the response ends.
  absl::StatusOr<TenantLimits::Slot> slot = node.AdmitRequest(caller, req.peer);
  if (!slot.ok()) return SendError(res, slot.status());
  const std::string& name = request->generate.model();
  // A client that leaves while its model loads on demand lets go of its request at once.
  absl::StatusOr<registry::ModelHandle> model =
      node.AcquireForRequest(caller, name, "",
                             absl::Now() + absl::Seconds(node.config().load_wait_seconds),
                             [&res] { return res.ClientGone(); });
  if (!model.ok()) return SendError(res, model.status());
  absl::StatusOr<runtime::GenerationRequest> prepared =
      PrepareGenerate(request->generate, **model, node.config());
  if (!prepared.ok()) {
    node.metrics().RequestFinished((*model)->owner, (*model)->name, "invalid_argument");
    return SendError(res, prepared.status());
  }
  const runtime::Tokenizer& tokenizer = *(*model)->tokenizer;  // the job keeps the model alive
  absl::StatusOr<std::shared_ptr<scheduler::Job>> job =
      node.scheduler().Submit(*std::move(model), *std::move(prepared));
  if (!job.ok()) return SendError(res, job.status());
  openai::Responder responder(*request, tokenizer, absl::ToUnixSeconds(absl::Now()));
  // Until the first token the status code is still open: an error before it (the prefill) gets
  // its own code.
  AuthorizationWatch authorized(node, caller);
  scheduler::Job::Update first;
  while (!(*job)->Next(&first, kPoll)) {
    if (absl::Status still = authorized.Check(); !still.ok()) (*job)->Cancel(still);
    if (res.ClientGone()) return (*job)->Cancel(absl::CancelledError("the client went away"));
  }
  if (first.done && !first.status.ok()) return SendError(res, first.status);
  Respond(node, *request, **job, responder, std::move(first), authorized, res);
}

// `text` with each %XX replaced by its byte (an id such as Qwen%2FQwen3-8B); a % without two hex
// digits after it stays as it is.
std::string PercentDecoded(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    int byte = 0;
    if (text[i] == '%' && i + 2 < text.size() && absl::ascii_isxdigit(text[i + 1]) &&
        absl::ascii_isxdigit(text[i + 2]) && absl::SimpleHexAtoi(text.substr(i + 1, 2), &byte)) {
      out.push_back(static_cast<char>(byte));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Caller> CallerOf(const Node& node, const HttpRequest& req) {
  absl::StatusOr<Caller> caller = node.Authenticate(
      req.authorization ? std::optional<absl::string_view>(*req.authorization) : std::nullopt,
      req.client_subject);
  if (caller.ok()) DF11_RETURN_IF_ERROR(RefusePeer(*caller));
  return caller;
}

bool ServeOpenAi(Node& node, const Caller& caller, const HttpRequest& req, HttpResponse& res) {
  if (req.method == "GET" && req.path == "/v1/models") {
    res.Send(200, "application/json",
             openai::ModelList(node.ListModels(caller), absl::ToUnixSeconds(absl::Now())));
    return true;
  }
  // The rest of the path is the id, slashes included (hub ids such as Qwen/Qwen3-8B); only the
  // models the caller may see.
  constexpr absl::string_view kModelPrefix = "/v1/models/";
  if (req.method == "GET" && absl::StartsWith(req.path, kModelPrefix)) {
    const std::string id = PercentDecoded(absl::string_view(req.path).substr(kModelPrefix.size()));
    // The model a completion naming `id` would use: the caller's own before a shared one of the
    // same name; a catalog model not loaded yet has no key and is found by name.
    const absl::StatusOr<registry::ModelKey> key = node.Resolve(caller, id, "");
    const std::vector<registry::ModelInfo> models = node.ListModels(caller);
    const registry::ModelInfo* found = nullptr;
    for (const registry::ModelInfo& m : models) {
      if (m.name == id && (key.ok() ? m.owner == key->owner : found == nullptr)) found = &m;
    }
    if (found != nullptr) {
      res.Send(200, "application/json",
               openai::ModelObject(*found, absl::ToUnixSeconds(absl::Now())));
      return true;
    }
    SendError(res, absl::NotFoundError(
                       absl::StrCat("no model named '", id, "' (GET /v1/models lists them)")));
    return true;
  }
  if (req.method == "POST" && (req.path == "/v1/completions" || req.path == "/v1/chat/completions")) {
    HandleCompletion(node, caller, /*chat=*/req.path == "/v1/chat/completions", req, res);
    return true;
  }
  return false;
}

}  // namespace df11::server
