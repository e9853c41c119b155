#include "daemon/runtime/engine/sampling/sampler.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "absl/strings/str_format.h"
#include "codec/base/check.h"

namespace df11::runtime {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// vLLM's _SAMPLING_EPS (vllm/sampling_params.py, vllm/v1/sample/sampler.py): temperatures below
// it are treated as greedy.
constexpr float kGreedyTemperature = 1e-5f;

// Top-p first checks whether the 64 highest candidates reach the mass (real next-token
// distributions usually put it in a few dozen tokens), then bisects; it sorts at most this many.
constexpr size_t kTopPFirstPrefix = 64;

absl::Status OutOfRange(const char* field, const char* range, double value) {
  return absl::InvalidArgumentError(
      absl::StrFormat("SamplingParams.%s must be %s, got %g", field, range, value));
}

bool InClosed(float x, float lo, float hi) { return x >= lo && x <= hi; }  // false for NaN

// splitmix64 (Steele, Lea, Flood 2014): spreads nearby inputs (clock + counter) over 64 bits.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Seed for a request without one: one clock reading per process plus a per-Sampler counter.
uint64_t UnseededSeed() {
  static const uint64_t base = SplitMix64(
      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  static std::atomic<uint64_t> counter{0};
  return SplitMix64(base + counter.fetch_add(1, std::memory_order_relaxed));
}

// exp(x) for x <= 0 from float adds and multiplies only (no libm), so the weights, and with
// them the sampled token, are bit-identical on every IEEE-754 machine and compiler (ISO C++ mode:
// no FMA contraction), and the loops below vectorize. Cody-Waite reduction x = k ln2 + r with
// |r| <= ln2 / 2 (Cephes' split of ln2), then the degree-7 Taylor polynomial of e^r (truncation
// error < 6e-9; a few ulp in all). Inputs below -87 (e^-87 ~ 1.6e-38, near FLT_MIN), -inf
// included, give 0.
inline float ExpNonPositive(float x) {
  const bool underflow = x < -87.0f;
  x = underflow ? -87.0f : x;
  // Adding 1.5 * 2^23 rounds x * log2(e) to an integer held in the low mantissa bits.
  constexpr float kRound = 12582912.0f;
  const float t = x * 1.44269504088896341f + kRound;
  const float k = t - kRound;  // in [-126, 0]
  const int32_t exponent = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRound) + 127;
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.98412701e-4f;  // 1/7!
  p = p * r + 1.38888892e-3f;
  p = p * r + 8.33333377e-3f;
  p = p * r + 4.16666679e-2f;
  p = p * r + 1.66666672e-1f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>(exponent << 23);  // 2^k, exponent in [1, 127]
  return underflow ? 0.0f : p * scale;
}

// Returns sum over i < n of exp(x[i] - shift) (shift >= every x[i]), storing each term in out[i]
// when kStore. Eight fixed lanes summed in double and combined in a fixed order: vectorizable
// without -ffast-math, and the same result everywhere.
template <bool kStore>
double ExpSum(const float* x, float shift, float* out, size_t n) {
  double lane[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t l = 0; l < 8; ++l) {
      const float w = ExpNonPositive(x[i + l] - shift);
      if constexpr (kStore) out[i + l] = w;
      lane[l] += w;
    }
  }
  double tail = 0.0;
  for (; i < n; ++i) {
    const float w = ExpNonPositive(x[i] - shift);
    if constexpr (kStore) out[i] = w;
    tail += w;
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])) +
         tail;
}

// Copies x to out; returns max(x) (-inf for all -inf) and whether any x is NaN.
std::pair<float, bool> CopyMax(const float* x, float* out, size_t n) {
  float lane_max[8];
  int lane_nan[8] = {};
  std::fill(lane_max, lane_max + 8, -std::numeric_limits<float>::infinity());
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t l = 0; l < 8; ++l) {
      const float v = x[i + l];
      out[i + l] = v;
      lane_max[l] = v > lane_max[l] ? v : lane_max[l];
      lane_nan[l] |= v != v;
    }
  }
  float m = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (; i < n; ++i) {
    out[i] = x[i];
    m = x[i] > m ? x[i] : m;
    nan |= x[i] != x[i];
  }
  for (size_t l = 0; l < 8; ++l) {
    m = lane_max[l] > m ? lane_max[l] : m;
    nan |= lane_nan[l] != 0;
  }
  return {m, nan};
}

}  // namespace

absl::Status SamplingParams::Validate() const {
  if (!(std::isfinite(temperature) && temperature >= 0.0f)) {
    return OutOfRange("temperature", "a finite number >= 0 (0 means greedy)", temperature);
  }
  if (top_k < 0) return OutOfRange("top_k", ">= 0 (0 disables it)", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return OutOfRange("top_p", "in (0, 1]", top_p);
  if (!InClosed(min_p, 0.0f, 1.0f)) return OutOfRange("min_p", "in [0, 1]", min_p);
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f)) {
    return OutOfRange("repetition_penalty", "a finite number > 0", repetition_penalty);
  }
  if (!InClosed(presence_penalty, -2.0f, 2.0f)) {
    return OutOfRange("presence_penalty", "in [-2, 2]", presence_penalty);
  }
  if (!InClosed(frequency_penalty, -2.0f, 2.0f)) {
    return OutOfRange("frequency_penalty", "in [-2, 2]", frequency_penalty);
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("SamplingParams.stop[%d] must be a non-empty string", i));
    }
  }
  for (size_t i = 0; i < stop_token_ids.size(); ++i) {
    if (stop_token_ids[i] < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "SamplingParams.stop_token_ids[%d] must be >= 0, got %d", i, stop_token_ids[i]));
    }
  }
  if (max_tokens < 1) return OutOfRange("max_tokens", ">= 1", max_tokens);
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs) {
    return OutOfRange("top_logprobs", "in [0, 20]", top_logprobs);
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------------------------------------------
// Sampler

Sampler::Sampler(const SamplingParams& params, size_t vocab_size)
    : params_(params),
      greedy_(params.temperature < kGreedyTemperature),
      penalized_(params.repetition_penalty != 1.0f || params.frequency_penalty != 0.0f ||
                 params.presence_penalty != 0.0f),
      rng_(params.seed.has_value() ? *params.seed : UnseededSeed()) {
  DF11_DCHECK(params.Validate().ok());
  if (vocab_size > 0) Resize(vocab_size);
}

void Sampler::Resize(size_t vocab_size) {
  work_.assign(vocab_size, 0.0f);
  if (!greedy_) {
    idx_.assign(vocab_size, 0);
    weight_.assign(vocab_size, 0.0f);
    if (params_.top_k > 0 || params_.top_p < 1.0f) keys_.assign(vocab_size, 0);
  }
  if (params_.repetition_penalty != 1.0f) {
    seen_.assign(vocab_size, 0);
    stamp_ = 0;
  }
  if (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) {
    count_.assign(vocab_size, 0);
  }
}

double Sampler::NextUniform() {
  // 53 high bits -> [0, 1) exactly representable; independent of <random>'s distributions.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

void Sampler::ApplyPenalties(std::span<const int32_t> prompt_tokens,
                             std::span<const int32_t> generated_tokens) {
  const auto vocab = static_cast<int64_t>(work_.size());
  auto valid = [vocab](int32_t t) { return t >= 0 && t < vocab; };

  // transformers' RepetitionPenaltyLogitsProcessor: each distinct token of prompt + generated
  // once; `score < 0 ? score * penalty : score / penalty`. vLLM applies it first, too.
  const float rp = params_.repetition_penalty;
  if (rp != 1.0f) {
    if (++stamp_ == 0) {  // wrapped after 2^32 calls: forget every mark
      std::fill(seen_.begin(), seen_.end(), 0u);
      stamp_ = 1;
    }
    auto penalize = [&](int32_t t) {
      if (!valid(t) || seen_[t] == stamp_) return;
      seen_[t] = stamp_;
      float& x = work_[t];
      x = x < 0.0f ? x * rp : x / rp;
    };
    for (int32_t t : prompt_tokens) penalize(t);
    for (int32_t t : generated_tokens) penalize(t);
  }

  // vLLM (OpenAI's definition), generated tokens only:
  //   logits -= frequency_penalty * count;  logits -= presence_penalty * (count > 0)
  const float fp = params_.frequency_penalty;
  const float pp = params_.presence_penalty;
  if (fp != 0.0f || pp != 0.0f) {
    for (int32_t t : generated_tokens) {
      if (valid(t)) ++count_[t];
    }
    for (int32_t t : generated_tokens) {
      if (!valid(t) || count_[t] == 0) continue;  // 0: already applied for this token
      float& x = work_[t];
      x -= fp * static_cast<float>(count_[t]);
      x -= pp;
      count_[t] = 0;  // leaves count_ all zero for the next call
    }
  }
}

namespace {

// One unsigned integer per candidate whose ascending order is logit descending, then token id
// ascending; unique per token, so "ranked at or above" is a single comparison.
uint64_t RankKey(float logit, int32_t id) {
  const uint32_t bits = std::bit_cast<uint32_t>(logit + 0.0f);  // -0 -> +0: equal logits tie
  const uint32_t ascending = (bits & 0x80000000u) != 0 ? ~bits : (bits | 0x80000000u);
  return (uint64_t{~ascending} << 32) | static_cast<uint32_t>(id);
}

int32_t KeyId(uint64_t key) { return static_cast<int32_t>(static_cast<uint32_t>(key)); }

}  // namespace

size_t Sampler::TopK(size_t n) {
  const auto k = static_cast<size_t>(params_.top_k);
  if (k == 0 || k >= n) return n;
  // transformers' TopKLogitsWarper removes `scores < topk(scores, k).values[-1]`: every token
  // tied with the k-th highest logit survives, so more than k tokens remain only on such a tie.
  for (size_t j = 0; j < n; ++j) keys_[j] = RankKey(work_[idx_[j]], idx_[j]);
  std::nth_element(keys_.begin(), keys_.begin() + (k - 1), keys_.begin() + n);
  const float threshold = work_[KeyId(keys_[k - 1])];
  size_t kept = 0;
  for (size_t j = 0; j < n; ++j) {
    const int32_t t = idx_[j];
    if (work_[t] >= threshold) {
      idx_[kept++] = t;
    } else {
      work_[t] = kNegInf;
    }
  }
  return kept;
}

size_t Sampler::TopP(size_t n, double total_weight) {
  if (params_.top_p >= 1.0f || n <= 1) return n;
  // transformers' TopPLogitsWarper sorts ascending and removes tokens whose ascending cumulative
  // probability is <= 1 - top_p. The cumulative probability below a token is 1 minus the mass of
  // the tokens ranked above it, so a token is kept exactly when the mass ranked strictly above it
  // is < top_p: the smallest top set whose mass is >= top_p, never empty. We sum in double
  // (transformers sums float32 from the bottom; results differ only when a partial sum is within
  // rounding of top_p). Equal logits rank by lower token id first; torch.sort leaves their order
  // unspecified.
  const double target = double{params_.top_p} * total_weight;
  uint64_t* keys = keys_.data();
  for (size_t j = 0; j < n; ++j) keys[j] = RankKey(work_[idx_[j]], idx_[j]);
  auto mass = [&](size_t begin, size_t end) {
    double m = 0.0;
    for (size_t j = begin; j < end; ++j) m += weight_[KeyId(keys[j])];
    return m;
  };

  // Invariant: keys[0, lo) are the top `lo` candidates (any order), their mass `above` < target,
  // and the kept count lies in (lo, hi]. Try the top 64 first (real distributions rarely need
  // more), then halve the range: O(n) expected, no full sort.
  size_t lo = 0;
  size_t hi = n;
  double above = 0.0;
  size_t split = std::min(n, kTopPFirstPrefix);
  while (hi - lo > kTopPFirstPrefix) {
    std::nth_element(keys + lo, keys + split, keys + hi);
    const double m = mass(lo, split);
    if (above + m >= target) {
      hi = split;
    } else {
      above += m;
      lo = split;
    }
    split = lo + (hi - lo) / 2;
  }
  std::sort(keys + lo, keys + hi);
  size_t kept = hi;
  for (size_t r = lo; r < hi; ++r) {
    if (above >= target) {
      kept = r;
      break;
    }
    above += weight_[KeyId(keys[r])];
  }
  // The kept set is every candidate ranked at or above the last kept one. Filtering idx_ (rather
  // than taking keys[0, kept)) keeps it in id order, independent of how nth_element arranged it.
  const uint64_t last_kept = keys[kept - 1];
  size_t out = 0;
  for (size_t j = 0; j < n; ++j) {
    const int32_t t = idx_[j];
    if (RankKey(work_[t], t) <= last_kept) {
      idx_[out++] = t;
    } else {
      work_[t] = kNegInf;
    }
  }
  DF11_DCHECK(out == kept);
  return out;
}

size_t Sampler::MinP(size_t n) {
  const double min_p = params_.min_p;
  if (min_p <= 0.0) return n;
  // transformers' MinPLogitsWarper removes `probs < min_p * probs.max()`. A token's probability
  // over the top one's is exp(logit - max) = weight_, so no normalization is needed; the top
  // token (weight exactly 1) always stays.
  size_t kept = 0;
  for (size_t j = 0; j < n; ++j) {
    const int32_t t = idx_[j];
    if (weight_[t] < min_p) {
      work_[t] = kNegInf;
    } else {
      idx_[kept++] = t;
    }
  }
  return kept;
}

void Sampler::FillTopLogprobs(std::span<const float> logits, double raw_lse,
                              SampledToken& out) const {
  // One pass keeping the best n in order (n <= 20): most logits fail the first comparison.
  const int32_t n = params_.top_logprobs;
  int32_t count = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (count == n && !(v > out.top_logprobs[n - 1].logprob)) continue;
    int32_t at = count < n ? count++ : n - 1;
    while (at > 0 && v > out.top_logprobs[at - 1].logprob) {  // strict: ties keep the lower id
      out.top_logprobs[at] = out.top_logprobs[at - 1];
      --at;
    }
    out.top_logprobs[at] = TokenLogprob{static_cast<int32_t>(i), v};
  }
  for (int32_t k = 0; k < count; ++k) {
    out.top_logprobs[k].logprob = static_cast<float>(double{out.top_logprobs[k].logprob} - raw_lse);
  }
  out.top_logprobs_count = count;
}

SampledToken Sampler::Sample(std::span<const float> logits, std::span<const int32_t> prompt_tokens,
                             std::span<const int32_t> generated_tokens) {
  const size_t vocab = logits.size();
  DF11_CHECK(vocab > 0);
  DF11_CHECK(vocab <= static_cast<size_t>(std::numeric_limits<int32_t>::max()));
  if (work_.size() != vocab) Resize(vocab);

  // Copy (the caller's logits stay raw for `logprob`), then the raw log-sum-exp, shifted by the
  // maximum so every exponent is <= 0 and the largest term is exactly 1. When sampling, the raw
  // weights are kept: without penalties at temperature 1 they are the processed weights too.
  const auto [raw_max, has_nan] = CopyMax(logits.data(), work_.data(), vocab);
  DF11_CHECK(!has_nan);
  DF11_CHECK(std::isfinite(raw_max));
  const double raw_sum = greedy_ ? ExpSum<false>(logits.data(), raw_max, nullptr, vocab)
                                 : ExpSum<true>(logits.data(), raw_max, weight_.data(), vocab);
  const double raw_lse = raw_max + std::log(raw_sum);
  SampledToken out;
  if (params_.top_logprobs > 0) FillTopLogprobs(logits, raw_lse, out);

  float max_logit = raw_max;
  if (penalized_) {
    ApplyPenalties(prompt_tokens, generated_tokens);
    max_logit = CopyMax(work_.data(), work_.data(), vocab).first;  // finite stays finite
  }

  if (greedy_) {
    // Argmax, ties to the lowest id: the first entry equal to the maximum.
    const auto best =
        static_cast<int32_t>(std::find(work_.begin(), work_.end(), max_logit) - work_.begin());
    out.token_id = best;
    out.logprob = static_cast<float>(double{logits[best]} - raw_lse);
    out.processed_logprob =
        penalized_
            ? static_cast<float>(-std::log(ExpSum<false>(work_.data(), max_logit, nullptr, vocab)))
            : out.logprob;
    return out;
  }

  // Temperature (transformers' TemperatureLogitsWarper: scores / temperature). Division by a
  // positive number is monotone, so the maximum divides too.
  const float temperature = params_.temperature;
  const bool scaled = temperature != 1.0f;
  if (scaled) {
    for (size_t i = 0; i < vocab; ++i) work_[i] /= temperature;
    max_logit /= temperature;
  }
  const bool reweigh = scaled || penalized_;  // else weight_ already holds exp(work_ - max)

  const bool truncate = params_.top_k > 0 || params_.top_p < 1.0f || params_.min_p > 0.0f;
  if (!truncate) {
    // Every token is a candidate; -inf logits weigh exactly 0 and are never chosen.
    const double total =
        reweigh ? ExpSum<true>(work_.data(), max_logit, weight_.data(), vocab) : raw_sum;
    const double u = NextUniform() * total;
    int32_t token = -1;
    int32_t last_positive = 0;
    double acc = 0.0;
    for (size_t i = 0; i < vocab; ++i) {
      if (weight_[i] == 0.0f) continue;
      last_positive = static_cast<int32_t>(i);
      acc += weight_[i];
      if (u < acc) {
        token = last_positive;
        break;
      }
    }
    if (token < 0) token = last_positive;  // rounding left u at or above the final sum
    out.token_id = token;
    out.logprob = static_cast<float>(double{logits[token]} - raw_lse);
    out.processed_logprob =
        static_cast<float>(double{work_[token]} - double{max_logit} - std::log(total));
    return out;
  }

  // Candidates in id order: every token whose logit is not -inf.
  size_t n = 0;
  for (size_t i = 0; i < vocab; ++i) {
    if (work_[i] != kNegInf) idx_[n++] = static_cast<int32_t>(i);
  }
  DF11_CHECK(n > 0);  // max_logit is finite

  n = TopK(n);
  // weight_[t] = exp(work_[t] - max_logit) for every candidate; top-k never removes the maximum.
  // Many candidates: one contiguous pass (removed tokens are -inf and weigh 0); few: gather.
  double total = 0.0;
  if (!reweigh) {
    for (size_t j = 0; j < n; ++j) total += weight_[idx_[j]];
  } else if (n >= vocab / 4) {
    total = ExpSum<true>(work_.data(), max_logit, weight_.data(), vocab);
  } else {
    for (size_t j = 0; j < n; ++j) {
      const int32_t t = idx_[j];
      const float w = ExpNonPositive(work_[t] - max_logit);
      weight_[t] = w;
      total += w;
    }
  }
  n = TopP(n, total);
  n = MinP(n);

  // Softmax over the survivors and one inverse-CDF draw, scanning in token id order.
  total = 0.0;
  for (size_t j = 0; j < n; ++j) total += weight_[idx_[j]];
  const double u = NextUniform() * total;
  int32_t token = idx_[n - 1];  // if rounding leaves u at or above the final sum
  double acc = 0.0;
  for (size_t j = 0; j < n; ++j) {
    acc += weight_[idx_[j]];
    if (u < acc) {
      token = idx_[j];
      break;
    }
  }
  out.token_id = token;
  out.logprob = static_cast<float>(double{logits[token]} - raw_lse);
  out.processed_logprob =
      static_cast<float>(double{work_[token]} - double{max_logit} - std::log(total));
  return out;
}

// ------------------------------------------------------------------------------------------------
// Finish handling

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kNone:
      break;
  }
  return "";
}

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
  for (const std::string& s : stops_) DF11_CHECK(!s.empty());  // SamplingParams::Validate()
}

StopMatcher::Update StopMatcher::Feed(std::string_view delta) {
  Update update;
  if (stopped_) return update;
  pending_.append(delta);

  // Every emitted byte lies before any possible match: pending_ starts at the earliest position
  // where a stop string could still begin, so searching pending_ alone finds every match.
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  int best = -1;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t start = pending_.find(stops_[i]);
    if (start == std::string::npos) continue;
    const size_t end = start + stops_[i].size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
      best = static_cast<int>(i);
    }
  }
  if (best >= 0) {
    update.text = pending_.substr(0, best_start);
    update.stopped = true;
    update.stop_index = best;
    pending_.clear();
    stopped_ = true;
    return update;
  }

  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  const size_t emit = pending_.size() - hold;
  update.text = pending_.substr(0, emit);
  pending_.erase(0, emit);
  return update;
}

std::string StopMatcher::Flush() { return std::exchange(pending_, std::string()); }

FinishTracker::FinishTracker(const SamplingParams& params, std::span<const int32_t> eos_token_ids)
    : matcher_(params.stop),
      eos_ids_(eos_token_ids.begin(), eos_token_ids.end()),
      stop_ids_(params.stop_token_ids),
      ignore_eos_(params.ignore_eos),
      max_tokens_(params.max_tokens) {
  DF11_DCHECK(params.Validate().ok());
}

FinishTracker::Step FinishTracker::OnToken(int32_t token_id, std::string_view text_delta) {
  DF11_CHECK(reason_ == FinishReason::kNone);
  ++num_generated_;
  Step step;
  auto contains = [token_id](const std::vector<int32_t>& ids) {
    return std::find(ids.begin(), ids.end(), token_id) != ids.end();
  };
  if ((!ignore_eos_ && contains(eos_ids_)) || contains(stop_ids_)) {
    // vLLM does not detokenize the stop token; text held back so far is ordinary text.
    step.text = matcher_.Flush();
    step.reason = FinishReason::kStop;
    step.stop_token_id = token_id;
  } else {
    StopMatcher::Update update = matcher_.Feed(text_delta);
    step.text = std::move(update.text);
    if (update.stopped) {
      step.reason = FinishReason::kStop;
      step.stop_string_index = update.stop_index;
    } else if (num_generated_ >= max_tokens_) {
      step.text += matcher_.Flush();
      step.reason = FinishReason::kLength;
    }
  }
  reason_ = step.reason;
  return step;
}

}  // namespace df11::runtime
