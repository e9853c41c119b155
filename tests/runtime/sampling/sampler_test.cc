// Tests for daemon/runtime/engine/sampling/sampler.h: parameter validation, each logits step against
// hand-computed values, seeded determinism, sampled frequencies, and the finish rules.
//
// Expected logits are chosen to be exact in binary floating point (or kept well away from a
// top-p / min-p boundary) so the assertions can be equalities. Every random input comes from a
// std::mt19937_64 with a fixed seed printed by SCOPED_TRACE.
#include "daemon/runtime/engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace df11::runtime {
namespace {

using ::df11::testing::IsOk;
using ::df11::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();

SamplingParams Seeded(uint64_t seed) {
  SamplingParams p;
  p.seed = seed;
  return p;
}

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

std::vector<float> Processed(const Sampler& s) {
  return {s.processed_logits().begin(), s.processed_logits().end()};
}

// Ids of the tokens that survived truncation in the last Sample().
std::vector<int32_t> Kept(const Sampler& s) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < s.processed_logits().size(); ++i) {
    if (s.processed_logits()[i] != -kInf) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

// Logits whose softmax is exactly proportional to `probs`.
std::vector<float> LogOf(std::vector<double> probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

std::vector<float> RandomLogits(uint64_t seed, size_t n, double scale) {
  std::mt19937_64 gen(seed);
  std::vector<float> out(n);
  for (float& x : out) {
    x = static_cast<float>((static_cast<double>(gen() >> 11) * 0x1.0p-53 * 2.0 - 1.0) * scale);
  }
  return out;
}

const std::vector<int32_t> kNone;

// ---------------------------------------------------------------------------------------------
// SamplingParams::Validate

TEST(SamplingParamsTest, DefaultsAndBoundariesAreValid) {
  EXPECT_THAT(SamplingParams().Validate(), IsOk());
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.repetition_penalty = 0.01f;
  p.max_tokens = 1;
  p.stop_token_ids = {0};
  EXPECT_THAT(p.Validate(), IsOk());
}

TEST(SamplingParamsTest, ExactMessageNamesFieldAndRange) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_EQ(p.Validate(),
            absl::InvalidArgumentError("SamplingParams.top_p must be in (0, 1], got 0"));
}

TEST(SamplingParamsTest, EachOutOfRangeFieldIsInvalidArgumentNamingIt) {
  struct Case {
    const char* field;
    void (*set)(SamplingParams&);
    const char* range;
  };
  const Case cases[] = {
      {"temperature", [](SamplingParams& p) { p.temperature = -0.5f; }, ">= 0"},
      {"temperature", [](SamplingParams& p) { p.temperature = NAN; }, ">= 0"},
      {"temperature", [](SamplingParams& p) { p.temperature = kInf; }, ">= 0"},
      {"top_k", [](SamplingParams& p) { p.top_k = -1; }, ">= 0"},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.5f; }, "(0, 1]"},
      {"top_p", [](SamplingParams& p) { p.top_p = NAN; }, "(0, 1]"},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.1f; }, "[0, 1]"},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.1f; }, "[0, 1]"},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "> 0"},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 2.5f; }, "[-2, 2]"},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -3.0f; }, "[-2, 2]"},
      {"stop[1]",
       [](SamplingParams& p) {
         p.stop = {"a", ""};
       },
       "non-empty"},
      {"stop_token_ids[0]", [](SamplingParams& p) { p.stop_token_ids = {-4}; }, ">= 0"},
      {"max_tokens", [](SamplingParams& p) { p.max_tokens = 0; }, ">= 1"},
      {"top_logprobs", [](SamplingParams& p) { p.top_logprobs = 21; }, "[0, 20]"},
      {"top_logprobs", [](SamplingParams& p) { p.top_logprobs = -1; }, "[0, 20]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    SamplingParams p;
    c.set(p);
    const absl::Status s = p.Validate();
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                            HasSubstr(std::string("SamplingParams.") + c.field + " must be")));
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.range)));
  }
}

// ---------------------------------------------------------------------------------------------
// Greedy

TEST(SamplerGreedyTest, PicksArgmax) {
  Sampler s(Greedy());
  const std::vector<float> logits = {0.1f, 2.5f, -1.0f, 2.4f};
  EXPECT_EQ(s.Sample(logits, kNone, kNone).token_id, 1);
}

TEST(SamplerGreedyTest, TiesGoToLowestId) {
  Sampler s(Greedy());
  EXPECT_EQ(s.Sample(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}, kNone, kNone).token_id, 1);
  EXPECT_EQ(s.Sample(std::vector<float>{-kInf, 5.0f, 5.0f}, kNone, kNone).token_id, 1);
  EXPECT_EQ(s.Sample(std::vector<float>{7.0f, 7.0f, 7.0f}, kNone, kNone).token_id, 0);
}

TEST(SamplerGreedyTest, TinyTemperatureIsGreedyAndIgnoresTruncation) {
  SamplingParams p = Seeded(1);
  p.temperature = 1e-6f;  // below vLLM's _SAMPLING_EPS
  p.top_k = 1;
  Sampler s(p);
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < 20; ++i) {
    const SampledToken t = s.Sample(logits, kNone, kNone);
    EXPECT_EQ(t.token_id, 0);
    // Greedy's processed distribution is the softmax after penalties, not truncated by top_k.
    EXPECT_FLOAT_EQ(t.processed_logprob, -std::log(4.0f));
  }
}

// ---------------------------------------------------------------------------------------------
// Log-probabilities

TEST(SamplerLogprobTest, RawLogprobIsLogSoftmaxOfInputLogits) {
  // log_softmax({1, 2, 3}) = {1, 2, 3} - 3.40760596444438 (= log(e + e^2 + e^3)).
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const double expected[] = {-2.40760596444438, -1.40760596444438, -0.40760596444438};
  Sampler s(Seeded(3));
  std::vector<int> seen(3, 0);
  for (int i = 0; i < 200; ++i) {
    const SampledToken t = s.Sample(logits, kNone, kNone);
    ASSERT_GE(t.token_id, 0);
    ASSERT_LT(t.token_id, 3);
    ++seen[t.token_id];
    EXPECT_NEAR(t.logprob, expected[t.token_id], 1e-6);
    // Temperature 1, nothing truncated: both views agree.
    EXPECT_NEAR(t.processed_logprob, expected[t.token_id], 1e-6);
  }
  EXPECT_GT(seen[0], 0);  // every token came up, so every expected value was checked
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[2], 0);
}

// The top-N raw logprobs: a full sort's first N (ties to the lower id), the sampled token's own
// logprob among them when it is one of them, for greedy and sampled draws alike.
TEST(SamplerLogprobTest, TopLogprobsAreTheMostLikelyTokensOfTheRawDistribution) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(1000);
  for (float& v : logits) v = std::round(normal(rng) * 4) / 4;  // many ties
  double lse = 0;
  const float m = *std::max_element(logits.begin(), logits.end());
  for (float v : logits) lse += std::exp(double{v} - m);
  lse = m + std::log(lse);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (const bool greedy : {true, false}) {
    for (const int32_t n : {1, 5, 20}) {
      SCOPED_TRACE(::testing::Message() << (greedy ? "greedy" : "sampled") << ", top " << n);
      SamplingParams p = greedy ? Greedy() : Seeded(12);
      p.top_logprobs = n;
      Sampler s(p);
      const SampledToken t = s.Sample(logits, kNone, kNone);
      ASSERT_EQ(t.top_logprobs_count, n);
      for (int32_t k = 0; k < n; ++k) {
        EXPECT_EQ(t.top_logprobs[k].token_id, order[k]) << "rank " << k;
        EXPECT_NEAR(t.top_logprobs[k].logprob, logits[order[k]] - lse, 1e-5) << "rank " << k;
        if (t.top_logprobs[k].token_id == t.token_id) {
          EXPECT_EQ(t.top_logprobs[k].logprob, t.logprob);
        }
      }
      if (greedy) {
        EXPECT_EQ(t.top_logprobs[0].token_id, t.token_id);
      }
    }
  }
  Sampler none(Greedy());
  EXPECT_EQ(none.Sample(logits, kNone, kNone).top_logprobs_count, 0);
}

TEST(SamplerLogprobTest, UniformLogitsGiveMinusLogN) {
  Sampler s(Seeded(4));
  const SampledToken t = s.Sample(std::vector<float>(4, 0.0f), kNone, kNone);
  EXPECT_FLOAT_EQ(t.logprob, -1.3862943611198906f);  // -ln 4
  EXPECT_FLOAT_EQ(t.processed_logprob, -1.3862943611198906f);
}

TEST(SamplerLogprobTest, TemperatureChangesProcessedButNotRawLogprob) {
  // logits {2, 0}. Raw: log_softmax = {2, 0} - log(e^2 + 1) = {-0.126928011, -2.126928011}.
  // T = 2 -> {1, 0}: {-0.313261687, -1.313261687}.  T = 0.5 -> {4, 0}: {-0.018149928,
  // -4.018149928}.
  const std::vector<float> logits = {2.0f, 0.0f};
  const double raw[] = {-0.126928011, -2.126928011};
  struct Case {
    float temperature;
    double processed[2];
  };
  for (const Case& c :
       {Case{2.0f, {-0.313261687, -1.313261687}}, Case{0.5f, {-0.018149928, -4.018149928}}}) {
    SCOPED_TRACE(c.temperature);
    SamplingParams p = Seeded(5);
    p.temperature = c.temperature;
    Sampler s(p);
    std::vector<int> seen(2, 0);
    for (int i = 0; i < 400; ++i) {
      const SampledToken t = s.Sample(logits, kNone, kNone);
      ++seen[t.token_id];
      EXPECT_NEAR(t.logprob, raw[t.token_id], 1e-6);
      EXPECT_NEAR(t.processed_logprob, c.processed[t.token_id], 1e-6);
    }
    EXPECT_GT(seen[0], 0);
    EXPECT_GT(seen[1], 0);
    EXPECT_THAT(Processed(s), ElementsAre(2.0f / c.temperature, 0.0f));
  }
}

TEST(SamplerLogprobTest, ProcessedLogprobRenormalizesOverSurvivors) {
  // Top-k 2 of softmax-proportional {0.4, 0.3, 0.2, 0.1}: survivors {0.4, 0.3} renormalize to
  // {4/7, 3/7}; the raw logprob stays log(0.4) / log(0.3).
  SamplingParams p = Seeded(6);
  p.top_k = 2;
  Sampler s(p);
  const std::vector<float> logits = LogOf({0.4, 0.3, 0.2, 0.1});
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 100; ++i) {
    const SampledToken t = s.Sample(logits, kNone, kNone);
    ++seen[t.token_id];
    ASSERT_LT(t.token_id, 2);
    const double raw = t.token_id == 0 ? 0.4 : 0.3;
    EXPECT_NEAR(t.logprob, std::log(raw), 1e-6);
    EXPECT_NEAR(t.processed_logprob, std::log(raw / 0.7), 1e-6);
  }
  EXPECT_GT(seen[0], 0);
  EXPECT_GT(seen[1], 0);
}

// ---------------------------------------------------------------------------------------------
// Top-k

TEST(SamplerTopKTest, KeepsExactlyKHighest) {
  SamplingParams p = Seeded(7);
  p.top_k = 2;
  Sampler s(p);
  const std::vector<float> logits = {1.0f, 5.0f, 3.0f, 4.0f, 2.0f};
  for (int i = 0; i < 200; ++i) {
    const int32_t t = s.Sample(logits, kNone, kNone).token_id;
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
  EXPECT_THAT(Processed(s), ElementsAre(-kInf, 5.0f, -kInf, 4.0f, -kInf));
}

TEST(SamplerTopKTest, TiesWithTheKthLogitAreAllKeptAsInTransformers) {
  // transformers removes `scores < topk(scores, k)[0][..., -1]`: three tokens share the 2nd
  // highest logit, so k = 2 keeps 1 + 3 tokens.
  SamplingParams p = Seeded(8);
  p.top_k = 2;
  Sampler s(p);
  s.Sample(std::vector<float>{1.0f, 4.0f, 9.0f, 4.0f, 2.0f, 4.0f}, kNone, kNone);
  EXPECT_THAT(Kept(s), ElementsAre(1, 2, 3, 5));
}

TEST(SamplerTopKTest, KOfOneIsArgmaxWithLogprobZero) {
  SamplingParams p = Seeded(9);
  p.top_k = 1;
  Sampler s(p);
  const SampledToken t = s.Sample(std::vector<float>{0.5f, 3.0f, 1.0f}, kNone, kNone);
  EXPECT_EQ(t.token_id, 1);
  EXPECT_EQ(t.processed_logprob, 0.0f);
}

TEST(SamplerTopKTest, KAtLeastVocabKeepsEverything) {
  SamplingParams p = Seeded(10);
  p.top_k = 3;
  Sampler s(p);
  s.Sample(std::vector<float>{0.5f, 3.0f, 1.0f}, kNone, kNone);
  EXPECT_THAT(Kept(s), ElementsAre(0, 1, 2));
}

// ---------------------------------------------------------------------------------------------
// Top-p

TEST(SamplerTopPTest, EqualProbabilitiesStopWhenMassAboveReachesP) {
  // Four tokens at exactly 0.25. A token is kept while the mass ranked above it is < top_p;
  // equal logits rank by lower id.
  struct Case {
    float top_p;
    std::vector<int32_t> kept;
  };
  for (const Case& c :
       {Case{0.25f, {0}}, Case{0.26f, {0, 1}}, Case{0.5f, {0, 1}}, Case{0.5000001f, {0, 1, 2}},
        Case{0.75f, {0, 1, 2}}, Case{0.76f, {0, 1, 2, 3}}}) {
    SCOPED_TRACE(c.top_p);
    SamplingParams p = Seeded(11);
    p.top_p = c.top_p;
    Sampler s(p);
    s.Sample(std::vector<float>(4, 0.0f), kNone, kNone);
    EXPECT_THAT(Kept(s), ElementsAreArray(c.kept));
  }
}

TEST(SamplerTopPTest, KeepsSmallestSetReachingPByHand) {
  // Probabilities by id: {0.15, 0.5, 0.05, 0.3}; ranked 0.5 (id 1), 0.3 (id 3), 0.15 (id 0),
  // 0.05 (id 2); mass above each: 0, 0.5, 0.8, 0.95.
  const std::vector<float> logits = LogOf({0.15, 0.5, 0.05, 0.3});
  struct Case {
    float top_p;
    std::vector<int32_t> kept;
  };
  for (const Case& c :
       {Case{0.1f, {1}}, Case{0.49f, {1}}, Case{0.51f, {1, 3}}, Case{0.79f, {1, 3}},
        Case{0.81f, {0, 1, 3}}, Case{0.94f, {0, 1, 3}}, Case{0.96f, {0, 1, 2, 3}}}) {
    SCOPED_TRACE(c.top_p);
    SamplingParams p = Seeded(12);
    p.top_p = c.top_p;
    Sampler s(p);
    const SampledToken t = s.Sample(logits, kNone, kNone);
    EXPECT_THAT(Kept(s), ElementsAreArray(c.kept));
    EXPECT_TRUE(std::find(c.kept.begin(), c.kept.end(), t.token_id) != c.kept.end());
  }
}

TEST(SamplerTopPTest, LargeUniformVocabKeepsExactlyHalf) {
  // 1000 equal logits, top_p 0.5: the mass above id 500 is exactly 0.5, so ids 0..499 stay.
  // Exercises the growing partial sort (64, 512, 1000).
  SamplingParams p = Seeded(13);
  p.top_p = 0.5f;
  Sampler s(p);
  s.Sample(std::vector<float>(1000, 1.0f), kNone, kNone);
  std::vector<int32_t> expected(500);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_THAT(Kept(s), ElementsAreArray(expected));
}

TEST(SamplerTopPTest, MatchesFullSortReferenceOnRandomLogits) {
  for (uint64_t seed : {21u, 22u, 23u}) {
    for (float top_p : {0.3f, 0.9f, 0.99f}) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " top_p " << top_p);
      const std::vector<float> logits = RandomLogits(seed, 5000, 6.0);
      // Reference: full sort by (logit desc, id asc), keep while the mass above is < top_p.
      std::vector<int32_t> order(logits.size());
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
      const double m = logits[order[0]];
      double total = 0.0;
      for (float x : logits) total += std::exp(double{x} - m);
      std::vector<int32_t> expected;
      double above = 0.0;
      for (int32_t id : order) {
        if (above >= top_p * total) break;
        expected.push_back(id);
        above += std::exp(double{logits[id]} - m);
      }
      std::sort(expected.begin(), expected.end());

      SamplingParams p = Seeded(seed);
      p.top_p = top_p;
      Sampler s(p);
      s.Sample(logits, kNone, kNone);
      EXPECT_THAT(Kept(s), ElementsAreArray(expected));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Min-p

TEST(SamplerMinPTest, DropsTokensBelowMinPTimesTopProbability) {
  // Probabilities {0.3, 0.05, 0.5, 0.15}; the top is 0.5.
  const std::vector<float> logits = LogOf({0.3, 0.05, 0.5, 0.15});
  struct Case {
    float min_p;
    std::vector<int32_t> kept;
  };
  for (const Case& c : {Case{0.09f, {0, 1, 2, 3}},  // threshold 0.045
                        Case{0.2f, {0, 2, 3}},      // 0.1
                        Case{0.5f, {0, 2}},         // 0.25
                        Case{0.7f, {2}},            // 0.35
                        Case{1.0f, {2}}}) {         // the top only
    SCOPED_TRACE(c.min_p);
    SamplingParams p = Seeded(14);
    p.min_p = c.min_p;
    Sampler s(p);
    s.Sample(logits, kNone, kNone);
    EXPECT_THAT(Kept(s), ElementsAreArray(c.kept));
  }
}

TEST(SamplerMinPTest, IsRelativeToTemperatureScaledDistribution) {
  // logits {0, -1}; T = 1: ratio e^-1 = 0.368 >= 0.3 keeps both. T = 0.5: ratio e^-2 = 0.135
  // < 0.3 drops id 1.
  for (float temperature : {1.0f, 0.5f}) {
    SamplingParams p = Seeded(15);
    p.min_p = 0.3f;
    p.temperature = temperature;
    Sampler s(p);
    s.Sample(std::vector<float>{0.0f, -1.0f}, kNone, kNone);
    if (temperature == 1.0f) {
      EXPECT_THAT(Kept(s), ElementsAre(0, 1));
    } else {
      EXPECT_THAT(Kept(s), ElementsAre(0));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Order of operations

TEST(SamplerOrderTest, TopKRunsBeforeTopP) {
  // Probabilities {0.4, 0.3, 0.2, 0.1}, top_k 2, top_p 0.55. Top-k first renormalizes the
  // survivors to {4/7, 3/7}; 4/7 >= 0.55 already, so only id 0 stays. (Top-p first would keep
  // ids 0 and 1: the mass above id 1 would be 0.4 < 0.55.)
  SamplingParams p = Seeded(16);
  p.top_k = 2;
  p.top_p = 0.55f;
  Sampler s(p);
  const SampledToken t = s.Sample(LogOf({0.4, 0.3, 0.2, 0.1}), kNone, kNone);
  EXPECT_THAT(Kept(s), ElementsAre(0));
  EXPECT_EQ(t.token_id, 0);
}

TEST(SamplerOrderTest, PenaltiesRunBeforeTemperature) {
  // logits {3, 1}, repetition 3 on id 0 -> {1, 1}; then T = 0.5 -> {2, 2}.
  SamplingParams p = Seeded(17);
  p.repetition_penalty = 3.0f;
  p.temperature = 0.5f;
  Sampler s(p);
  const std::vector<int32_t> prompt = {0};
  s.Sample(std::vector<float>{3.0f, 1.0f}, prompt, kNone);
  EXPECT_THAT(Processed(s), ElementsAre(2.0f, 2.0f));
}

// ---------------------------------------------------------------------------------------------
// Penalties (greedy, so processed_logits() shows the logits after penalties only)

TEST(SamplerPenaltyTest, RepetitionDividesPositiveAndMultipliesNegativeOncePerToken) {
  SamplingParams p = Greedy();
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 1.0f, 3.0f};
  const std::vector<int32_t> prompt = {0, 0, 0};
  const std::vector<int32_t> generated = {1, 1, 7, -3};  // 7 and -3 lie outside the vocab
  const SampledToken t = s.Sample(logits, prompt, generated);
  EXPECT_THAT(Processed(s), ElementsAre(1.0f, -2.0f, 0.5f, 1.0f, 3.0f));
  EXPECT_EQ(t.token_id, 4);
  EXPECT_THAT(logits, ElementsAre(2.0f, -1.0f, 0.5f, 1.0f, 3.0f));  // input untouched
}

TEST(SamplerPenaltyTest, RepetitionBelowOneEncourages) {
  SamplingParams p = Greedy();
  p.repetition_penalty = 0.5f;
  Sampler s(p);
  const std::vector<int32_t> generated = {0, 1};
  const SampledToken t = s.Sample(std::vector<float>{2.0f, -1.0f, 3.0f}, kNone, generated);
  EXPECT_THAT(Processed(s), ElementsAre(4.0f, -0.5f, 3.0f));
  EXPECT_EQ(t.token_id, 0);
}

TEST(SamplerPenaltyTest, PresenceSubtractsOncePerGeneratedTokenNotPrompt) {
  SamplingParams p = Greedy();
  p.presence_penalty = 0.5f;
  Sampler s(p);
  const std::vector<int32_t> prompt = {0, 3};
  const std::vector<int32_t> generated = {2, 2, 3};
  s.Sample(std::vector<float>{2.0f, -1.0f, 0.5f, 1.0f}, prompt, generated);
  EXPECT_THAT(Processed(s), ElementsAre(2.0f, -1.0f, 0.0f, 0.5f));
}

TEST(SamplerPenaltyTest, FrequencySubtractsPerOccurrence) {
  SamplingParams p = Greedy();
  p.frequency_penalty = 0.25f;
  Sampler s(p);
  const std::vector<int32_t> prompt = {0};
  const std::vector<int32_t> generated = {2, 2, 3, 2};
  s.Sample(std::vector<float>{2.0f, -1.0f, 0.5f, 1.0f}, prompt, generated);
  EXPECT_THAT(Processed(s), ElementsAre(2.0f, -1.0f, -0.25f, 0.75f));
}

TEST(SamplerPenaltyTest, NegativeFrequencyAndPresenceEncourage) {
  SamplingParams p = Greedy();
  p.frequency_penalty = -1.0f;
  p.presence_penalty = -0.5f;
  Sampler s(p);
  const std::vector<int32_t> generated = {1, 1};
  const SampledToken t = s.Sample(std::vector<float>{2.0f, 0.0f}, kNone, generated);
  EXPECT_THAT(Processed(s), ElementsAre(2.0f, 2.5f));
  EXPECT_EQ(t.token_id, 1);
}

TEST(SamplerPenaltyTest, RepetitionThenFrequencyThenPresenceAsVllm) {
  // rp 2, fp 0.25, pp 0.5; prompt {0}, generated {2, 2, 1}:
  //   id 0: 2 / 2 = 1
  //   id 1: -1 * 2 = -2, - 0.25 * 1 - 0.5 = -2.75
  //   id 2: 0.5 / 2 = 0.25, - 0.25 * 2 - 0.5 = -0.75   (frequency first would give -1)
  //   id 3: untouched 1
  SamplingParams p = Greedy();
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.25f;
  p.presence_penalty = 0.5f;
  Sampler s(p);
  const std::vector<int32_t> prompt = {0};
  const std::vector<int32_t> generated = {2, 2, 1};
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 1.0f};
  const SampledToken t = s.Sample(logits, prompt, generated);
  EXPECT_THAT(Processed(s), ElementsAre(1.0f, -2.75f, -0.75f, 1.0f));
  EXPECT_EQ(t.token_id, 0);  // tie between ids 0 and 3 goes to the lower id
  // Scratch state is reset between calls: the same inputs give the same result.
  s.Sample(logits, prompt, generated);
  EXPECT_THAT(Processed(s), ElementsAre(1.0f, -2.75f, -0.75f, 1.0f));
}

// ---------------------------------------------------------------------------------------------
// Seeds and determinism

std::vector<int32_t> Draw(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.Sample(logits, kNone, out).token_id);
  return out;
}

TEST(SamplerSeedTest, SameSeedSameThousandTokensDifferentSeedsDiffer) {
  const std::vector<float> logits = RandomLogits(/*seed=*/31, 64, 2.0);
  SamplingParams p = Seeded(42);
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.top_k = 40;
  p.frequency_penalty = 0.1f;
  const std::vector<int32_t> a = Draw(p, logits, 1000);
  const std::vector<int32_t> b = Draw(p, logits, 1000);
  EXPECT_EQ(a, b);
  p.seed = 43;
  const std::vector<int32_t> c = Draw(p, logits, 1000);
  EXPECT_NE(a, c);
}

TEST(SamplerSeedTest, EachDrawUsesTopBitsOfOneMt19937_64Output) {
  // Two equal logits: the token is 1 exactly when the uniform draw is >= 0.5, i.e. when the top
  // bit of the engine's next output is set. Pins the draw-to-double conversion on every machine.
  constexpr uint64_t kSeed = 20240607;
  Sampler s(Seeded(kSeed));
  std::mt19937_64 reference(kSeed);
  for (int i = 0; i < 1000; ++i) {
    const int32_t expected = static_cast<int32_t>(reference() >> 63);
    ASSERT_EQ(s.Sample(std::vector<float>{0.0f, 0.0f}, kNone, kNone).token_id, expected) << i;
  }
}

TEST(SamplerSeedTest, GreedyConsumesNoRandomness) {
  // A greedy sampler with a seed and one without return the same tokens.
  SamplingParams seeded = Greedy();
  seeded.seed = 1;
  const std::vector<float> logits = RandomLogits(/*seed=*/32, 100, 3.0);
  EXPECT_EQ(Draw(seeded, logits, 50), Draw(Greedy(), logits, 50));
}

TEST(SamplerSeedTest, UnseededSamplersDiffer) {
  // 1000 fair coin flips each: equal sequences have probability 2^-1000.
  const std::vector<float> logits = {0.0f, 0.0f};
  EXPECT_NE(Draw(SamplingParams(), logits, 1000), Draw(SamplingParams(), logits, 1000));
}

// ---------------------------------------------------------------------------------------------
// Sampled frequencies

// Draws `n` tokens with `p` and checks every frequency is within `tolerance` of `expected`.
void ExpectFrequencies(const SamplingParams& p, const std::vector<float>& logits,
                       const std::vector<double>& expected, int n, double tolerance) {
  Sampler s(p);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[s.Sample(logits, kNone, kNone).token_id];
  for (size_t i = 0; i < logits.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_NEAR(static_cast<double>(counts[i]) / n, expected[i], tolerance);
  }
}

TEST(SamplerFrequencyTest, HundredThousandDrawsMatchSoftmax) {
  // Seeded, so the outcome is fixed; 0.006 is about 4 standard deviations at p = 0.5 with 100k
  // draws (sqrt(0.25 / 1e5) = 0.0016).
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, 3.0f, -1.0f, 0.0f};
  std::vector<double> softmax;
  double sum = 0.0;
  for (float x : logits) sum += std::exp(double{x});
  for (float x : logits) softmax.push_back(std::exp(double{x}) / sum);
  SamplingParams p = Seeded(/*seed=*/12345);
  ExpectFrequencies(p, logits, softmax, 100000, 0.006);
}

TEST(SamplerFrequencyTest, TruncatedAndTemperedDrawsMatchRenormalizedSoftmax) {
  // Probabilities {0.1, 0.4, 0.2, 0.3}, T = 0.5 squares them: {0.01, 0.16, 0.04, 0.09} / 0.30;
  // top_k 3 drops id 0: {0.16, 0.04, 0.09} / 0.29.
  SamplingParams p = Seeded(/*seed=*/777);
  p.temperature = 0.5f;
  p.top_k = 3;
  ExpectFrequencies(p, LogOf({0.1, 0.4, 0.2, 0.3}), {0.0, 0.16 / 0.29, 0.04 / 0.29, 0.09 / 0.29},
                    100000, 0.006);
}

TEST(SamplerTest, MaskedAndUnderflowingTokensAreNeverSampled) {
  // -inf is a masked token; -200 is e^-200 below the top, which underflows float to weight 0.
  const std::vector<float> logits = {-kInf, 0.0f, -200.0f, 0.0f, -kInf};
  for (float top_p : {1.0f, 0.99f}) {
    SCOPED_TRACE(top_p);
    SamplingParams p = Seeded(18);
    p.top_p = top_p;
    Sampler s(p);
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < 2000; ++i) ++counts[s.Sample(logits, kNone, kNone).token_id];
    EXPECT_EQ(counts[0], 0);
    EXPECT_EQ(counts[2], 0);
    EXPECT_EQ(counts[4], 0);
    EXPECT_EQ(counts[1] + counts[3], 2000);
    EXPECT_GT(counts[1], 900);
    EXPECT_GT(counts[3], 900);
  }
}

TEST(SamplerDeathTest, NanLogitIsABug) {
  Sampler s(Seeded(1));
  EXPECT_DEATH(s.Sample(std::vector<float>{0.0f, NAN}, kNone, kNone), "DF11_CHECK failed");
  EXPECT_DEATH(s.Sample(std::vector<float>{-kInf, -kInf}, kNone, kNone), "DF11_CHECK failed");
}

// ---------------------------------------------------------------------------------------------
// StopMatcher

TEST(StopMatcherTest, StopStringSplitOverTwoDeltas) {
  StopMatcher m({"STOP"});
  StopMatcher::Update u = m.Feed("Hello ST");
  EXPECT_EQ(u.text, "Hello ");
  EXPECT_FALSE(u.stopped);
  u = m.Feed("OP and more");
  EXPECT_EQ(u.text, "");
  EXPECT_TRUE(u.stopped);
  EXPECT_EQ(u.stop_index, 0);
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcherTest, StopStringSplitOverThreeDeltas) {
  StopMatcher m({"<end>"});
  EXPECT_EQ(m.Feed("abc<e").text, "abc");
  StopMatcher::Update u = m.Feed("n");
  EXPECT_EQ(u.text, "");
  EXPECT_FALSE(u.stopped);
  u = m.Feed("d>tail");
  EXPECT_EQ(u.text, "");
  EXPECT_TRUE(u.stopped);
  EXPECT_EQ(m.Feed("more").text, "");  // nothing after a stop
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, HeldPrefixIsReleasedWhenItStopsMatching) {
  StopMatcher m({"abc"});
  EXPECT_EQ(m.Feed("ab").text, "");
  StopMatcher::Update u = m.Feed("d");
  EXPECT_EQ(u.text, "abd");
  EXPECT_FALSE(u.stopped);
}

TEST(StopMatcherTest, OverlappingPrefixesOfTwoStopStrings) {
  StopMatcher m({"abc", "abd"});
  EXPECT_EQ(m.Feed("xab").text, "x");
  const StopMatcher::Update u = m.Feed("d!");
  EXPECT_EQ(u.text, "");
  EXPECT_TRUE(u.stopped);
  EXPECT_EQ(u.stop_index, 1);
}

TEST(StopMatcherTest, SelfOverlappingPrefix) {
  StopMatcher m({"aab"});
  EXPECT_EQ(m.Feed("xa").text, "x");
  EXPECT_EQ(m.Feed("a").text, "");            // "aa" could start "aab"
  EXPECT_EQ(m.Feed("a").text, "a");           // "aaa": only the last "aa" can
  const StopMatcher::Update u = m.Feed("b");  // "aab": the held "aa" was the stop's start
  EXPECT_EQ(u.text, "");
  EXPECT_TRUE(u.stopped);
}

TEST(StopMatcherTest, StopAtTheVeryStart) {
  StopMatcher m({"Hello"});
  const StopMatcher::Update u = m.Feed("Hello world");
  EXPECT_EQ(u.text, "");
  EXPECT_TRUE(u.stopped);
  EXPECT_EQ(u.stop_index, 0);
}

TEST(StopMatcherTest, FlushReleasesHeldTextWhenGenerationEnds) {
  StopMatcher m({"abc"});
  EXPECT_EQ(m.Feed("xyzab").text, "xyz");
  EXPECT_EQ(m.Flush(), "ab");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, NoHoldBackWithoutPartialMatch) {
  StopMatcher m({"abc"});
  EXPECT_EQ(m.Feed("xyz").text, "xyz");
  EXPECT_EQ(m.Feed("b").text, "b");  // "b" is not a prefix of "abc"
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, NoStopStringsEmitsEverything) {
  StopMatcher m({});
  EXPECT_EQ(m.Feed("any text").text, "any text");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcherTest, EarliestEndingStopStringWinsRegardlessOfSplitting) {
  const std::vector<std::string> stops = {"world", "lo w"};
  StopMatcher whole(stops);
  const StopMatcher::Update u = whole.Feed("Hello world");
  EXPECT_EQ(u.text, "Hel");
  EXPECT_EQ(u.stop_index, 1);

  // Fed byte by byte the same stop string completes first.
  StopMatcher bytes(stops);
  std::string text;
  int index = -1;
  for (char c : std::string("Hello world")) {
    const StopMatcher::Update b = bytes.Feed(std::string_view(&c, 1));
    text += b.text;
    if (b.stopped) {
      index = b.stop_index;
      break;
    }
  }
  EXPECT_EQ(text, "Hel");
  EXPECT_EQ(index, 1);
}

TEST(StopMatcherTest, ContainedStopStringEndsFirst) {
  // "c" completes before "abcd" would, whatever the split.
  StopMatcher m({"abcd", "c"});
  const StopMatcher::Update u = m.Feed("xabcd");
  EXPECT_EQ(u.text, "xab");
  EXPECT_EQ(u.stop_index, 1);
}

TEST(StopMatcherTest, Utf8MultiByteText) {
  StopMatcher m({"。"});
  EXPECT_EQ(m.Feed("日本").text, "日本");
  EXPECT_EQ(m.Feed("語").text, "語");
  const StopMatcher::Update u = m.Feed("。次");
  EXPECT_EQ(u.text, "");
  EXPECT_TRUE(u.stopped);
}

TEST(StopMatcherTest, Utf8PrefixHeldAsWholeCharacters) {
  StopMatcher m({"日本"});
  EXPECT_EQ(m.Feed("こんにちは日").text, "こんにちは");  // "日" (3 bytes) held
  EXPECT_EQ(m.Feed("曜").text, "日曜");
}

TEST(StopMatcherTest, Utf8CharacterSplitAcrossDeltas) {
  // A detokenizer delta may end inside a character; "\xC3" is a prefix of "é!" and is held.
  StopMatcher m({"\xC3\xA9!"});
  EXPECT_EQ(m.Feed("caf\xC3").text, "caf");
  EXPECT_EQ(m.Feed("\xA9 ok").text, "\xC3\xA9 ok");
  EXPECT_EQ(m.Feed("caf\xC3\xA9").text, "caf");
  const StopMatcher::Update u = m.Feed("!");
  EXPECT_EQ(u.text, "");
  EXPECT_TRUE(u.stopped);
}

// ---------------------------------------------------------------------------------------------
// FinishTracker

TEST(FinishTrackerTest, StopTokenIdFinishesWithStopAndIsNotEmitted) {
  SamplingParams p;
  p.stop_token_ids = {7};
  FinishTracker f(p, /*eos_token_ids=*/{});
  FinishTracker::Step s = f.OnToken(5, "a");
  EXPECT_EQ(s.text, "a");
  EXPECT_EQ(s.reason, FinishReason::kNone);
  s = f.OnToken(7, "<x>");
  EXPECT_EQ(s.text, "");
  EXPECT_EQ(s.reason, FinishReason::kStop);
  EXPECT_EQ(s.stop_token_id, 7);
  EXPECT_EQ(s.stop_string_index, -1);
  EXPECT_EQ(f.reason(), FinishReason::kStop);
  EXPECT_EQ(f.num_generated(), 2);
}

TEST(FinishTrackerTest, EosFinishesUnlessIgnored) {
  const std::vector<int32_t> eos = {2, 3};
  SamplingParams p;
  FinishTracker f(p, eos);
  FinishTracker::Step s = f.OnToken(3, "</s>");
  EXPECT_EQ(s.reason, FinishReason::kStop);
  EXPECT_EQ(s.stop_token_id, 3);
  EXPECT_EQ(s.text, "");

  p.ignore_eos = true;
  FinishTracker g(p, eos);
  s = g.OnToken(2, "</s>");
  EXPECT_EQ(s.reason, FinishReason::kNone);
  EXPECT_EQ(s.text, "</s>");
}

TEST(FinishTrackerTest, StopTokenFlushesHeldText) {
  SamplingParams p;
  p.stop = {"abc"};
  p.stop_token_ids = {9};
  FinishTracker f(p, {});
  EXPECT_EQ(f.OnToken(1, "ab").text, "");
  const FinishTracker::Step s = f.OnToken(9, "zzz");
  EXPECT_EQ(s.text, "ab");
  EXPECT_EQ(s.reason, FinishReason::kStop);
}

TEST(FinishTrackerTest, MaxTokensFinishesWithLengthAndFlushes) {
  SamplingParams p;
  p.max_tokens = 3;
  p.stop = {"xyz"};
  FinishTracker f(p, {});
  EXPECT_EQ(f.OnToken(10, "a").reason, FinishReason::kNone);
  EXPECT_EQ(f.OnToken(11, "b").reason, FinishReason::kNone);
  const FinishTracker::Step s = f.OnToken(12, "x");  // "x" could start "xyz" but time is up
  EXPECT_EQ(s.text, "x");
  EXPECT_EQ(s.reason, FinishReason::kLength);
  EXPECT_EQ(FinishReasonName(s.reason), "length");
}

TEST(FinishTrackerTest, StopStringOnLastAllowedTokenIsStop) {
  SamplingParams p;
  p.max_tokens = 2;
  p.stop = {"END"};
  FinishTracker f(p, {});
  EXPECT_EQ(f.OnToken(1, "foo E").text, "foo ");
  const FinishTracker::Step s = f.OnToken(2, "ND");
  EXPECT_EQ(s.reason, FinishReason::kStop);
  EXPECT_EQ(s.stop_string_index, 0);
  EXPECT_FALSE(s.stop_token_id.has_value());
  EXPECT_EQ(s.text, "");
  EXPECT_EQ(FinishReasonName(s.reason), "stop");
  EXPECT_EQ(FinishReasonName(FinishReason::kNone), "");
}

TEST(FinishTrackerDeathTest, TokenAfterFinishIsABug) {
  SamplingParams p;
  p.max_tokens = 1;
  FinishTracker f(p, {});
  EXPECT_EQ(f.OnToken(1, "a").reason, FinishReason::kLength);
  EXPECT_DEATH(f.OnToken(2, "b"), "DF11_CHECK failed");
}

// End to end: greedy decoding of a fixed "model" stops at the stop string.
TEST(SamplerEndToEndTest, GreedyLoopStopsAtStopString) {
  // Token i's text is kPieces[i]; the "model" always prefers the token after the last one.
  const std::vector<std::string> pieces = {"The", " ans", "wer", " is", " 4", "2.", "\n\n", "x"};
  SamplingParams p = Greedy();
  p.stop = {"42"};
  p.max_tokens = 100;
  Sampler sampler(p);
  FinishTracker finish(p, {});
  std::vector<int32_t> generated;
  std::string text;
  FinishReason reason = FinishReason::kNone;
  while (reason == FinishReason::kNone) {
    std::vector<float> logits(pieces.size(), 0.0f);
    logits[generated.size() % pieces.size()] = 5.0f;
    const SampledToken t = sampler.Sample(logits, kNone, generated);
    generated.push_back(t.token_id);
    FinishTracker::Step step = finish.OnToken(t.token_id, pieces[t.token_id]);
    text += step.text;
    reason = step.reason;
  }
  EXPECT_EQ(text, "The answer is ");
  EXPECT_EQ(reason, FinishReason::kStop);
  EXPECT_EQ(generated.size(), 6u);
}

}  // namespace
}  // namespace df11::runtime
