// One generation request on one model: the prompt in one forward pass (prefill), then one token
// per pass, sampled, detokenized and checked against the finish rules, each piece of text handed
// to a callback as soon as it is final. The daemon's Generate and `df11 generate` both run this.
//
//   GenerationRequest request{.prompt = ids, .sampling = DefaultSamplingParams(model->config())};
//   DF11_ASSIGN_OR_RETURN(GenerationResult result,
//                         Generate(backend, *model, tokenizer, request,
//                                  [](const GeneratedToken& t) { Print(t.text); return true; }));
#ifndef DF11_DAEMON_RUNTIME_GENERATOR_H_
#define DF11_DAEMON_RUNTIME_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/runtime/backend.h"
#include "daemon/runtime/model.h"
#include "daemon/runtime/sampling/sampler.h"
#include "daemon/runtime/tokenizer/tokenizer.h"

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

// Runs `request` to its end. `on_token` is called once per generated token, in order; returning
// false cancels the generation (kCancelled). kInvalidArgument for an empty prompt, invalid
// sampling params, a token id outside the vocabulary, or a prompt plus max_tokens longer than the
// model's context (with the numbers); errors of Backend::Forward otherwise.
absl::StatusOr<GenerationResult> Generate(
    Backend& backend, const Model& model, const Tokenizer& tokenizer,
    const GenerationRequest& request,
    const std::function<bool(const GeneratedToken&)>& on_token);

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_GENERATOR_H_
