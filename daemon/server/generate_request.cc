#include "daemon/server/generate_request.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace df11::server {
namespace {

absl::Status Prefixed(const std::string& field, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(field, ": ", status.message()));
}

absl::StatusOr<std::vector<int32_t>> PromptTokens(const df11::v1::GenerateRequest& request,
                                                  const registry::ResidentModel& model) {
  const runtime::Tokenizer& tokenizer = *model.tokenizer;
  switch (request.prompt_case()) {
    case df11::v1::GenerateRequest::kText: {
      absl::StatusOr<std::vector<int32_t>> ids =
          tokenizer.Encode(request.text(), /*add_special_tokens=*/true);
      if (!ids.ok()) return Prefixed("text", ids.status());
      return ids;
    }
    case df11::v1::GenerateRequest::kChat: {
      if (!model.chat_template.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("chat: model ", model.name,
                         " has no usable chat template: ", model.chat_template.status().message()));
      }
      const auto& messages = request.chat().messages();
      if (messages.empty()) return absl::InvalidArgumentError("chat.messages: empty");
      nlohmann::ordered_json json = nlohmann::ordered_json::array();
      for (int i = 0; i < messages.size(); ++i) {
        if (messages[i].role().empty()) {
          return absl::InvalidArgumentError(absl::StrCat("chat.messages[", i, "].role: empty"));
        }
        json.push_back({{"role", messages[i].role()}, {"content", messages[i].content()}});
      }
      const nlohmann::ordered_json extra = {{"enable_thinking", request.enable_thinking()}};
      absl::StatusOr<std::string> text = model.chat_template->Render(
          json, request.chat().add_generation_prompt(), extra);
      if (!text.ok()) return Prefixed("chat", text.status());
      // The rendered template already holds its special tokens.
      absl::StatusOr<std::vector<int32_t>> ids =
          tokenizer.Encode(*text, /*add_special_tokens=*/false);
      if (!ids.ok()) return Prefixed("chat", ids.status());
      return ids;
    }
    case df11::v1::GenerateRequest::kTokenIds: {
      return std::vector<int32_t>(request.token_ids().ids().begin(),
                                  request.token_ids().ids().end());
    }
    case df11::v1::GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("prompt: one of text, chat or token_ids is required");
}

}  // namespace

absl::StatusOr<runtime::GenerationRequest> PrepareGenerate(const df11::v1::GenerateRequest& request,
                                                           const registry::ResidentModel& model,
                                                           const config::Config& config) {
  runtime::GenerationRequest out;
  DF11_ASSIGN_OR_RETURN(out.prompt, PromptTokens(request, model));
  // The one check of a request's token ids, whatever the prompt's form (a tokenizer whose ids
  // pass the model's vocabulary is refused here too).
  if (absl::Status s = runtime::CheckTokenIds(out.prompt, model.model->config().vocab_size);
      !s.ok()) {
    const bool ids = request.prompt_case() == df11::v1::GenerateRequest::kTokenIds;
    return absl::InvalidArgumentError(
        absl::StrCat(ids ? "token_ids.ids: " : "prompt (as tokenized): ", s.message()));
  }
  if (out.prompt.empty()) return absl::InvalidArgumentError("prompt: has no tokens");
  if (static_cast<int64_t>(out.prompt.size()) > config.max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("prompt: ", out.prompt.size(),
                                                   " tokens; limits.max_prompt_tokens is ",
                                                   config.max_prompt_tokens));
  }
  if (request.max_tokens() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens: must be >= 0 (0: the default), got ", request.max_tokens()));
  }
  if (request.max_tokens() > config.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens: ", request.max_tokens(),
                                                   " is above limits.max_tokens ",
                                                   config.max_tokens));
  }
  runtime::SamplingParams& p = out.sampling;
  p = model.defaults;
  const df11::v1::SamplingParams& s = request.sampling();
  if (s.has_temperature()) p.temperature = s.temperature();
  if (s.has_top_p()) p.top_p = s.top_p();
  if (s.has_top_k()) p.top_k = s.top_k();
  if (s.has_min_p()) p.min_p = s.min_p();
  if (s.has_repetition_penalty()) p.repetition_penalty = s.repetition_penalty();
  if (s.has_presence_penalty()) p.presence_penalty = s.presence_penalty();
  if (s.has_frequency_penalty()) p.frequency_penalty = s.frequency_penalty();
  if (s.has_seed()) p.seed = s.seed();
  const int64_t context = model.model->config().max_position_embeddings;
  const int64_t prompt_tokens = static_cast<int64_t>(out.prompt.size());
  if (request.max_tokens() > 0) {
    p.max_tokens = request.max_tokens();
  } else {
    // The default, shortened to what the model's context has left after the prompt.
    int64_t max_tokens = config.default_max_tokens;
    if (context > prompt_tokens) max_tokens = std::min(max_tokens, context - prompt_tokens);
    p.max_tokens = static_cast<int32_t>(max_tokens);
  }
  p.stop.assign(request.stop().begin(), request.stop().end());
  p.stop_token_ids.assign(request.stop_token_ids().begin(), request.stop_token_ids().end());
  p.ignore_eos = request.ignore_eos();
  p.top_logprobs = request.top_logprobs();
  if (request.top_logprobs() < 0 || request.top_logprobs() > runtime::kMaxTopLogprobs) {
    return absl::InvalidArgumentError(absl::StrCat("top_logprobs: must be in [0, ",
                                                   runtime::kMaxTopLogprobs, "], got ",
                                                   request.top_logprobs()));
  }
  if (absl::Status status = p.Validate(); !status.ok()) return Prefixed("sampling", status);
  const int64_t needed = prompt_tokens + p.max_tokens;
  if (context > 0 && needed > context) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_tokens: a prompt of ", out.prompt.size(), " tokens plus max_tokens ", p.max_tokens,
        " is ", needed, " positions; model ", model.name, " holds ", context));
  }
  return out;
}

}  // namespace df11::server
