#include "daemon/runtime/generator.h"

#include <chrono>
#include <memory>
#include <span>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"

namespace df11::runtime {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

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

absl::StatusOr<GenerationResult> Generate(
    Backend& backend, const Model& model, const Tokenizer& tokenizer,
    const GenerationRequest& request,
    const std::function<bool(const GeneratedToken&)>& on_token) {
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
  // The last sampled token is never fed back, so the cache needs one position less.
  DF11_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache,
                        backend.NewCache(config, std::max<int64_t>(1, needed - 1)));

  GenerationResult result;
  result.prompt_tokens = prompt_tokens;
  Sampler sampler(params, config.vocab_size);
  FinishTracker finish(params, config.eos_token_ids);
  IncrementalDecoder detokenizer(tokenizer, request.skip_special_tokens);
  std::vector<float> logits(config.vocab_size);
  std::span<const int32_t> step_tokens = request.prompt;
  int32_t last = 0;
  auto start = std::chrono::steady_clock::now();
  while (true) {
    SequenceStep step{cache.get(), step_tokens};
    DF11_RETURN_IF_ERROR(backend.Forward(model, std::span(&step, 1), logits));
    const SampledToken t = sampler.Sample(logits, request.prompt, result.token_ids);
    result.token_ids.push_back(t.token_id);
    result.logprobs.push_back(t.logprob);
    FinishTracker::Step f = finish.OnToken(t.token_id, detokenizer.Feed(t.token_id));
    GeneratedToken out{t.token_id, t.logprob, std::move(f.text)};
    // Bytes of a character the stream ended inside: U+FFFD, as the full decode would give. After
    // a stop string nothing more is emitted.
    if (f.reason != FinishReason::kNone && f.stop_string_index < 0) out.text += detokenizer.Finish();
    result.text += out.text;
    if (result.token_ids.size() == 1) {
      result.prefill_seconds = SecondsSince(start);
      start = std::chrono::steady_clock::now();
    }
    if (!on_token(out)) return absl::CancelledError("generation cancelled");
    if (f.reason != FinishReason::kNone) {
      result.finish_reason = f.reason;
      break;
    }
    last = t.token_id;
    step_tokens = std::span(&last, 1);
  }
  if (result.token_ids.size() > 1) result.decode_seconds = SecondsSince(start);
  return result;
}

}  // namespace df11::runtime
