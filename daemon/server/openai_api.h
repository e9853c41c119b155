// The OpenAI-compatible API's requests and responses (POST /v1/completions and
// /v1/chat/completions, GET /v1/models), as the OpenAI API and its SDKs shape them: a request
// becomes the wire API's GenerateRequest, so that it runs exactly as gRPC Generate does (same
// tokens for the same sampling and seed); the engine's tokens become one response object, or
// Server-Sent Events chunks ending with `data: [DONE]`. No HTTP here (http_server.cc serves it).
//
//   DF11_ASSIGN_OR_RETURN(openai::Request r, openai::ParseRequest(body, /*chat=*/true));
//   openai::Responder out(r, *model->tokenizer);
//   for each update: sink << out.Chunk(update.tokens);        // streaming
//   sink << out.Finish(update.finish_reason, update.prompt_tokens, update.completion_tokens);
#ifndef DF11_DAEMON_SERVER_OPENAI_API_H_
#define DF11_DAEMON_SERVER_OPENAI_API_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/registry/registry.h"
#include "daemon/runtime/engine/generator.h"
#include "daemon/runtime/engine/sampling/sampler.h"
#include "daemon/runtime/text/tokenizer/tokenizer.h"
#include "df11/v1/model_host.pb.h"

namespace df11::server::openai {

struct Request {
  bool chat = false;
  df11::v1::GenerateRequest generate;  // model, prompt, sampling, max_tokens, stop, logprobs
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // report each token's logprob (and generate.top_logprobs more)
};

// Parses the JSON body of /v1/chat/completions (`chat`) or /v1/completions. Parameters: model,
// messages (chat: role and content, a string or text parts) or prompt (a string, token ids, or a
// list of one of them), max_tokens and max_completion_tokens, temperature, top_p, top_k (-1 off),
// min_p, presence_penalty, frequency_penalty, repetition_penalty, seed, stop (a string or a
// list), stop_token_ids, ignore_eos, n (1 only), stream, stream_options.include_usage, logprobs
// and top_logprobs (chat: a boolean and 0-20; completions: 0-5), chat_template_kwargs
// .enable_thinking, user (ignored). Unsupported features (n > 1, best_of, echo, suffix,
// logit_bias, tools, response_format other than text) and ill-typed or out-of-range values are
// kInvalidArgument; ParamOf names the parameter.
absl::StatusOr<Request> ParseRequest(std::string_view body, bool chat);

// The parameter a kInvalidArgument of ParseRequest is about ("" when none).
std::string ParamOf(const absl::Status& status);

// {"error": {"message", "type", "param", "code"}} for `status`, as OpenAI's API sends errors. The
// code is the gRPC code's name in lower case ("model_not_found" for kNotFound) unless `code` is
// given; the param is ParamOf(status).
std::string ErrorBody(const absl::Status& status, std::string_view code = "");

// The model list of GET /v1/models: {"object": "list", "data": [{"id", "object": "model",
// "created", "owned_by", and df11d's "status" (ready, loading, unloading, failed, available),
// "df11", "source", "bytes"}]}.
std::string ModelList(const std::vector<registry::ModelInfo>& models, int64_t now_seconds);
// GET /v1/models/{id}: one entry of ModelList, alone.
std::string ModelObject(const registry::ModelInfo& model, int64_t now_seconds);

// One response's text as it is made: streaming chunks or one object at the end.
class Responder {
 public:
  // `tokenizer` (the model's) names the tokens of logprobs; it must outlive the responder.
  Responder(const Request& request, const runtime::Tokenizer& tokenizer, int64_t created_seconds);

  // Streaming: the SSE events for newly generated tokens ("" when there is nothing to send). The
  // first call also sends the chat's assistant role.
  std::string Chunk(const std::vector<runtime::GeneratedToken>& tokens);
  // Streaming: the last events: the finish reason, the usage when asked, and `data: [DONE]`.
  std::string FinishStream(runtime::FinishReason reason, int64_t prompt_tokens,
                           int64_t completion_tokens);
  // Not streaming: every token so far is kept by Add; Body is the whole response object.
  void Add(const std::vector<runtime::GeneratedToken>& tokens);
  std::string Body(runtime::FinishReason reason, int64_t prompt_tokens,
                   int64_t completion_tokens) const;

  const std::string& id() const { return id_; }

 private:
  const Request& request_;
  const runtime::Tokenizer& tokenizer_;
  const int64_t created_;
  const std::string id_;
  bool sent_role_ = false;
  std::string text_;                             // the completion so far
  std::vector<runtime::GeneratedToken> tokens_;  // not streaming, with logprobs
};

}  // namespace df11::server::openai

#endif  // DF11_DAEMON_SERVER_OPENAI_API_H_
