// The generation loop (daemon/runtime/engine/generator.h) on the tiny random Qwen3 model of
// tests/data/engine, with a byte-level tokenizer whose 256 tokens are the single bytes: greedy
// generation gives transformers' greedy tokens, the streamed text is the decode of the tokens, and
// the finish rules, seeds, cancellation and limits behave as documented.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/runtime/backends/cpu/cpu_backend.h"
#include "daemon/runtime/engine/generator.h"
#include "daemon/runtime/engine/model.h"
#include "daemon/runtime/text/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_data_dir.h"

namespace df11::runtime {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

fs::path EngineData() { return ::df11::testing::TestDataDir("engine"); }

// GPT-2's byte-to-character map: printable bytes stand for themselves, the others for U+0100 on.
std::string ByteLevelChar(int byte) {
  const bool printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || byte >= 174;
  int code = byte;
  if (!printable) {
    int n = 0;
    for (int b = 0; b < byte; ++b) {
      if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)) ++n;
    }
    code = 256 + n;
  }
  std::string s;
  if (code < 0x80) {
    s += static_cast<char>(code);
  } else {
    s += static_cast<char>(0xC0 | (code >> 6));
    s += static_cast<char>(0x80 | (code & 0x3F));
  }
  return s;
}

// Token i < 256 is byte i; 280 ids in all to match the model (ids 256.. name no token).
Tokenizer ByteTokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevelChar(b)] = b;
  const nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
        {"use_regex", false}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                   {"use_regex", false}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
        {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  return Tokenizer::FromJson(j.dump()).value();
}

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = Model::Load((EngineData() / "qwen3").string()).value();
    std::ifstream in(EngineData() / "goldens.json");
    const nlohmann::json goldens = nlohmann::json::parse(in);
    golden_prompt_ = goldens["models"]["qwen3"][0]["prompt"].get<std::vector<int32_t>>();
    golden_greedy_ = goldens["models"]["qwen3"][0]["greedy"].get<std::vector<int32_t>>();
  }

  absl::StatusOr<GenerationResult> Run(const GenerationRequest& request,
                                       std::vector<GeneratedToken>* streamed = nullptr) {
    return Generate(backend_, *model_, tokenizer_, request, [&](const GeneratedToken& t) {
      if (streamed != nullptr) streamed->push_back(t);
      return true;
    });
  }

  std::unique_ptr<Model> model_;
  Tokenizer tokenizer_ = ByteTokenizer();
  CpuBackend backend_{{.threads = 2}};
  std::vector<int32_t> golden_prompt_, golden_greedy_;
};

TEST_F(GeneratorTest, GreedyGivesTransformersTokensAndStreamsTheirText) {
  GenerationRequest request{.prompt = golden_prompt_};
  request.sampling.temperature = 0;
  request.sampling.max_tokens = 32;
  request.sampling.ignore_eos = true;
  std::vector<GeneratedToken> streamed;
  DF11_ASSERT_OK_AND_ASSIGN(GenerationResult result, Run(request, &streamed));
  EXPECT_EQ(result.token_ids, golden_greedy_);
  EXPECT_EQ(result.finish_reason, FinishReason::kLength);
  EXPECT_EQ(result.prompt_tokens, static_cast<int64_t>(golden_prompt_.size()));
  ASSERT_EQ(streamed.size(), 32u);
  std::string joined;
  for (size_t i = 0; i < streamed.size(); ++i) {
    EXPECT_EQ(streamed[i].id, golden_greedy_[i]);
    EXPECT_LE(streamed[i].logprob, 0.0f);
    joined += streamed[i].text;
  }
  EXPECT_EQ(joined, result.text);
  EXPECT_EQ(result.text, tokenizer_.Decode(result.token_ids, /*skip_special_tokens=*/true));
  EXPECT_EQ(result.logprobs.size(), 32u);
  EXPECT_GT(result.decode_tokens_per_second(), 0);
}

TEST_F(GeneratorTest, AStopTokenIdEndsWithStopAndEmitsNoTextForIt) {
  // The golden greedy run never produces the EOS id (2); make it a stop token id instead: the
  // first greedy token ends the generation with "stop" and emits no text for it.
  GenerationRequest request{.prompt = golden_prompt_};
  request.sampling.temperature = 0;
  request.sampling.max_tokens = 32;
  request.sampling.stop_token_ids = {golden_greedy_[2]};
  DF11_ASSERT_OK_AND_ASSIGN(GenerationResult result, Run(request));
  EXPECT_EQ(result.finish_reason, FinishReason::kStop);
  EXPECT_EQ(result.token_ids,
            std::vector<int32_t>(golden_greedy_.begin(), golden_greedy_.begin() + 3));
  const std::vector<int32_t> first_two(golden_greedy_.begin(), golden_greedy_.begin() + 2);
  EXPECT_EQ(result.text, tokenizer_.Decode(first_two, true));
}

TEST_F(GeneratorTest, SameSeedSameTokensAndOtherSeedsDiffer) {
  GenerationRequest request{.prompt = golden_prompt_};
  request.sampling.temperature = 1.5f;
  request.sampling.max_tokens = 24;
  request.sampling.ignore_eos = true;
  request.sampling.seed = 7;
  DF11_ASSERT_OK_AND_ASSIGN(GenerationResult a, Run(request));
  DF11_ASSERT_OK_AND_ASSIGN(GenerationResult b, Run(request));
  EXPECT_EQ(a.token_ids, b.token_ids);
  request.sampling.seed = 8;
  DF11_ASSERT_OK_AND_ASSIGN(GenerationResult c, Run(request));
  EXPECT_NE(a.token_ids, c.token_ids);
}

TEST_F(GeneratorTest, CancelStopsAfterTheCallbackSaysSo) {
  GenerationRequest request{.prompt = golden_prompt_};
  request.sampling.temperature = 0;
  request.sampling.max_tokens = 32;
  int calls = 0;
  EXPECT_THAT(Generate(backend_, *model_, tokenizer_, request,
                       [&](const GeneratedToken&) { return ++calls < 3; }),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(calls, 3);
}

TEST_F(GeneratorTest, RefusesEmptyPromptsLongRequestsAndBadParams) {
  GenerationRequest request;
  EXPECT_THAT(Run(request), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no tokens")));
  request.prompt = golden_prompt_;
  request.sampling.max_tokens = 256;  // the model's context is 256 positions
  EXPECT_THAT(Run(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("plus max_tokens 256 is 257 positions; the model's context "
                                 "holds 256")));
  request.sampling.max_tokens = 4;
  request.sampling.top_p = 0;
  EXPECT_THAT(Run(request), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top_p")));
  request.sampling.top_p = 1;
  request.prompt = {280};
  EXPECT_THAT(Run(request), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("outside the vocabulary of 280")));
}

TEST(DefaultSamplingParamsTest, FollowsGenerationConfig) {
  ModelConfig c;
  SamplingParams greedy = DefaultSamplingParams(c);
  EXPECT_EQ(greedy.temperature, 0.0f);
  c.do_sample = true;
  c.temperature = 0.6;
  c.top_p = 0.95;
  c.top_k = 20;
  c.repetition_penalty = 1.1;
  const SamplingParams sampled = DefaultSamplingParams(c);
  EXPECT_FLOAT_EQ(sampled.temperature, 0.6f);
  EXPECT_FLOAT_EQ(sampled.top_p, 0.95f);
  EXPECT_EQ(sampled.top_k, 20);
  EXPECT_FLOAT_EQ(sampled.repetition_penalty, 1.1f);
}

}  // namespace
}  // namespace df11::runtime
