// Token sampling for one sequence: penalties, temperature, top-k, top-p, min-p, seeded draws, and
// the end-of-generation rules (stop strings across token boundaries, stop token ids, EOS,
// max_tokens).
//
// Semantics follow Hugging Face `transformers` (generation/logits_process.py) for the logits
// warpers and vLLM / OpenAI (vllm/sampling_params.py) for the request parameters, penalties,
// stop handling and finish reasons. Each deviation is stated where it is made.
//
//   SamplingParams params;
//   params.temperature = 0.7f;
//   params.top_p = 0.9f;
//   params.seed = 1234;
//   params.stop = {"\n\n"};
//   DF11_RETURN_IF_ERROR(params.Validate());
//   Sampler sampler(params);
//   FinishTracker finish(params, /*eos_token_ids=*/{eos});
//   std::vector<int32_t> generated;
//   while (true) {
//     SampledToken t = sampler.Sample(logits, prompt, generated);  // logits: one row, vocab wide
//     generated.push_back(t.token_id);
//     FinishTracker::Step step = finish.OnToken(t.token_id, detokenizer.Delta(t.token_id));
//     Emit(step.text);
//     if (step.reason != FinishReason::kNone) break;
//   }
#ifndef DF11_DAEMON_RUNTIME_ENGINE_SAMPLING_SAMPLER_H_
#define DF11_DAEMON_RUNTIME_ENGINE_SAMPLING_SAMPLER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace df11::runtime {

// Per-request sampling parameters, named and ranged as vLLM's SamplingParams (which follows the
// OpenAI API). A default-constructed value samples from the unmodified softmax at temperature 1
// and stops after 16 tokens (vLLM's and OpenAI's completions default).
struct SamplingParams {
  // Logits are divided by this before truncation. 0 means greedy (argmax). Values below 1e-5 are
  // greedy too, as vLLM's _SAMPLING_EPS: dividing by them overflows float logits.
  float temperature = 1.0f;
  // Keep the k highest logits (and every logit tied with the k-th); 0 turns it off.
  int32_t top_k = 0;
  // Keep the smallest most-probable set whose probability mass is >= top_p; 1 turns it off.
  float top_p = 1.0f;
  // Drop tokens whose probability is < min_p times the top token's; 0 turns it off.
  float min_p = 0.0f;
  // transformers' RepetitionPenaltyLogitsProcessor over prompt and generated tokens; 1 is off.
  float repetition_penalty = 1.0f;
  // OpenAI/vLLM: subtracted once from the logit of each token present in the generated tokens.
  float presence_penalty = 0.0f;
  // OpenAI/vLLM: subtracted once per occurrence of a token in the generated tokens.
  float frequency_penalty = 0.0f;
  // Same seed and params and logits -> same tokens. Unset: a process-wide source (see Sampler).
  std::optional<uint64_t> seed;

  // Generation ends (kStop) when any of these strings appears in the output text. The stop
  // string itself is not emitted (vLLM's default include_stop_str_in_output=False).
  std::vector<std::string> stop;
  // Generation ends (kStop) when one of these tokens is sampled; its text is not emitted.
  std::vector<int32_t> stop_token_ids;
  // Do not stop at the model's EOS token ids (vLLM's ignore_eos).
  bool ignore_eos = false;
  // Generation ends (kLength) after this many generated tokens.
  int32_t max_tokens = 16;
  // Report the most likely tokens (SampledToken::top_logprobs), this many (0 to
  // kMaxTopLogprobs), with each sampled token.
  int32_t top_logprobs = 0;

  // OK, or kInvalidArgument naming the first bad field and its allowed range. Ranges are
  // vLLM's: temperature >= 0; top_k >= 0; top_p in (0, 1]; min_p in [0, 1];
  // repetition_penalty > 0; presence_penalty and frequency_penalty in [-2, 2]; every stop
  // string non-empty; stop_token_ids >= 0; max_tokens >= 1; top_logprobs in [0, 20] (OpenAI's
  // limit). NaN and infinities are rejected.
  absl::Status Validate() const;
};

// The most a request may ask for in SamplingParams::top_logprobs (the OpenAI API's limit).
inline constexpr int32_t kMaxTopLogprobs = 20;

// A token and its log-probability.
struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// One sampled token.
struct SampledToken {
  int32_t token_id = 0;
  // log p(token_id) under log_softmax of the logits exactly as passed to Sample(), before
  // penalties, temperature and truncation. This is vLLM's default: V1's Sampler uses
  // logprobs_mode="raw_logprobs" ("Use the original logits (before any penalties or temperature
  // scaling) for the top-k logprobs", vllm/v1/sample/sampler.py). The OpenAI `logprobs` field
  // reports this value.
  float logprob = 0.0f;
  // log p(token_id) under the distribution the token was actually drawn from: softmax of the
  // processed logits after penalties, temperature, top-k, top-p and min-p (vLLM's
  // "processed_logprobs"; V0's logprobs). For greedy decoding it is log_softmax of the logits
  // after penalties only (no temperature or truncation), as vLLM's all-greedy path computes it.
  float processed_logprob = 0.0f;
  // The params.top_logprobs most likely tokens under the same raw distribution as `logprob`,
  // most likely first (ties: lower id first), in top_logprobs[0, top_logprobs_count).
  std::array<TokenLogprob, kMaxTopLogprobs> top_logprobs;
  int32_t top_logprobs_count = 0;
};

// Samples the next token of one sequence. Order of operations, as transformers applies its
// processors and then its warpers (with vLLM's order inside the penalty step):
//   1. repetition penalty (prompt + generated), then frequency and presence (generated only);
//   2. greedy (temperature < 1e-5): argmax, ties to the lowest token id; steps 3-6 are skipped;
//   3. temperature: logits / temperature;
//   4. top-k; 5. top-p; 6. min-p (each sets removed logits to -inf);
//   7. one draw from softmax of what is left.
//
// Determinism: a Sampler owns a std::mt19937_64 seeded with params.seed (whose output the C++
// standard fixes) and converts draws to doubles itself (top 53 bits * 2^-53); the softmax weights
// come from a libm-free float exp and are summed in a fixed order, and candidates are scanned in
// token id order. So the token sequence depends only on the seed, the params and the logits, on
// every IEEE-754 machine with the same C++ standard library (logprob values use std::log and may
// differ in the last bit). Each non-greedy Sample() consumes exactly one 64-bit draw and greedy
// consumes none. Without a seed the generator is seeded from a process-wide source: system_clock
// and steady_clock read once per process plus an atomic counter per Sampler, mixed by splitmix64.
// Unseeded samplers differ from one another and between runs; this is not a cryptographic source.
//
// Cost: O(V) per token plus O(prompt + generated) for the penalties; top-k and top-p use
// nth_element (top-p on halving ranges, O(V) expected) and sort at most 64 candidates. Scratch
// buffers are sized on the first call (or by the vocab_size constructor) and reused: no allocation
// per token after that while V stays the same. Memory: 4 bytes per vocabulary entry for greedy
// without penalties, up to 28 with top-k/top-p and every penalty on.
//
// Not thread-safe: one Sampler per sequence, used by one thread at a time.
class Sampler {
 public:
  // `params` must have passed Validate() (checked in debug builds). `vocab_size`, when non-zero,
  // sizes the scratch buffers now instead of on the first Sample().
  explicit Sampler(const SamplingParams& params, size_t vocab_size = 0);

  // Picks the next token from `logits` (one per vocabulary entry, left unmodified).
  // `prompt_tokens` and `generated_tokens` feed the penalties; ids outside [0, logits.size())
  // are ignored (the request layer validates token ids against the vocabulary).
  // Precondition (checked): logits is non-empty, contains no NaN or +inf, and at least one entry
  // is finite. Logits come from our engine, so a violation is a bug, not bad input.
  SampledToken Sample(std::span<const float> logits, std::span<const int32_t> prompt_tokens,
                      std::span<const int32_t> generated_tokens);

  // The logits after every processing step of the last Sample() (removed tokens are -inf;
  // greedy: after penalties only). Valid until the next Sample() or destruction.
  std::span<const float> processed_logits() const { return work_; }

  const SamplingParams& params() const { return params_; }

 private:
  // The params_.top_logprobs most likely tokens of `logits` into `out`.
  void FillTopLogprobs(std::span<const float> logits, double raw_lse, SampledToken& out) const;
  void Resize(size_t vocab_size);
  void ApplyPenalties(std::span<const int32_t> prompt_tokens,
                      std::span<const int32_t> generated_tokens);
  // Steps 4-6 on the first `n` entries of idx_ (ascending token ids). Each sets the logits it
  // removes to -inf, keeps idx_ ascending, and returns how many candidates are left.
  size_t TopK(size_t n);
  size_t TopP(size_t n, double total_weight);
  size_t MinP(size_t n);
  // Uniform double in [0, 1) from the top 53 bits of one engine draw.
  double NextUniform();

  SamplingParams params_;
  bool greedy_;
  bool penalized_;  // some penalty differs from its neutral value
  std::mt19937_64 rng_;
  // Scratch, vocab-sized and reused across calls; a buffer is sized only when the params use it.
  std::vector<float> work_;     // processed logits (always)
  std::vector<int32_t> idx_;    // candidate token ids, ascending (sampling)
  std::vector<float> weight_;   // weight_[t] = exp(work_[t] - max) for candidates (sampling)
  std::vector<uint64_t> keys_;  // rank keys (logit descending, id ascending) for top-k / top-p
  std::vector<uint32_t> seen_;  // repetition penalty: seen_[t] == stamp_ once t was penalized
  std::vector<int32_t> count_;  // frequency/presence: occurrences in the generated tokens
  uint32_t stamp_ = 0;
};

// Why a sequence finished.
enum class FinishReason {
  kNone,    // not finished
  kStop,    // a stop string, a stop token id or an EOS token (OpenAI "stop")
  kLength,  // max_tokens generated (OpenAI "length")
};

// "stop" / "length" / "" as the OpenAI API spells finish_reason.
std::string_view FinishReasonName(FinishReason reason);

// Finds stop strings in streamed text that arrives in arbitrary pieces (detokenized deltas), so a
// stop string may span any number of tokens. Text that could still turn out to be the start of a
// stop string is held back until it cannot, so nothing after a stop string is ever emitted.
// Stop strings never contain an empty string (SamplingParams::Validate()). Not thread-safe.
class StopMatcher {
 public:
  struct Update {
    std::string text;      // safe to emit now (possibly empty)
    bool stopped = false;  // a stop string completed; `text` ends right before it
    int stop_index = -1;   // when stopped: index into the stop strings
  };

  explicit StopMatcher(std::vector<std::string> stop_strings);

  // Appends `delta` to the text. When a stop string completes, returns the text before it and
  // stopped = true; the matcher then stays stopped and further Feed() calls return nothing. When
  // several complete within one delta, the one that ends first wins (then the one that starts
  // first, then the first listed), which is what token-by-token arrival would have found, so the
  // result does not depend on how the text is split into deltas and no emitted text contains a
  // stop string. (vLLM takes the first-listed stop string found in the new text instead.)
  // Otherwise returns everything but the longest suffix that is a proper prefix of some stop
  // string. With valid UTF-8 text and stop strings, the split falls on a character boundary.
  Update Feed(std::string_view delta);

  // Returns the held-back text and clears it: generation ended for another reason, so a partial
  // stop string is ordinary text. Empty after a stop.
  std::string Flush();

  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // held-back text: a proper prefix of some stop string, or empty
  bool stopped_ = false;
};

// Applies every end-of-generation rule of a request to the stream of sampled tokens, in vLLM's
// order (vllm/engine/output_processor/stop_checker.py): EOS (unless ignore_eos), stop token ids,
// stop strings, then max_tokens. A stop on the max_tokens-th token is therefore kStop. The text
// of an EOS or stop token is not emitted; held-back text is flushed on every finish but a stop
// string. Not thread-safe.
class FinishTracker {
 public:
  struct Step {
    std::string text;  // text to emit for this token
    FinishReason reason = FinishReason::kNone;
    int stop_string_index = -1;            // kStop by a stop string: which one
    std::optional<int32_t> stop_token_id;  // kStop by EOS or a stop token id: which one
  };

  // `params` must have passed Validate(). `eos_token_ids`: the model's end-of-sequence ids.
  FinishTracker(const SamplingParams& params, std::span<const int32_t> eos_token_ids);

  // Records one generated token and its detokenized text delta. Must not be called after a
  // Step with reason != kNone (checked).
  Step OnToken(int32_t token_id, std::string_view text_delta);

  FinishReason reason() const { return reason_; }
  int32_t num_generated() const { return num_generated_; }

 private:
  StopMatcher matcher_;
  std::vector<int32_t> eos_ids_;
  std::vector<int32_t> stop_ids_;
  bool ignore_eos_;
  int32_t max_tokens_;
  int32_t num_generated_ = 0;
  FinishReason reason_ = FinishReason::kNone;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_ENGINE_SAMPLING_SAMPLER_H_
