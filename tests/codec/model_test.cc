// Model-level compression in the official layout: round trips through df11's own compressor and
// decompressor, units kept in BF16, refused directories.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "codec/base/read_file.h"
#include "codec/model.h"
#include "codec/safetensors.h"
#include "codec/synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/checkpoint_compare.h"
#include "tests/testing/status_matchers.h"
#include "tools/df11/synth.h"

namespace df11::codec {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::ExpectSameCheckpoint;
using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

fs::path TempDir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("model_test_" + name);
  fs::remove_all(p);
  return p;
}

tool::SynthSpec SmallSpec(const std::string& arch) {
  tool::SynthSpec spec;
  spec.arch = arch;
  spec.layers = 3;
  spec.hidden = 128;
  spec.intermediate = 384;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.vocab = 1000;
  return spec;
}

struct RoundTripCase {
  std::string arch;
  bool tied;
  bool shards;
  size_t units;  // layers, plus lm_head and embed_tokens when untied
};

class RoundTripTest : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(RoundTripTest, CompressThenDecompressGivesTheSourceTensors) {
  const RoundTripCase& c = GetParam();
  tool::SynthSpec spec = SmallSpec(c.arch);
  spec.tied = c.tied;
  spec.shards = c.shards;
  const fs::path src = TempDir(c.arch + "_src"), df11 = TempDir(c.arch + "_df11"),
                 out = TempDir(c.arch + "_out");
  DF11_ASSERT_OK(tool::WriteSyntheticModel(src.string(), spec));
  DF11_ASSERT_OK_AND_ASSIGN(CompressReport report, CompressModel(src.string(), df11.string(), {}));
  EXPECT_EQ(report.units, static_cast<int>(c.units));
  EXPECT_TRUE(report.kept_bf16.empty());
  EXPECT_THAT(report.copied_files, ::testing::Contains("generation_config.json"));
  EXPECT_TRUE(fs::exists(df11 / "model_layers_0.safetensors"));
  EXPECT_EQ(fs::exists(df11 / "lm_head.safetensors"), !c.tied);

  DF11_ASSERT_OK_AND_ASSIGN(Df11Model model, Df11Model::Open(df11.string()));
  EXPECT_EQ(model.version(), "0.5.0");
  ASSERT_EQ(model.units().size(), c.units);
  DF11_ASSERT_OK_AND_ASSIGN(DecompressReport restored, DecompressModel(model, out.string(), {}));
  EXPECT_EQ(restored.units, static_cast<int>(c.units));
  ExpectSameCheckpoint(src, out);
  std::ifstream config(out / "config.json");
  EXPECT_FALSE(nlohmann::json::parse(config).contains("dfloat11_config"));
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, RoundTripTest,
    ::testing::Values(RoundTripCase{"qwen3", false, true, 5}, RoundTripCase{"qwen3", true, false, 3},
                      RoundTripCase{"qwen2", false, false, 5}, RoundTripCase{"llama", true, true, 3}),
    [](const auto& info) {
      return info.param.arch + (info.param.tied ? "_tied" : "") + (info.param.shards ? "_sharded" : "");
    });

TEST(CompressModelTest, UnitWithInfStaysBf16AndIsExcludedFromItsPattern) {
  const fs::path src = TempDir("inf_src"), df11 = TempDir("inf_df11"), out = TempDir("inf_out");
  tool::SynthSpec spec = SmallSpec("qwen3");
  DF11_ASSERT_OK(tool::WriteSyntheticModel(src.string(), spec));
  {
    // Put an Inf into layer 1's q_proj (rewrite the file with one value changed).
    DF11_ASSERT_OK_AND_ASSIGN(SafetensorsFile file,
                              SafetensorsFile::Open((src / "model.safetensors").string()));
    std::vector<std::vector<std::byte>> copies;
    SafetensorsWriter writer;
    for (const TensorView& t : file.tensors()) {
      copies.emplace_back(t.data.begin(), t.data.end());
      if (t.name == "model.layers.1.self_attn.q_proj.weight") {
        const uint16_t inf = 0x7F80;
        std::memcpy(copies.back().data() + 2 * 17, &inf, 2);
      }
      DF11_ASSERT_OK(writer.Add(t.name, t.dtype, t.shape, copies.back()));
    }
    DF11_ASSERT_OK(writer.WriteFile((src / "model.safetensors.new").string()));
  }
  fs::rename(src / "model.safetensors.new", src / "model.safetensors");

  DF11_ASSERT_OK_AND_ASSIGN(CompressReport report, CompressModel(src.string(), df11.string(), {}));
  ASSERT_EQ(report.kept_bf16.size(), 1u);
  EXPECT_THAT(report.kept_bf16[0], HasSubstr("model.layers.1"));
  EXPECT_THAT(report.kept_bf16[0], HasSubstr("exponent 255"));
  EXPECT_FALSE(fs::exists(df11 / "model_layers_1.safetensors"));
  DF11_ASSERT_OK_AND_ASSIGN(Df11Model model, Df11Model::Open(df11.string()));
  EXPECT_EQ(model.units().size(), 4u);
  EXPECT_THAT(model.pattern_dict().back().first, HasSubstr("model\\.layers\\.1"));
  DF11_ASSERT_OK(DecompressModel(model, out.string(), {}).status());
  ExpectSameCheckpoint(src, out);
}

TEST(CompressModelTest, UserPatternDictWorksForAnyArchitecture) {
  const fs::path src = TempDir("user_src"), df11 = TempDir("user_df11"), out = TempDir("user_out");
  DF11_ASSERT_OK(tool::WriteSyntheticModel(src.string(), SmallSpec("llama")));
  // Make the architecture unknown: shapes must then come from the unit files' own metadata.
  std::ifstream in(src / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["architectures"] = {"MysteryForCausalLM"};
  std::ofstream(src / "config.json") << config.dump();
  EXPECT_THAT(CompressModel(src.string(), df11.string(), {}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Qwen3ForCausalLM")));

  CompressOptions options;
  DF11_ASSERT_OK_AND_ASSIGN(
      options.pattern_dict,
      ParsePatternDict(R"({"model\\.layers\\.[0-9]+\\.mlp": ["gate_proj", "up_proj", "down_proj"]})"));
  DF11_ASSERT_OK_AND_ASSIGN(CompressReport report, CompressModel(src.string(), df11.string(), options));
  EXPECT_EQ(report.units, 3);
  EXPECT_TRUE(fs::exists(df11 / "model_layers_2_mlp.safetensors"));
  DF11_ASSERT_OK_AND_ASSIGN(Df11Model model, Df11Model::Open(df11.string()));
  DF11_ASSERT_OK(DecompressModel(model, out.string(), {}).status());
  ExpectSameCheckpoint(src, out);
}

TEST(CompressModelTest, RefusesBadInputs) {
  const fs::path src = TempDir("bad_src"), dst = TempDir("bad_dst");
  EXPECT_THAT(CompressModel(src.string(), dst.string(), {}), StatusIs(absl::StatusCode::kNotFound));
  DF11_ASSERT_OK(tool::WriteSyntheticModel(src.string(), SmallSpec("qwen3")));
  EXPECT_THAT(ParsePatternDict(R"({"model\\.layers\\.(\\d+": []})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("regular expression")));
  EXPECT_THAT(ParsePatternDict(R"(["not", "an", "object"])"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  CompressOptions overlapping;
  DF11_ASSERT_OK_AND_ASSIGN(overlapping.pattern_dict,
                            ParsePatternDict(R"({"lm_head": [], "lm_.*": []})"));
  EXPECT_THAT(CompressModel(src.string(), dst.string(), overlapping),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("two patterns")));
  CompressOptions norm_unit;  // a 1-D weight cannot be a unit
  DF11_ASSERT_OK_AND_ASSIGN(norm_unit.pattern_dict, ParsePatternDict(R"({"model\\.norm": []})"));
  EXPECT_THAT(CompressModel(src.string(), dst.string(), norm_unit),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2-D BF16")));
  // A destination that already holds weights.
  DF11_ASSERT_OK(CompressModel(src.string(), dst.string(), {}).status());
  EXPECT_THAT(CompressModel(src.string(), dst.string(), {}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already holds")));
}

// A model's description files are read within a cap (any user can name a hub model, and parsing
// costs several times a file's size), and must be JSON objects.
TEST(ModelDirectoryTest, CapsAndChecksTheDescriptionFiles) {
  const fs::path dir = TempDir("description");
  DF11_ASSERT_OK(tool::WriteSyntheticModel(dir.string(), SmallSpec("qwen3")));
  DF11_ASSERT_OK_AND_ASSIGN(ModelDirectory read, ModelDirectory::Read(dir.string()));
  EXPECT_EQ(read.path(), dir.string());
  EXPECT_EQ(read.config()["architectures"][0], "Qwen3ForCausalLM");
  EXPECT_FALSE(read.is_df11());
  EXPECT_TRUE(read.generation_config().is_object());

  std::ofstream(dir / "generation_config.json") << "[]";
  EXPECT_THAT(ModelDirectory::Read(dir.string()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("generation_config.json is not a JSON object")));
  fs::remove(dir / "generation_config.json");
  DF11_EXPECT_OK(ModelDirectory::Read(dir.string()).status());

  // Padded past the cap with spaces: still valid JSON, refused before it is parsed.
  std::string config = read.config().dump();
  config.append(base::kMaxModelConfigBytes, ' ');
  std::ofstream(dir / "config.json") << config;
  EXPECT_THAT(ModelDirectory::Read(dir.string()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("config.json is ", config.size(),
                                              " bytes, more than the ",
                                              base::kMaxModelConfigBytes))));
  fs::remove(dir / "config.json");
  fs::create_directory(dir / "config.json");
  EXPECT_THAT(ModelDirectory::Read(dir.string()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
  fs::remove(dir / "config.json");
  EXPECT_THAT(ModelDirectory::Read(dir.string()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("has no config.json")));
  EXPECT_THAT(ModelDirectory::Read((dir / "nothing").string()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("has no config.json")));
}

TEST(Df11ModelTest, RefusesLegacyAndNonDf11Directories) {
  const fs::path legacy = TempDir("legacy");
  fs::create_directories(legacy);
  std::ofstream(legacy / "layer_0.pkl") << "not unpickled";
  std::ofstream(legacy / "config.json") << R"({"architectures": ["LlamaForCausalLM"]})";
  EXPECT_THAT(Df11Model::Open(legacy.string()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("legacy DFloat11 v0.1")));
  const fs::path plain = TempDir("plain");
  DF11_ASSERT_OK(tool::WriteSyntheticModel(plain.string(), SmallSpec("qwen3")));
  EXPECT_THAT(Df11Model::Open(plain.string()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no dfloat11_config")));
  EXPECT_THAT(Df11Model::Open(TempDir("missing").string()), StatusIs(absl::StatusCode::kNotFound));
}

TEST(Df11ModelTest, RefusesUnsupportedLayoutsAndCorruptUnits) {
  const fs::path src = TempDir("layout_src"), df11 = TempDir("layout_df11");
  DF11_ASSERT_OK(tool::WriteSyntheticModel(src.string(), SmallSpec("qwen3")));
  DF11_ASSERT_OK(CompressModel(src.string(), df11.string(), {}).status());
  std::ifstream in(df11 / "config.json");
  const nlohmann::json good = nlohmann::json::parse(in);

  nlohmann::json threads = good;
  threads["dfloat11_config"]["threads_per_block"] = {256};
  std::ofstream(df11 / "config.json") << threads.dump();
  EXPECT_THAT(Df11Model::Open(df11.string()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("[512]")));

  nlohmann::json no_match = good;
  no_match["dfloat11_config"]["pattern_dict"] = {{"lm_head", nlohmann::json::array()}};
  std::ofstream(df11 / "config.json") << no_match.dump();
  EXPECT_THAT(Df11Model::Open(df11.string()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("matches no pattern_dict key")));
  std::ofstream(df11 / "config.json") << good.dump();

  // Drop one of the six tensors of a unit.
  const fs::path unit_file = df11 / "model_layers_0.safetensors";
  {
    DF11_ASSERT_OK_AND_ASSIGN(SafetensorsFile file, SafetensorsFile::Open(unit_file.string()));
    std::vector<std::vector<std::byte>> copies;
    SafetensorsWriter writer;
    for (const TensorView& t : file.tensors()) {
      if (t.name == "model.layers.0.gaps") continue;
      copies.emplace_back(t.data.begin(), t.data.end());
      DF11_ASSERT_OK(writer.Add(t.name, t.dtype, t.shape, copies.back()));
    }
    DF11_ASSERT_OK(writer.WriteFile(unit_file.string() + ".new"));
  }
  fs::rename(unit_file.string() + ".new", unit_file);
  EXPECT_THAT(Df11Model::Open(df11.string()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("model.layers.0.gaps")));
}

}  // namespace
}  // namespace df11::codec

namespace df11::codec {
namespace {

using TensorCopies = std::vector<std::pair<TensorView, std::vector<std::byte>>>;

// Rewrites the safetensors file `path` through `edit` (which may change, drop or add tensors),
// with `metadata` instead of the file's own when given.
void RewriteFile(const fs::path& path, const std::function<void(TensorCopies&)>& edit,
                 std::optional<std::map<std::string, std::string>> new_metadata = std::nullopt) {
  TensorCopies tensors;
  std::map<std::string, std::string> metadata;
  {
    DF11_ASSERT_OK_AND_ASSIGN(SafetensorsFile file, SafetensorsFile::Open(path.string()));
    metadata = file.metadata();
    for (const TensorView& t : file.tensors()) {
      tensors.emplace_back(t, std::vector<std::byte>(t.data.begin(), t.data.end()));
    }
  }
  edit(tensors);
  SafetensorsWriter writer;
  for (auto& [t, bytes] : tensors) DF11_ASSERT_OK(writer.Add(t.name, t.dtype, t.shape, bytes));
  writer.SetMetadata(new_metadata.value_or(metadata));
  DF11_ASSERT_OK(writer.WriteFile(path.string()));
}

fs::path CompressedSmallModel(const std::string& name) {
  const fs::path src = TempDir(name + "_src"), df11 = TempDir(name + "_df11");
  EXPECT_THAT(tool::WriteSyntheticModel(src.string(), SmallSpec("qwen3")), ::df11::testing::IsOk());
  EXPECT_THAT(CompressModel(src.string(), df11.string(), {}).status(), ::df11::testing::IsOk());
  return df11;
}

// Regression: std::regex recursed per character of a tensor name and overflowed the stack.
TEST(Df11ModelTest, AHugeTensorNameIsDataLossNotACrash) {
  const fs::path df11 = CompressedSmallModel("longname");
  SafetensorsWriter writer;
  const std::byte one{1};
  DF11_ASSERT_OK(writer.Add("model.layers." + std::string(300000, '0') + ".encoded_exponent",
                            DType::kU8, {1}, std::span(&one, 1)));
  DF11_ASSERT_OK(writer.WriteFile((df11 / "zz.safetensors").string()));
  EXPECT_THAT(Df11Model::Open(df11.string()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("byte limit")));
}

// Regression: a file holding two units gave its other tensors to both units' shards.
TEST(Df11ModelTest, AFileWithTwoUnitsDecompressesToAValidCheckpoint) {
  const fs::path src = TempDir("merged_src"), df11 = TempDir("merged_df11"),
                 out = TempDir("merged_out");
  DF11_ASSERT_OK(tool::WriteSyntheticModel(src.string(), SmallSpec("qwen3")));
  DF11_ASSERT_OK(CompressModel(src.string(), df11.string(), {}).status());
  // Move every tensor of model_layers_1 into model_layers_0's file.
  TensorCopies moved;
  {
    DF11_ASSERT_OK_AND_ASSIGN(SafetensorsFile file,
                              SafetensorsFile::Open((df11 / "model_layers_1.safetensors").string()));
    for (const TensorView& t : file.tensors()) {
      moved.emplace_back(t, std::vector<std::byte>(t.data.begin(), t.data.end()));
    }
  }
  fs::remove(df11 / "model_layers_1.safetensors");
  RewriteFile(df11 / "model_layers_0.safetensors", [&](auto& tensors) {
    tensors.insert(tensors.end(), moved.begin(), moved.end());
  });
  DF11_ASSERT_OK_AND_ASSIGN(Df11Model model, Df11Model::Open(df11.string()));
  DF11_ASSERT_OK(DecompressModel(model, out.string(), {}).status());
  ExpectSameCheckpoint(src, out);
}

TEST(Df11ModelTest, OverflowingShapeMetadataIsDataLoss) {
  const fs::path df11 = CompressedSmallModel("overflow");
  // 4611686018427387905 * 4 wraps to 4 in 64 bits.
  RewriteFile(df11 / "lm_head.safetensors", [](TensorCopies&) {},
              std::map<std::string, std::string>{
                  {"df11.weights", R"([["lm_head.weight", [4611686018427387905, 4]]])"}});
  EXPECT_THAT(Df11Model::Open(df11.string()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("does not fit its shape")));
}

// A decompression that fails half-way removes the shards it wrote.
TEST(DecompressModelTest, FailureLeavesNoShardsBehind) {
  const fs::path df11 = CompressedSmallModel("partial"), out = TempDir("partial_out");
  // Corrupt the stream of the last unit (by path order), after other shards are written.
  RewriteFile(df11 / "model_layers_2.safetensors", [](auto& tensors) {
    for (auto& [t, bytes] : tensors) {
      if (t.name == "model.layers.2.encoded_exponent") {
        for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) bytes[i] ^= std::byte{0x5A};
      }
    }
  });
  DF11_ASSERT_OK_AND_ASSIGN(Df11Model model, Df11Model::Open(df11.string()));
  EXPECT_THAT(DecompressModel(model, out.string(), {}), StatusIs(absl::StatusCode::kDataLoss));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(out)) left.push_back(e.path().filename().string());
  EXPECT_THAT(left, ::testing::IsEmpty());
}

TEST(CompressModelTest, ConfigWithoutTieKeyIsUntiedAndWeightFilesAreNotCopied) {
  const fs::path src = TempDir("untied_src"), df11 = TempDir("untied_df11");
  DF11_ASSERT_OK(tool::WriteSyntheticModel(src.string(), SmallSpec("llama")));
  std::ifstream in(src / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config.erase("tie_word_embeddings");  // transformers' default: untied
  std::ofstream(src / "config.json") << config.dump();
  std::ofstream(src / "pytorch_model.bin") << "old weights";
  std::ofstream(src / "tokenizer.json") << "{}";
  DF11_ASSERT_OK_AND_ASSIGN(CompressReport report, CompressModel(src.string(), df11.string(), {}));
  EXPECT_EQ(report.units, 5);  // 3 layers + lm_head + embed_tokens
  EXPECT_THAT(report.copied_files, ::testing::UnorderedElementsAre("generation_config.json",
                                                                   "tokenizer.json"));
  EXPECT_FALSE(fs::exists(df11 / "pytorch_model.bin"));
}

TEST(CompressModelTest, ConfigThatIsNotAnObjectIsInvalidArgument) {
  const fs::path src = TempDir("array_src"), df11 = TempDir("array_df11");
  DF11_ASSERT_OK(tool::WriteSyntheticModel(src.string(), SmallSpec("qwen3")));
  std::ofstream(src / "config.json") << "[1]";
  CompressOptions options;
  DF11_ASSERT_OK_AND_ASSIGN(options.pattern_dict, ParsePatternDict(R"({"lm_head": []})"));
  EXPECT_THAT(CompressModel(src.string(), df11.string(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a JSON object")));
  EXPECT_FALSE(fs::exists(df11 / "lm_head.safetensors"));
}

}  // namespace
}  // namespace df11::codec
