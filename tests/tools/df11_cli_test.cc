// The df11 command-line tool, run as a user runs it: exit codes, messages and outputs.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr
};

Result Df11(const std::string& args) {
  const char* tool = std::getenv("DF11_TOOL");
  const std::string command = std::string(tool != nullptr ? tool : "df11") + " " + args + " 2>&1";
  Result r{-1, ""};
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

fs::path TempDir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("df11_cli_" + name);
  fs::remove_all(p);
  return p;
}

TEST(Df11CliTest, UsageErrorsExitWithTwo) {
  EXPECT_EQ(Df11("").exit_code, 2);
  Result unknown = Df11("frobnicate");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.output, HasSubstr("unknown command 'frobnicate'"));
  Result missing = Df11("compress only-one-dir");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.output, HasSubstr("expected SRC_DIR DST_DIR"));
  EXPECT_EQ(Df11("bench --mb nope").exit_code, 2);
  EXPECT_EQ(Df11("verify a --bogus").exit_code, 2);
}

TEST(Df11CliTest, EveryCommandHasHelp) {
  for (const char* command : {"compress", "decompress", "verify", "inspect", "bench", "synth",
                              "demo", "devices", "gpu-bench", "generate", "engine-bench"}) {
    Result r = Df11(std::string(command) + " --help");
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_THAT(r.output, HasSubstr("Usage: df11 " + std::string(command))) << command;
  }
  Result top = Df11("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.output, HasSubstr("compress SRC_DIR DST_DIR"));
  Result version = Df11("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.output, MatchesRegex("df11 [0-9]+\\.[0-9]+\\.[0-9]+\n"));
}

TEST(Df11CliTest, CompressVerifyInspectDecompress) {
  const fs::path src = TempDir("src"), df11 = TempDir("df11"), out = TempDir("out");
  ASSERT_EQ(Df11("synth " + src.string() +
                 " --layers 2 --hidden 128 --intermediate 256 --vocab 512 --shards")
                .exit_code,
            0);
  Result compress = Df11("compress " + src.string() + " " + df11.string() + " --threads 2");
  ASSERT_EQ(compress.exit_code, 0) << compress.output;
  EXPECT_THAT(compress.output, HasSubstr("4 units"));

  Result verify = Df11("verify " + df11.string() + " --against " + src.string());
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_THAT(verify.output, HasSubstr("identical"));
  EXPECT_THAT(verify.output, HasSubstr("OK"));

  Result inspect = Df11("inspect " + df11.string());
  EXPECT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_THAT(inspect.output, HasSubstr("model.layers.1"));
  EXPECT_THAT(inspect.output, HasSubstr("bits/w"));
  Result inspect_file = Df11("inspect " + (df11 / "lm_head.safetensors").string());
  EXPECT_EQ(inspect_file.exit_code, 0) << inspect_file.output;
  EXPECT_THAT(inspect_file.output, HasSubstr("lm_head"));

  Result decompress = Df11("decompress " + df11.string() + " " + out.string());
  EXPECT_EQ(decompress.exit_code, 0) << decompress.output;
  EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
  // The destination now holds weights: a second run refuses to mix files.
  Result again = Df11("decompress " + df11.string() + " " + out.string());
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.output, HasSubstr("already holds safetensors files"));
}

TEST(Df11CliTest, VerifyReportsADifferentSourceWithExitThree) {
  const fs::path src = TempDir("vsrc"), other = TempDir("vother"), df11 = TempDir("vdf11");
  ASSERT_EQ(Df11("synth " + src.string() + " --layers 1 --hidden 64 --intermediate 128 --vocab 256")
                .exit_code,
            0);
  ASSERT_EQ(Df11("synth " + other.string() +
                 " --layers 1 --hidden 64 --intermediate 128 --vocab 256 --seed 7")
                .exit_code,
            0);
  ASSERT_EQ(Df11("compress " + src.string() + " " + df11.string()).exit_code, 0);
  Result r = Df11("verify " + df11.string() + " --against " + other.string());
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr("DIFFERS model.layers.0.mlp.down_proj.weight: SHA-256 differs"));
  EXPECT_THAT(r.output, HasSubstr("FAILED"));
}

TEST(Df11CliTest, VerifyFailsOnACorruptStream) {
  const fs::path src = TempDir("csrc"), df11 = TempDir("cdf11");
  ASSERT_EQ(Df11("synth " + src.string() + " --layers 1 --hidden 64 --intermediate 128 --vocab 256")
                .exit_code,
            0);
  ASSERT_EQ(Df11("compress " + src.string() + " " + df11.string()).exit_code, 0);
  // Flip bits in the middle of the file, inside encoded_exponent or sign_mantissa.
  const fs::path unit = df11 / "model_layers_0.safetensors";
  std::fstream f(unit, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const auto size = static_cast<long>(f.tellg());
  for (long at = size / 3; at < size / 3 + 64; ++at) {
    f.seekg(at);
    char c;
    f.read(&c, 1);
    f.seekp(at);
    c = static_cast<char>(c ^ 0x5A);
    f.write(&c, 1);
  }
  f.close();
  Result r = Df11("verify " + df11.string() + " --against " + src.string());
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::AnyOf(HasSubstr("DATA_LOSS"), HasSubstr("DIFFERS")));
}

TEST(Df11CliTest, BenchPrintsOneJsonObject) {
  Result r = Df11("bench --mb 2 --runs 1 --threads 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  for (const char* key : {"encode_mbps_per_thread", "decode_gbps_per_thread",
                          "decode_gbps_all_threads", "memcpy_gbps", "bits_per_weight", "threads"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["threads"], 2);
  EXPECT_GT(j["bits_per_weight"].get<double>(), 10.0);
  EXPECT_LT(j["bits_per_weight"].get<double>(), 11.5);
}

TEST(Df11CliTest, DemoRunsEndToEnd) {
  const fs::path dir = TempDir("demo");
  Result r = Df11("demo " + dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("tensors identical. OK"));
}

// `text` as one single-quoted shell word.
std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

const fs::path kDemoModel = fs::path(DF11_SOURCE_DIR) / "models" / "demo";

nlohmann::json DemoGoldens() {
  std::ifstream in(fs::path(DF11_SOURCE_DIR) / "tests" / "data" / "demo" / "goldens.json");
  return nlohmann::json::parse(in);
}

// The demo model, greedy, from its DF11 directory: transformers' prompt ids, tokens and text
// (tools/make_demo_goldens.py), plain and with the chat template.
TEST(Df11CliTest, GenerateOnTheDemoModelMatchesTransformers) {
  const nlohmann::json goldens = DemoGoldens();
  for (const auto& c : goldens["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    SCOPED_TRACE(prompt);
    const std::string flags = c["chat"].get<bool>() ? " --chat" : "";
    Result r = Df11("generate " + kDemoModel.string() + " --prompt " + ShellQuote(prompt) +
                    " --temperature 0 --ignore-eos --json --max-tokens " +
                    std::to_string(goldens["greedy_tokens"].get<int>()) + flags);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json j = nlohmann::json::parse(r.output);
    EXPECT_EQ(j["token_ids"], c["greedy"]);
    EXPECT_EQ(j["text"], c["text"]);
    EXPECT_EQ(j["prompt_tokens"], c["prompt_ids"].size());
    EXPECT_EQ(j["finish_reason"], "length");
    EXPECT_GT(j["tokens_per_second"].get<double>(), 0);
  }
}

TEST(Df11CliTest, GenerateStreamsTextAndSeedsRepeat) {
  const nlohmann::json first = DemoGoldens()["cases"][0];
  Result streamed =
      Df11("generate " + kDemoModel.string() + " --prompt " +
           ShellQuote(first["prompt"].get<std::string>()) +
           " --temperature 0 --ignore-eos --max-tokens " + std::to_string(first["greedy"].size()));
  ASSERT_EQ(streamed.exit_code, 0) << streamed.output;
  EXPECT_THAT(streamed.output, HasSubstr(first["text"].get<std::string>()));
  EXPECT_THAT(streamed.output, HasSubstr("tokens/s"));

  const std::string sampled = "generate " + kDemoModel.string() +
                              " --prompt 'import ' --temperature 0.9 --top-p 0.95 --seed 42 "
                              "--max-tokens 12 --json";
  Result a = Df11(sampled), b = Df11(sampled);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(nlohmann::json::parse(a.output)["token_ids"],
            nlohmann::json::parse(b.output)["token_ids"]);
}

TEST(Df11CliTest, GenerateErrors) {
  Result no_prompt = Df11("generate " + kDemoModel.string());
  EXPECT_EQ(no_prompt.exit_code, 2);
  EXPECT_THAT(no_prompt.output, HasSubstr("--prompt is required"));
  Result bad_p = Df11("generate " + kDemoModel.string() + " --prompt x --top-p 2");
  EXPECT_EQ(bad_p.exit_code, 2);
  EXPECT_THAT(bad_p.output, HasSubstr("--top-p must be a number from 0 to 1"));
  Result no_model = Df11("generate " + TempDir("nothing").string() + " --prompt x");
  EXPECT_EQ(no_model.exit_code, 1);
  EXPECT_THAT(no_model.output, HasSubstr("config.json"));
  Result too_long = Df11("generate " + kDemoModel.string() + " --prompt x --max-tokens 100000");
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_THAT(too_long.output, HasSubstr("the model's context holds"));
  Result bad_kv = Df11("engine-bench --df11 " + kDemoModel.string() +
                       " --device cuda:0 --kv-cache lots --runs 1");
  EXPECT_EQ(bad_kv.exit_code, 1);
  EXPECT_THAT(bad_kv.output, HasSubstr("memory.kv_cache"));
  Result bad_device = Df11("generate " + kDemoModel.string() + " --prompt x --device gpu");
  EXPECT_EQ(bad_device.exit_code, 1);
  EXPECT_THAT(bad_device.output, HasSubstr("expected cpu or cuda:N"));
  // No such GPU here (or no CUDA in this build): said, not a crash. cuda:99 is absent anywhere.
  Result no_gpu = Df11("generate " + kDemoModel.string() + " --prompt x --device cuda:99");
  EXPECT_EQ(no_gpu.exit_code, 1);
  EXPECT_THAT(no_gpu.output,
              ::testing::AnyOf(HasSubstr("no such device"), HasSubstr("without CUDA")));
}

TEST(Df11CliTest, EngineBenchPrintsOneJsonObject) {
  const fs::path src = TempDir("bench_src"), df11 = TempDir("bench_df11");
  ASSERT_EQ(
      Df11("synth " + src.string() + " --layers 2 --hidden 128 --intermediate 256 --vocab 512")
          .exit_code,
      0);
  ASSERT_EQ(Df11("compress " + src.string() + " " + df11.string()).exit_code, 0);
  Result r = Df11("engine-bench --df11 " + df11.string() + " --bf16 " + src.string() +
                  " --prompt-tokens 9 --tokens 2 --runs 1 --threads 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  for (const char* config : {"bf16", "df11", "df11-sequential"}) {
    SCOPED_TRACE(config);
    EXPECT_GT(j["configs"][config]["decode_tokens_per_second"].get<double>(), 0);
    EXPECT_GT(j["configs"][config]["prefill_tokens_per_second"].get<double>(), 0);
    EXPECT_GT(j["configs"][config]["kv_cache_bytes"].get<uint64_t>(), 0u);
  }
  EXPECT_LT(j["configs"]["df11"]["model_resident_bytes"].get<uint64_t>(),
            j["configs"]["bf16"]["model_resident_bytes"].get<uint64_t>());
  EXPECT_TRUE(j["ratios"]["df11"].contains("decode_vs_bf16"));
  EXPECT_EQ(j["device"], "cpu");
  // Several sequences decoded together.
  Result batched = Df11("engine-bench --df11 " + df11.string() +
                        " --prompt-tokens 5 --tokens 2 --runs 1 --threads 2 --batch 3 --json");
  ASSERT_EQ(batched.exit_code, 0) << batched.output;
  const nlohmann::json b = nlohmann::json::parse(batched.output);
  EXPECT_EQ(b["batch"], 3);
  EXPECT_GT(b["configs"]["df11"]["decode_tokens_per_second"].get<double>(), 0);
  EXPECT_EQ(b["configs"]["df11"]["kv_cache_bytes"].get<uint64_t>(),
            3 * j["configs"]["df11"]["kv_cache_bytes"].get<uint64_t>() * 7 / 11);
}

}  // namespace
