// One generation request on one model: the prompt in one forward pass (prefill), then one token
// per pass, sampled, detokenized and checked against the finish rules, each piece of text handed
// on as soon as it is final. A Sequence holds that state between passes, so a scheduler can batch
// the decode steps of many sequences into one forward pass; Generate runs one sequence alone
// (`df11 generate`). Both give the same tokens: the backend's result for a sequence does not
// depend on what else is in the batch (Backend::Forward).
//
//   GenerationRequest request{.prompt = ids, .sampling = DefaultSamplingParams(model->config())};
//   DF11_ASSIGN_OR_RETURN(GenerationResult result,
//                         Generate(backend, *model, tokenizer, request,
//                                  [](const GeneratedToken& t) { Print(t.text); return true; }));
//
//   // or step by step:
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<Sequence> seq, Sequence::Start(backend, *model, tokenizer, request));
//   while (!seq->finished()) {
//     SequenceStep step = seq->NextStep();
//     DF11_RETURN_IF_ERROR(backend.Forward(*model, std::span(&step, 1), logits));
//     Print(seq->Advance(logits).text);
//   }
#ifndef DF11_DAEMON_RUNTIME_ENGINE_GENERATOR_H_
#define DF11_DAEMON_RUNTIME_ENGINE_GENERATOR_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/runtime/engine/backend.h"
#include "daemon/runtime/engine/model.h"
#include "daemon/runtime/engine/sampling/sampler.h"
#include "daemon/runtime/text/tokenizer/tokenizer.h"

namespace df11::runtime {

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids, at least one
  SamplingParams sampling;      // must pass Validate()
  bool skip_special_tokens = true;
};

// One generated token as it is produced.
struct GeneratedToken {
  int32_t id = 0;
  float logprob = 0;  // log p(id) under the model's raw distribution (SampledToken::logprob)
  std::string text;   // text that became final with this token (possibly empty)
  // The most likely tokens at this step, when the request asked for them (SampledToken's).
  std::array<TokenLogprob, kMaxTopLogprobs> top_logprobs;
  int32_t top_logprobs_count = 0;
};

struct GenerationResult {
  std::vector<int32_t> token_ids;  // every sampled token, including a final EOS or stop token
  std::vector<float> logprobs;
  std::string text;  // the concatenated GeneratedToken::text
  FinishReason finish_reason = FinishReason::kNone;
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;  // the prompt's forward pass and the first token's sampling
  double decode_seconds = 0;   // every later token's forward pass and sampling
  // Tokens per second after the first token (decode speed); 0 when only one token was made.
  double decode_tokens_per_second() const;
};

// The sampling defaults of the model's generation_config.json: greedy unless do_sample, then its
// temperature, top_p, top_k; its repetition_penalty either way. max_tokens stays 16.
SamplingParams DefaultSamplingParams(const ModelConfig& config);

// The state of one request between forward passes. Not thread-safe; the model, tokenizer and
// backend must outlive it.
class Sequence {
 public:
  // Validates `request` and makes its KV cache (CachePositions(request) positions). Errors as
  // Generate's before its first forward pass; token ids are checked by that pass
  // (Backend::Forward), or before, where a request enters the daemon (PrepareGenerate).
  static absl::StatusOr<std::unique_ptr<Sequence>> Start(Backend& backend, const PlacedModel& model,
                                                         const Tokenizer& tokenizer,
                                                         GenerationRequest request);
  // The KV cache positions `request` needs: the prompt and max_tokens, less the last sampled
  // token, which is never fed back.
  static int64_t CachePositions(const GenerationRequest& request);
  // The tokens the next forward pass feeds for this sequence: the prompt first, then each sampled
  // token. Not after finished().
  SequenceStep NextStep();
  // Samples the next token from the logits of the pass that fed NextStep() (vocab_size values),
  // detokenizes it and applies the finish rules.
  GeneratedToken Advance(std::span<const float> logits);

  bool finished() const { return result_.finish_reason != FinishReason::kNone; }
  // Everything so far; complete once finished().
  const GenerationResult& result() const { return result_; }
  GenerationResult TakeResult() { return std::move(result_); }
  int64_t prompt_tokens() const { return result_.prompt_tokens; }
  uint64_t kv_bytes() const { return cache_->bytes(); }

 private:
  Sequence(const PlacedModel& model, const Tokenizer& tokenizer, GenerationRequest request,
           std::unique_ptr<KvCache> cache);

  GenerationRequest request_;
  std::unique_ptr<KvCache> cache_;
  Sampler sampler_;
  FinishTracker finish_;
  IncrementalDecoder detokenizer_;
  GenerationResult result_;
  int32_t last_token_ = 0;
  std::chrono::steady_clock::time_point started_, first_token_at_;
};

// Runs `request` to its end. `on_token` is called once per generated token, in order; returning
// false cancels the generation (kCancelled). kInvalidArgument for an empty prompt, invalid
// sampling params, or a prompt plus max_tokens longer than the model's context (with the
// numbers); errors of Backend::Forward otherwise (a token id outside the vocabulary among them).
absl::StatusOr<GenerationResult> Generate(
    Backend& backend, const PlacedModel& model, const Tokenizer& tokenizer,
    const GenerationRequest& request, const std::function<bool(const GeneratedToken&)>& on_token);

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_ENGINE_GENERATOR_H_
