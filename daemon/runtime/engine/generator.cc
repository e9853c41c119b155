#include "daemon/runtime/engine/generator.h"

#include <chrono>
#include <memory>
#include <span>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"

namespace df11::runtime {
double GenerationResult::decode_tokens_per_second() const {
  if (token_ids.size() < 2 || decode_seconds <= 0) return 0;
  return static_cast<double>(token_ids.size() - 1) / decode_seconds;
}

SamplingParams DefaultSamplingParams(const ModelConfig& config) {
  SamplingParams p;
  p.temperature = config.do_sample ? static_cast<float>(config.temperature) : 0.0f;
  if (config.do_sample) {
    p.top_p = static_cast<float>(config.top_p);
    p.top_k = static_cast<int32_t>(config.top_k);
  }
  p.repetition_penalty = static_cast<float>(config.repetition_penalty);
  return p;
}

absl::StatusOr<std::unique_ptr<Sequence>> Sequence::Start(Backend& backend,
                                                          const PlacedModel& model,
                                                          const Tokenizer& tokenizer,
                                                          GenerationRequest request) {
  const ModelConfig& config = model.config();
  const SamplingParams& params = request.sampling;
  DF11_RETURN_IF_ERROR(params.Validate());
  const int64_t prompt_tokens = static_cast<int64_t>(request.prompt.size());
  if (prompt_tokens == 0) return absl::InvalidArgumentError("the prompt has no tokens");
  const int64_t needed = prompt_tokens + params.max_tokens;
  if (config.max_position_embeddings > 0 && needed > config.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a prompt of ", prompt_tokens, " tokens plus max_tokens ", params.max_tokens, " is ",
        needed, " positions; the model's context holds ", config.max_position_embeddings));
  }
  DF11_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache,
                        backend.NewCache(config, CachePositions(request)));
  return std::unique_ptr<Sequence>(
      new Sequence(model, tokenizer, std::move(request), std::move(cache)));
}

int64_t Sequence::CachePositions(const GenerationRequest& request) {
  return std::max<int64_t>(
      1, static_cast<int64_t>(request.prompt.size()) + request.sampling.max_tokens - 1);
}

Sequence::Sequence(const PlacedModel& model, const Tokenizer& tokenizer, GenerationRequest request,
                   std::unique_ptr<KvCache> cache)
    : request_(std::move(request)),
      cache_(std::move(cache)),
      sampler_(request_.sampling, model.config().vocab_size),
      finish_(request_.sampling, model.config().eos_token_ids),
      detokenizer_(tokenizer, request_.skip_special_tokens) {
  result_.prompt_tokens = static_cast<int64_t>(request_.prompt.size());
}

SequenceStep Sequence::NextStep() {
  if (result_.token_ids.empty()) {
    started_ = std::chrono::steady_clock::now();
    return SequenceStep{cache_.get(), request_.prompt};
  }
  return SequenceStep{cache_.get(), std::span(&last_token_, 1)};
}

GeneratedToken Sequence::Advance(std::span<const float> logits) {
  const SampledToken t = sampler_.Sample(logits, request_.prompt, result_.token_ids);
  result_.token_ids.push_back(t.token_id);
  result_.logprobs.push_back(t.logprob);
  last_token_ = t.token_id;
  FinishTracker::Step f = finish_.OnToken(t.token_id, detokenizer_.Feed(t.token_id));
  GeneratedToken out{.id = t.token_id,
                     .logprob = t.logprob,
                     .text = std::move(f.text),
                     .top_logprobs = t.top_logprobs,
                     .top_logprobs_count = t.top_logprobs_count};
  // Bytes of a character the stream ended inside: U+FFFD, as the full decode would give. After
  // a stop string nothing more is emitted.
  if (f.reason != FinishReason::kNone && f.stop_string_index < 0) out.text += detokenizer_.Finish();
  result_.text += out.text;
  const auto now = std::chrono::steady_clock::now();
  if (result_.token_ids.size() == 1) {
    result_.prefill_seconds = std::chrono::duration<double>(now - started_).count();
    first_token_at_ = now;
  } else {
    result_.decode_seconds = std::chrono::duration<double>(now - first_token_at_).count();
  }
  result_.finish_reason = f.reason;
  return out;
}

absl::StatusOr<GenerationResult> Generate(
    Backend& backend, const PlacedModel& model, const Tokenizer& tokenizer,
    const GenerationRequest& request, const std::function<bool(const GeneratedToken&)>& on_token) {
  DF11_ASSIGN_OR_RETURN(std::unique_ptr<Sequence> sequence,
                        Sequence::Start(backend, model, tokenizer, request));
  std::vector<float> logits(model.config().vocab_size);
  while (!sequence->finished()) {
    SequenceStep step = sequence->NextStep();
    DF11_RETURN_IF_ERROR(backend.Forward(model, std::span(&step, 1), logits));
    if (!on_token(sequence->Advance(logits))) return absl::CancelledError("generation cancelled");
  }
  return sequence->TakeResult();
}

}  // namespace df11::runtime
