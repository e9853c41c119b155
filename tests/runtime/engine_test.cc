// The CPU engine against Hugging Face transformers: tiny random Llama-3, Qwen2, Qwen3, Mistral,
// Gemma 2, Gemma 3 (text, and a multimodal checkpoint's text tower) and Phi-3 models
// (tests/data/engine, made by tools/make_engine_goldens.py), compressed here with df11's own
// compressor, must give transformers' next-token logits (relative L2 <= 1e-3, fp32 compute on
// both sides) and its 32 greedy tokens, from the DF11 directory as from the BF16 one.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "codec/architecture.h"
#include "codec/interleaved.h"
#include "codec/model.h"
#include "daemon/runtime/backends/cpu/cpu_backend.h"
#include "daemon/runtime/engine/estimate.h"
#include "daemon/runtime/engine/model.h"
#include "daemon/runtime/engine/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/logits.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_data_dir.h"

namespace df11::runtime {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::Argmax;
using ::df11::testing::RelativeL2;
using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

fs::path EngineData() { return ::df11::testing::TestDataDir("engine"); }

const nlohmann::json& Goldens() {
  static const nlohmann::json* goldens = [] {
    std::ifstream in(EngineData() / "goldens.json");
    return new nlohmann::json(nlohmann::json::parse(in));
  }();
  return *goldens;
}

// The DF11 directory of model `name`, compressed once per test program.
fs::path Df11Dir(const std::string& name) {
  const fs::path dst = fs::path(::testing::TempDir()) / ("engine_" + name + "_df11");
  if (!fs::exists(dst / "config.json")) {
    fs::remove_all(dst);
    EXPECT_TRUE(codec::CompressModel((EngineData() / name).string(), dst.string(), {}).ok());
  }
  return dst;
}

struct Generation {
  std::vector<float> logits;    // after the prompt
  std::vector<int32_t> greedy;  // 32 tokens
};

Generation Generate(CpuBackend& backend, const Model& model, const std::vector<int32_t>& prompt) {
  Generation run;
  const int64_t V = model.config().vocab_size;
  std::unique_ptr<KvCache> owned = backend.NewCache(model.config(), 128).value();
  KvCache& cache = *owned;
  run.logits.resize(V);
  SequenceStep step{&cache, prompt};
  EXPECT_THAT(backend.Forward(model, std::span(&step, 1), run.logits), ::df11::testing::IsOk());
  std::vector<float> logits = run.logits;
  for (int i = 0; i < 32; ++i) {
    const int32_t next = Argmax(logits);
    run.greedy.push_back(next);
    const int32_t token[] = {next};
    SequenceStep s{&cache, token};
    EXPECT_THAT(backend.Forward(model, std::span(&s, 1), logits), ::df11::testing::IsOk());
  }
  return run;
}

class EngineGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineGoldenTest, MatchesTransformersFromDf11AndBf16) {
  const std::string name = GetParam();
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> bf16,
                            Model::Load((EngineData() / name).string()));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> df11, Model::Load(Df11Dir(name).string()));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> df11_layout,
                            Model::Load(Df11Dir(name).string(), {.interleave = false}));
  EXPECT_FALSE(bf16->is_df11());
  EXPECT_TRUE(df11->is_df11());
  EXPECT_GT(df11->layer_scratch_elements(), 0u);
  EXPECT_EQ(bf16->layer_scratch_elements(), 0u);
  EXPECT_LT(df11->resident_bytes(), bf16->resident_bytes());
  CpuBackend backend({.threads = 2});
  CpuBackend sequential({.threads = 2, .overlap_decode = false});
  for (const auto& c : Goldens()["models"][name]) {
    const std::vector<int32_t> prompt = c["prompt"].get<std::vector<int32_t>>();
    SCOPED_TRACE(::testing::Message() << "prompt of " << prompt.size() << " tokens");
    const std::vector<double> expected = c["next_token_logits"].get<std::vector<double>>();
    const std::vector<int32_t> greedy = c["greedy"].get<std::vector<int32_t>>();
    const Generation from_df11 = Generate(backend, *df11, prompt);
    const Generation from_bf16 = Generate(backend, *bf16, prompt);
    const Generation without_overlap = Generate(sequential, *df11, prompt);
    const Generation from_df11_layout = Generate(backend, *df11_layout, prompt);
    EXPECT_LE(RelativeL2(from_df11.logits, expected), 1e-3);
    EXPECT_EQ(from_df11.greedy, greedy);
    // The same weight bits through the same arithmetic: identical logits.
    EXPECT_EQ(from_df11.logits, from_bf16.logits);
    EXPECT_EQ(from_bf16.greedy, greedy);
    // Re-encoded (where the CPU has AVX-512) or kept in DF11's layout: identical logits.
    EXPECT_EQ(from_df11_layout.logits, from_df11.logits);
    EXPECT_EQ(from_df11_layout.greedy, from_df11.greedy);
    // Decoding the next block in the background changes nothing.
    EXPECT_EQ(without_overlap.logits, from_df11.logits);
    EXPECT_EQ(without_overlap.greedy, from_df11.greedy);
  }
}

TEST_P(EngineGoldenTest, BatchedSequencesMatchSingleSequences) {
  const std::string name = GetParam();
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> model, Model::Load(Df11Dir(name).string()));
  const int64_t V = model->config().vocab_size;
  CpuBackend backend({.threads = 2});
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& c : Goldens()["models"][name])
    prompts.push_back(c["prompt"].get<std::vector<int32_t>>());
  std::vector<std::unique_ptr<KvCache>> caches;
  for (size_t i = 0; i < prompts.size(); ++i) {
    DF11_ASSERT_OK_AND_ASSIGN(caches.emplace_back(), backend.NewCache(model->config(), 64));
  }
  std::vector<SequenceStep> steps;
  for (size_t i = 0; i < prompts.size(); ++i) steps.push_back({caches[i].get(), prompts[i]});
  std::vector<float> logits(prompts.size() * V);
  DF11_ASSERT_OK(backend.Forward(*model, steps, logits));
  size_t i = 0;
  for (const auto& c : Goldens()["models"][name]) {
    const std::vector<double> expected = c["next_token_logits"].get<std::vector<double>>();
    std::vector<float> mine(logits.begin() + i * V, logits.begin() + (i + 1) * V);
    EXPECT_LE(RelativeL2(mine, expected), 1e-3) << "sequence " << i;
    ++i;
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, EngineGoldenTest,
                         ::testing::Values("llama3", "qwen2", "qwen3", "mistral", "gemma3",
                                           "gemma2", "gemma3_mm", "phi3", "qwen3_h128",
                                           "gemma2_h256"));

TEST(CpuBackendTest, RejectsBadSteps) {
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> model,
                            Model::Load((EngineData() / "qwen3").string()));
  CpuBackend backend({.threads = 1});
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<KvCache> owned, backend.NewCache(model->config(), 4));
  KvCache& cache = *owned;
  std::vector<float> logits(model->config().vocab_size);
  const int32_t out_of_range[] = {static_cast<int32_t>(model->config().vocab_size)};
  SequenceStep bad{&cache, out_of_range};
  EXPECT_THAT(backend.Forward(*model, std::span(&bad, 1), logits),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside the vocabulary")));
  const int32_t five[] = {1, 2, 3, 4, 5};
  SequenceStep too_long{&cache, five};
  EXPECT_THAT(backend.Forward(*model, std::span(&too_long, 1), logits),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds 4 positions")));
  EXPECT_EQ(cache.length(), 0);
}

// Zeroes bytes [first, last) of tensor `name`'s data in the safetensors file `path`.
void ZeroTensorBytes(const fs::path& path, const std::string& name, size_t first, size_t last) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t header_size = 0;
  f.read(reinterpret_cast<char*>(&header_size), 8);
  std::string header(header_size, '\0');
  f.read(header.data(), static_cast<std::streamsize>(header_size));
  const nlohmann::json h = nlohmann::json::parse(header);
  const size_t begin = h[name]["data_offsets"][0].get<size_t>();
  ASSERT_LE(begin + last, h[name]["data_offsets"][1].get<size_t>());
  f.seekp(static_cast<std::streamoff>(8 + header_size + begin + first));
  const std::string zeros(last - first, '\0');
  f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  ASSERT_TRUE(f.good());
}

// A copy of the qwen3 fixture whose layer-1 block has its codes overwritten.
fs::path CorruptQwen3() {
  const fs::path corrupt = fs::path(::testing::TempDir()) / "engine_qwen3_corrupt";
  fs::remove_all(corrupt);
  fs::copy(Df11Dir("qwen3"), corrupt);
  ZeroTensorBytes(corrupt / "model_layers_1.safetensors", "model.layers.1.encoded_exponent", 1000,
                  3000);
  return corrupt;
}

// Re-encoding at load decodes every unit, so a corrupt block is refused there, naming the unit.
TEST(CpuBackendTest, CorruptBlockIsDataLossAtLoadWhenReencoded) {
  if (!codec::InterleavedUnit::Supported()) GTEST_SKIP() << "no AVX-512 VBMI2: no re-encoding";
  const fs::path corrupt = CorruptQwen3();
  if (HasFatalFailure()) return;
  EXPECT_THAT(Model::Load(corrupt.string()).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("model.layers.1")));
}

// Kept in DF11's layout, a block whose codes were overwritten loads (only the bitstream is wrong)
// but every forward pass through it is kDataLoss naming the unit, for prefill (decoded into
// scratch) and for decode steps (decoded inside the matrix products); the same backend keeps
// serving a sound model.
TEST(CpuBackendTest, CorruptBlockIsDataLossAndOtherModelsKeepServing) {
  const fs::path corrupt = CorruptQwen3();
  if (HasFatalFailure()) return;
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> bad,
                            Model::Load(corrupt.string(), {.interleave = false}));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> good, Model::Load(Df11Dir("qwen3").string()));
  CpuBackend backend({.threads = 2});
  const int64_t V = bad->config().vocab_size;
  std::vector<float> logits(V);
  for (const size_t tokens : {size_t{1}, size_t{12}}) {
    SCOPED_TRACE(::testing::Message() << tokens << " tokens");
    DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<KvCache> cache, backend.NewCache(bad->config(), 16));
    const std::vector<int32_t> prompt(tokens, 5);
    SequenceStep step{cache.get(), prompt};
    EXPECT_THAT(backend.Forward(*bad, std::span(&step, 1), logits),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr("model.layers.1")));
    EXPECT_EQ(cache->length(), 0);
  }
  const auto& golden = Goldens()["models"]["qwen3"][0];
  const Generation run = Generate(backend, *good, golden["prompt"].get<std::vector<int32_t>>());
  EXPECT_EQ(run.greedy, golden["greedy"].get<std::vector<int32_t>>());
}

// The pattern dicts df11 compress writes by default are the official releases' (their
// config.json's dfloat11_config): Phi-4-reasoning-plus-DF11, gemma-3-{4b,12b,27b}-it-DF11 and
// Mistral-Nemo-Instruct-2407-DF11 (the Llama dict).
// A load reads the model's description once: the estimate and the model come from the files as
// codec::ModelDirectory read them, even after config.json is gone from the folder.
TEST(ModelDirectoryTest, EstimateAndLoadUseTheFilesAsRead) {
  for (const bool df11 : {false, true}) {
    SCOPED_TRACE(df11 ? "df11" : "bf16");
    const fs::path copy = fs::path(::testing::TempDir()) / (df11 ? "read_once_df11" : "read_once");
    fs::remove_all(copy);
    fs::copy(df11 ? Df11Dir("qwen3") : EngineData() / "qwen3", copy);
    DF11_ASSERT_OK_AND_ASSIGN(const codec::ModelDirectory dir,
                              codec::ModelDirectory::Read(copy.string()));
    fs::remove(copy / "config.json");
    fs::remove(copy / "generation_config.json");
    DF11_ASSERT_OK_AND_ASSIGN(ModelEstimate e, EstimateModel(dir));
    EXPECT_EQ(e.df11, df11);
    EXPECT_EQ(e.config.architecture_name, "Qwen3ForCausalLM");
    DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> model,
                              Model::Load(dir, Model::LoadOptions{.interleave = false}));
    EXPECT_EQ(model->config().num_layers, e.config.num_layers);
    EXPECT_EQ(model->unit_bytes() + model->plain_bytes(), e.resident_bytes());
    EXPECT_THAT(Model::Load(copy.string()),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr("has no config.json")));
  }
}

TEST(ArchitectureTest, DefaultPatternDictsAreTheOfficialReleases) {
  auto dict_of = [](const std::string& name) {
    const codec::ModelDirectory dir =
        codec::ModelDirectory::Read((EngineData() / name).string()).value();
    return codec::DefaultPatternDict(codec::ParseArchitecture(dir.config()).value());
  };
  const std::vector<std::string> layer = {
      "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
      "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
  EXPECT_EQ(dict_of("phi3"), (codec::PatternDict{{"lm_head", {}},
                                                 {"model.embed_tokens", {}},
                                                 {R"(model.layers.\d+)",
                                                  {"self_attn.o_proj", "self_attn.qkv_proj",
                                                   "mlp.gate_up_proj", "mlp.down_proj"}}}));
  EXPECT_EQ(dict_of("gemma3_mm"),
            (codec::PatternDict{{R"(language_model.model.layers.\d+)", layer}}));
  EXPECT_EQ(dict_of("mistral"), (codec::PatternDict{{"lm_head", {}},
                                                    {R"(model\.embed_tokens)", {}},
                                                    {R"(model\.layers\.\d+)", layer}}));
  // Tied embeddings (Gemma) stay BF16.
  EXPECT_EQ(dict_of("gemma3"), (codec::PatternDict{{R"(model\.layers\.\d+)", layer}}));
}

TEST(ModelTest, FusedProjectionsAreServedAsTheirPieces) {
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> bf16,
                            Model::Load((EngineData() / "phi3").string()));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> df11, Model::Load(Df11Dir("phi3").string()));
  const ModelConfig& c = bf16->config();
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  // One unit per layer holding o, qkv, gate_up and down, as the official release.
  ASSERT_EQ(df11->units().size(), static_cast<size_t>(c.num_layers) + 2);
  // The pieces are row ranges of the stored tensors: plain ones point into them, compressed ones
  // start where their rows start.
  DF11_ASSERT_OK_AND_ASSIGN(WeightLocation qkv,
                            bf16->Locate("model.layers.1.self_attn.qkv_proj.weight"));
  DF11_ASSERT_OK_AND_ASSIGN(WeightLocation v,
                            bf16->Locate("model.layers.1.self_attn.v_proj.weight"));
  EXPECT_EQ(v.stored_name, "model.layers.1.self_attn.qkv_proj.weight");
  EXPECT_EQ(v.stored_byte_offset, static_cast<uint64_t>((q + kv) * c.hidden_size * 2));
  EXPECT_EQ(v.plain.data(), qkv.plain.data() + v.stored_byte_offset);
  EXPECT_EQ(v.shape[0], kv);
  DF11_ASSERT_OK_AND_ASSIGN(WeightLocation up, df11->Locate("model.layers.0.mlp.up_proj.weight"));
  DF11_ASSERT_OK_AND_ASSIGN(WeightLocation gate_up,
                            df11->Locate("model.layers.0.mlp.gate_up_proj.weight"));
  EXPECT_EQ(up.unit, gate_up.unit);
  EXPECT_EQ(up.offset, gate_up.offset + static_cast<size_t>(c.intermediate_size * c.hidden_size));
  // Only stored tensors are listed for copying.
  for (const auto& [name, bytes] : bf16->plain_tensors()) {
    EXPECT_THAT(name, ::testing::Not(HasSubstr("q_proj"))) << name;
    EXPECT_THAT(name, ::testing::Not(HasSubstr("gate_proj"))) << name;
  }
}

TEST(ModelTest, MultimodalCheckpointServesItsTextTower) {
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> bf16,
                            Model::Load((EngineData() / "gemma3_mm").string()));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> df11,
                            Model::Load(Df11Dir("gemma3_mm").string()));
  for (const Model* m : {bf16.get(), df11.get()}) {
    EXPECT_EQ(m->config().tensor_prefix, "language_model.model.");
    EXPECT_TRUE(m->config().text_tower_only);
    EXPECT_GT(m->skipped_tensors(), 0u);
    EXPECT_GT(m->skipped_bytes(), 0u);
    for (const auto& [name, bytes] : m->plain_tensors()) {
      EXPECT_TRUE(name.starts_with("language_model.")) << name;
    }
  }
  EXPECT_EQ(df11->units().size(), static_cast<size_t>(df11->config().num_layers));
  // The estimate counts what the load keeps.
  DF11_ASSERT_OK_AND_ASSIGN(ModelEstimate e, EstimateModel((EngineData() / "gemma3_mm").string()));
  EXPECT_EQ(e.plain_bytes, bf16->plain_bytes());
}

TEST(ModelConfigTest, ReleasedConfigsOfTheNewArchitectures) {
  // gemma-3-4b-it's config.json: the text tower's fields mostly left at their defaults.
  DF11_ASSERT_OK_AND_ASSIGN(ModelConfig gemma, ParseModelConfig(R"({
      "architectures": ["Gemma3ForConditionalGeneration"], "eos_token_id": [1, 106],
      "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                      "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                      "sliding_window": 1024},
      "vision_config": {"hidden_size": 1152}})",
                                                                ""));
  EXPECT_EQ(gemma.architecture, Architecture::kGemma3);
  EXPECT_EQ(gemma.head_dim, 256);
  EXPECT_EQ(gemma.num_heads, 8);
  EXPECT_EQ(gemma.num_kv_heads, 4);
  EXPECT_EQ(gemma.vocab_size, 262208);
  EXPECT_TRUE(gemma.tie_word_embeddings);
  EXPECT_EQ(gemma.activation, Activation::kGeluTanh);
  EXPECT_FLOAT_EQ(gemma.attention_scale, 1.0f / 16);
  EXPECT_EQ(gemma.rope.type, RopeConfig::Type::kLinear);
  EXPECT_EQ(gemma.rope.factor, 8.0);
  EXPECT_EQ(gemma.rope.theta, 1e6);
  EXPECT_EQ(gemma.sliding_rope.type, RopeConfig::Type::kDefault);
  EXPECT_EQ(gemma.sliding_rope.theta, 1e4);
  ASSERT_EQ(gemma.sliding_window.size(), 34u);
  for (int64_t i = 0; i < 34; ++i) {
    EXPECT_EQ(gemma.sliding_window[i], (i + 1) % 6 == 0 ? 0 : 1024) << "layer " << i;
  }
  EXPECT_EQ(gemma.eos_token_ids, (std::vector<int32_t>{1, 106}));
  // Mistral-7B-v0.1 leaves the window out (4096 by default); v0.3 sets it null.
  const std::string mistral = R"({"architectures": ["MistralForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10)";
  DF11_ASSERT_OK_AND_ASSIGN(ModelConfig v1, ParseModelConfig(mistral + "}", ""));
  DF11_ASSERT_OK_AND_ASSIGN(ModelConfig v3,
                            ParseModelConfig(mistral + R"(, "sliding_window": null})", ""));
  EXPECT_EQ(v1.sliding_window, (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(v3.sliding_window, (std::vector<int64_t>{0, 0}));
  // Phi-3's early LongRoPE spelling, with the original context at the top level.
  DF11_ASSERT_OK_AND_ASSIGN(ModelConfig phi, ParseModelConfig(R"({
      "architectures": ["Phi3ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10,
      "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
      "rope_scaling": {"type": "su", "short_factor": [1, 1, 1, 1, 1, 1, 1, 1],
                       "long_factor": [2, 2, 2, 2, 2, 2, 2, 2]}})",
                                                              ""));
  EXPECT_EQ(phi.rope.type, RopeConfig::Type::kLongRope);
  EXPECT_EQ(phi.rope.factor, 32.0);
  EXPECT_DOUBLE_EQ(phi.rope.attention_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)));
  EXPECT_TRUE(phi.fused_projections);
  EXPECT_EQ(phi.rms_norm_eps, 1e-5);
}

TEST(ModelConfigTest, UnsupportedVariantsNameTheField) {
  const std::string base = R"({"hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10, )";
  auto parse = [&](const std::string& architecture, const std::string& rest) {
    return ParseModelConfig(
        absl::StrCat(base, R"("architectures": [")", architecture, R"("], )", rest, "}"), "");
  };
  EXPECT_THAT(parse("LlamaForCausalLM", R"("rope_scaling": {"rope_type": "yarn"})"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("rope type `yarn`")));
  EXPECT_THAT(parse("LlamaForCausalLM", R"("hidden_act": "relu")"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("hidden_act")));
  EXPECT_THAT(
      parse("Gemma3ForCausalLM", R"("use_bidirectional_attention": true)"),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("use_bidirectional_attention")));
  EXPECT_THAT(
      parse("Gemma3ForCausalLM", R"("layer_types": ["chunked_attention", "full_attention"])"),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("chunked_attention")));
  EXPECT_THAT(parse("Qwen2ForCausalLM", R"("use_sliding_window": true)"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("use_sliding_window")));
  EXPECT_THAT(
      parse("LlamaForCausalLM", R"("final_logit_softcapping": 30.0)"),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("final_logit_softcapping")));
  EXPECT_THAT(
      parse("Phi3ForCausalLM", R"("rope_scaling": {"type": "longrope", "short_factor": [1]})"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("short_factor")));
  EXPECT_THAT(parse("Phi3ForCausalLM", R"("partial_rotary_factor": 0.2)"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("partial_rotary_factor")));
  EXPECT_THAT(parse("Gemma3ForCausalLM", R"("sliding_window_pattern": 1e300)"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sliding_window_pattern")));
  EXPECT_THAT(
      parse("Phi3ForCausalLM", R"("original_max_position_embeddings": -5.5)"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("original_max_position_embeddings")));
  EXPECT_THAT(parse("Gemma3ForConditionalGeneration", R"("vision_config": {})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("text_config")));
}

TEST(ModelConfigTest, BothRopeSpellingsAndUnsupportedArchitectures) {
  const std::string legacy = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10,
      "rope_theta": 500000.0, "rope_scaling": {"type": "llama3", "factor": 8.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
      "eos_token_id": [2, 3]})";
  const std::string v5 = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10,
      "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
      "eos_token_id": 2})";
  DF11_ASSERT_OK_AND_ASSIGN(ModelConfig a, ParseModelConfig(legacy, R"({"eos_token_id": [3, 4]})"));
  DF11_ASSERT_OK_AND_ASSIGN(ModelConfig b, ParseModelConfig(v5, ""));
  EXPECT_EQ(a.rope.type, RopeConfig::Type::kLlama3);
  EXPECT_EQ(b.rope.type, RopeConfig::Type::kLlama3);
  EXPECT_EQ(a.rope.theta, 500000.0);
  EXPECT_EQ(b.rope.theta, 500000.0);
  EXPECT_EQ(a.head_dim, 16);
  EXPECT_EQ(a.eos_token_ids, (std::vector<int32_t>{2, 3, 4}));
  EXPECT_THAT(ParseModelConfig(R"({"architectures": ["GPT2LMHeadModel"]})", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Qwen3ForCausalLM")));
  EXPECT_THAT(ParseModelConfig(R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64})", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("intermediate_size")));
}

}  // namespace
}  // namespace df11::runtime
