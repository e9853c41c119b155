#include "daemon/server/openai_server.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "codec/base/status_macros.h"
#include "daemon/server/generate_request.h"
#include "daemon/server/log.h"
#include "daemon/server/openai_api.h"
#include "daemon/server/status_conversion.h"
#include "httplib.h"

namespace df11::server {
namespace {

// How often a waiting request looks at its client.
constexpr absl::Duration kPoll = absl::Milliseconds(100);

void SendError(httplib::Response& res, const absl::Status& status) {
  res.status = ToHttpStatus(status.code());
  res.set_content(openai::ErrorBody(status), "application/json");
}

// What a completion request carries from its handler to the content provider that streams it.
struct Completion {
  TenantLimits::Slot slot;  // one of the tenant's running requests, until the response ends
  openai::Request request;
  std::shared_ptr<scheduler::Job> job;
  std::unique_ptr<openai::Responder> responder;
  scheduler::Job::Update first;  // the first update, taken in the handler
};

// Streams `c` (SSE events, or the response object at the end) until the job is done or the client
// goes away, which cancels the job.
bool Provide(Node& node, Completion& c, httplib::DataSink& sink) {
  auto write = [&](const std::string& text) {
    if (text.empty()) return true;
    const absl::Time start = absl::Now();
    if (sink.write(text.data(), text.size())) return true;
    // httplib gives up on a socket that stays unwritable for its write timeout,
    // limits.stream_stall.
    const absl::Duration stall = absl::Seconds(node.config().stream_stall_seconds);
    if (absl::Now() - start >= stall - absl::Milliseconds(10)) {
      const registry::ResidentModel& model = c.job->model();
      node.metrics().StreamStalled(model.owner, model.name);
      Log(absl::StrCat("completion of ", model.name, ": the client read nothing for ",
                       absl::FormatDuration(stall), "; cancelled"));
    }
    return false;
  };
  auto finish = [&](const scheduler::Job::Update& u) {
    std::string text;
    if (!u.status.ok()) {
      // Too late for a status code: an error object, as OpenAI sends one mid-stream.
      text = c.request.stream ? absl::StrCat(c.responder->Chunk(u.tokens),
                                             "data: ", openai::ErrorBody(u.status), "\n\n")
                              : openai::ErrorBody(u.status);
    } else if (c.request.stream) {
      text = c.responder->Chunk(u.tokens) +
             c.responder->FinishStream(u.finish_reason, u.prompt_tokens, u.completion_tokens);
    } else {
      c.responder->Add(u.tokens);
      text = c.responder->Body(u.finish_reason, u.prompt_tokens, u.completion_tokens);
    }
    const bool ok = write(text);
    sink.done();
    return ok;
  };
  auto take = [&](const scheduler::Job::Update& u) {
    if (u.done) return finish(u);
    if (!c.request.stream) {
      c.responder->Add(u.tokens);
      return true;
    }
    return write(c.responder->Chunk(u.tokens));
  };
  if (c.first.done || !c.first.tokens.empty()) {
    scheduler::Job::Update first = std::move(c.first);
    c.first = {};
    if (!take(first)) {
      c.job->Cancel(absl::CancelledError("the client went away"));
      return false;
    }
    if (first.done) return true;
  }
  scheduler::Job::Update update;
  while (!c.job->Next(&update, kPoll)) {
    if (!sink.is_writable()) {
      c.job->Cancel(absl::CancelledError("the client went away"));
      return false;
    }
  }
  if (!take(update)) {
    c.job->Cancel(absl::CancelledError("the client went away"));
    return false;
  }
  return true;
}

void HandleCompletion(Node& node, bool chat, const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<Caller> caller = CallerOf(node, req);
  if (!caller.ok()) return SendError(res, caller.status());
  absl::StatusOr<openai::Request> parsed = openai::ParseRequest(req.body, chat);
  if (!parsed.ok()) return SendError(res, parsed.status());
  auto c = std::make_shared<Completion>();
  c->request = *std::move(parsed);
  absl::StatusOr<TenantLimits::Slot> slot =
      node.AdmitRequest(*caller, absl::StrCat(req.remote_addr, ":", req.remote_port));
  if (!slot.ok()) return SendError(res, slot.status());
  c->slot = *std::move(slot);
  const std::string& name = c->request.generate.model();
  absl::StatusOr<registry::ModelHandle> model = node.AcquireForRequest(
      *caller, name, "", absl::Now() + absl::Seconds(node.config().load_wait_seconds), nullptr);
  if (!model.ok()) return SendError(res, model.status());
  absl::StatusOr<runtime::GenerationRequest> prepared =
      PrepareGenerate(c->request.generate, **model, node.config());
  if (!prepared.ok()) {
    node.metrics().RequestFinished((*model)->owner, (*model)->name, "invalid_argument");
    return SendError(res, prepared.status());
  }
  const runtime::Tokenizer& tokenizer = *(*model)->tokenizer;  // the job keeps the model alive
  absl::StatusOr<std::shared_ptr<scheduler::Job>> job =
      node.scheduler().Submit(*std::move(model), *std::move(prepared));
  if (!job.ok()) return SendError(res, job.status());
  c->job = *std::move(job);
  c->responder =
      std::make_unique<openai::Responder>(c->request, tokenizer, absl::ToUnixSeconds(absl::Now()));
  // Until the first token the status code is still open: an error before it (the prefill) gets
  // its own code.
  while (!c->job->Next(&c->first, kPoll)) {
  }
  if (c->first.done && !c->first.status.ok()) return SendError(res, c->first.status);
  if (c->request.stream) res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      c->request.stream ? "text/event-stream" : "application/json",
      [c, &node](size_t, httplib::DataSink& sink) { return Provide(node, *c, sink); },
      [c](bool success) {
        if (!success) c->job->Cancel(absl::CancelledError("the client went away"));
      });
}

}  // namespace

absl::StatusOr<Caller> CallerOf(const Node& node, const httplib::Request& req) {
  std::optional<std::string> header;
  if (req.has_header("Authorization")) header = req.get_header_value("Authorization");
  absl::StatusOr<Caller> caller = node.Authenticate(
      header ? std::optional<absl::string_view>(*header) : std::nullopt, PeerSubject(req.ssl));
  if (caller.ok()) DF11_RETURN_IF_ERROR(RefusePeer(*caller));
  return caller;
}

void AddOpenAiRoutes(httplib::Server& server, Node& node) {
  server.Get("/v1/models", [&node](const httplib::Request& req, httplib::Response& res) {
    absl::StatusOr<Caller> caller = CallerOf(node, req);
    if (!caller.ok()) return SendError(res, caller.status());
    res.set_content(openai::ModelList(node.ListModels(*caller), absl::ToUnixSeconds(absl::Now())),
                    "application/json");
  });
  server.Post("/v1/completions", [&node](const httplib::Request& req, httplib::Response& res) {
    HandleCompletion(node, /*chat=*/false, req, res);
  });
  server.Post("/v1/chat/completions", [&node](const httplib::Request& req, httplib::Response& res) {
    HandleCompletion(node, /*chat=*/true, req, res);
  });
}

}  // namespace df11::server
