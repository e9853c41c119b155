// Tokenizer tests. The parity tests replay tests/data/tokenizer/goldens.json, made by
// tools/make_tokenizer_goldens.py with Hugging Face `tokenizers` (see that script to re-run it or
// to add a case: append the string to its corpus and re-run; this file needs no change; a new
// tokenizer needs a CheckGoldens test, which EveryGoldenSetIsReplayed asks for).
#include "daemon/runtime/text/tokenizer/tokenizer.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_data_dir.h"

namespace df11::runtime {
namespace {

using ::df11::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

// The pre-tokenizer patterns of the released Llama-3 and Qwen2 tokenizer.json files (Llama-3's is
// tiktoken's cl100k pattern, which Phi-4 uses too).
constexpr char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kQwen2Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string DataDir() { return ::df11::testing::TestDataDir("tokenizer").string(); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const Json& Goldens() {
  static const Json* const goldens = new Json(Json::parse(ReadFile(DataDir() + "/goldens.json")));
  return *goldens;
}

bool IsValidUtf8(const std::string& s) {
  // Independent of the library: decode every sequence strictly.
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    const int n = b < 0x80             ? 0
                  : (b & 0xE0) == 0xC0 ? 1
                  : (b & 0xF0) == 0xE0 ? 2
                  : (b & 0xF8) == 0xF0 ? 3
                                       : -1;
    if (n < 0) return false;
    uint32_t c = n == 0 ? b : (b & (0x3F >> n));
    for (int k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto t = static_cast<uint8_t>(s[i + k]);
      if ((t & 0xC0) != 0x80) return false;
      c = (c << 6) | (t & 0x3F);
    }
    const uint32_t min[] = {0, 0x80, 0x800, 0x10000};
    if (c < min[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

// Feeds `ids` one at a time; checks every piece is valid UTF-8 and returns the concatenation.
std::string StreamDecode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  IncrementalDecoder decoder(tok, skip);
  std::string all;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = decoder.Feed(ids[i]);
    EXPECT_TRUE(IsValidUtf8(piece)) << "after id #" << i;
    all += piece;
  }
  const std::string rest = decoder.Finish();
  EXPECT_TRUE(IsValidUtf8(rest)) << "Finish";
  return all + rest;
}

Tokenizer Load(const std::string& relative) {
  absl::StatusOr<Tokenizer> tok = Tokenizer::FromFile(DataDir() + "/" + relative);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return *std::move(tok);
}

// Replays one golden set against `file`.
void CheckGoldens(const std::string& golden_name, const std::string& file) {
  const Json& set = Goldens()["tokenizers"][golden_name];
  ASSERT_GE(set["cases"].size(), 60u);
  DF11_ASSERT_OK_AND_ASSIGN(Tokenizer tok, Tokenizer::FromFile(DataDir() + "/" + file));
  for (const Json& c : set["cases"]) {
    const std::string text = c["text"];
    SCOPED_TRACE("text: \"" + text + "\"");
    const auto with = c["ids_with_special"].get<std::vector<int32_t>>();
    const auto without = c["ids_without_special"].get<std::vector<int32_t>>();
    DF11_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> got_with, tok.Encode(text, true));
    DF11_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> got_without, tok.Encode(text, false));
    EXPECT_EQ(got_with, with);
    EXPECT_EQ(got_without, without);
    EXPECT_EQ(tok.Decode(with, false), c["decoded"].get<std::string>());
    EXPECT_EQ(tok.Decode(with, true), c["decoded_skip_special"].get<std::string>());
    EXPECT_EQ(StreamDecode(tok, with, false), c["decoded"].get<std::string>());
    EXPECT_EQ(StreamDecode(tok, with, true), c["decoded_skip_special"].get<std::string>());
  }
  for (const Json& c : set["decode_cases"]) {
    SCOPED_TRACE("bytes: " + c["bytes_hex"].get<std::string>());
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.Decode(ids, false), c["decoded"].get<std::string>());
    EXPECT_EQ(StreamDecode(tok, ids, false), c["decoded"].get<std::string>());
  }
}

TEST(TokenizerGoldenTest, Llama3LikeMatchesTokenizers) {
  CheckGoldens("llama3_like", "llama3_like/tokenizer.json");
}

TEST(TokenizerGoldenTest, Qwen2LikeMatchesTokenizers) {
  CheckGoldens("qwen2_like", "qwen2_like/tokenizer.json");
}

TEST(TokenizerGoldenTest, Qwen2LikeWithStringMergesMatchesTokenizers) {
  CheckGoldens("qwen2_like", "qwen2_like_string_merges/tokenizer.json");
}

TEST(TokenizerGoldenTest, Gemma3LikeMatchesTokenizers) {
  CheckGoldens("gemma3_like", "gemma3_like/tokenizer.json");
}

TEST(TokenizerGoldenTest, MistralLikeMatchesTokenizers) {
  CheckGoldens("mistral_like", "mistral_like/tokenizer.json");
}

TEST(TokenizerGoldenTest, MistralLikeWithMetaspaceDecoderMatchesTokenizers) {
  CheckGoldens("mistral_like_metaspace_decoder", "mistral_like_metaspace_decoder/tokenizer.json");
}

TEST(TokenizerGoldenTest, Llama2LikeMatchesTokenizers) {
  CheckGoldens("llama2_like", "llama2_like/tokenizer.json");
}

TEST(TokenizerGoldenTest, Phi4LikeMatchesTokenizers) {
  CheckGoldens("phi4_like", "phi4_like/tokenizer.json");
}

TEST(TokenizerGoldenTest, EveryGoldenSetIsReplayed) {
  // A set added to tools/make_tokenizer_goldens.py needs its test above.
  std::vector<std::string> names;
  for (const auto& [name, set] : Goldens()["tokenizers"].items()) names.push_back(name);
  EXPECT_THAT(names, ::testing::UnorderedElementsAre(
                         "llama3_like", "qwen2_like", "gemma3_like", "mistral_like",
                         "mistral_like_metaspace_decoder", "llama2_like", "phi4_like"));
}

TEST(TokenizerGoldenTest, FixturesHaveTheReleasedShapes) {
  auto load = [](const std::string& name) {
    return Json::parse(ReadFile(DataDir() + "/" + name + "/tokenizer.json"));
  };
  const Json replace_space = {
      {"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
  const Json gemma = load("gemma3_like");
  EXPECT_EQ(gemma["normalizer"], replace_space);
  EXPECT_EQ(gemma["pre_tokenizer"], (Json{{"type", "Split"},
                                          {"pattern", {{"String", " "}}},
                                          {"behavior", "MergedWithPrevious"},
                                          {"invert", false}}));
  const Json mistral = load("mistral_like");
  EXPECT_EQ(mistral["normalizer"], nullptr);
  EXPECT_EQ(mistral["pre_tokenizer"]["type"], "Metaspace");
  EXPECT_EQ(mistral["pre_tokenizer"]["prepend_scheme"], "first");
  EXPECT_EQ(mistral["decoder"]["decoders"][3]["type"], "Strip");
  const Json llama2 = load("llama2_like");
  EXPECT_EQ(llama2["normalizer"]["normalizers"][0]["type"], "Prepend");
  EXPECT_EQ(llama2["normalizer"]["normalizers"][1], replace_space);
  EXPECT_EQ(llama2["pre_tokenizer"], nullptr);
  for (const Json* j : {&gemma, &mistral, &llama2}) {
    EXPECT_EQ((*j)["model"]["byte_fallback"], true);
    EXPECT_EQ((*j)["model"]["fuse_unk"], true);
    EXPECT_EQ((*j)["model"]["unk_token"], "<unk>");
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      EXPECT_TRUE((*j)["model"]["vocab"].contains(name)) << name;
    }
  }
  const Json phi4 = load("phi4_like");
  EXPECT_EQ(phi4["pre_tokenizer"]["pretokenizers"][0]["behavior"], "Removed");
  EXPECT_EQ(phi4["pre_tokenizer"]["pretokenizers"][0]["invert"], true);
}

TEST(TokenizerGoldenTest, FixturesUseTheReleasedPatterns) {
  for (const auto& [file, pattern] :
       {std::pair{"llama3_like", kLlama3Pattern}, std::pair{"qwen2_like", kQwen2Pattern},
        std::pair{"phi4_like", kLlama3Pattern}}) {
    const Json j = Json::parse(ReadFile(DataDir() + "/" + file + "/tokenizer.json"));
    EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"].get<std::string>(),
              pattern)
        << file;
  }
}

TEST(TokenizerTest, MergeSpellingsGiveIdenticalTokenizers) {
  const Tokenizer pairs = Load("qwen2_like/tokenizer.json");
  const Tokenizer strings = Load("qwen2_like_string_merges/tokenizer.json");
  const std::string text = ReadFile(DataDir() + "/goldens.json");  // long, mixed-script text
  DF11_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> a, pairs.Encode(text, false));
  DF11_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> b, strings.Encode(text, false));
  EXPECT_EQ(a, b);
}

TEST(TokenizerTest, LongTextRoundTripsWithoutNormalizer) {
  const Tokenizer tok = Load("llama3_like/tokenizer.json");
  // Long and mixed-script, without the Llama-like file's lstrip/rstrip added tokens.
  const std::string text = ReadFile(DataDir() + "/qwen2_like/tokenizer.json");
  DF11_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok.Encode(text, false));
  EXPECT_EQ(tok.Decode(ids, false), text);
  EXPECT_EQ(StreamDecode(tok, ids, false), text);
}

TEST(TokenizerTest, ConcurrentEncodesAgreeWithSerialOnes) {
  const Tokenizer tok = Load("qwen2_like/tokenizer.json");
  const Json& cases = Goldens()["tokenizers"]["qwen2_like"]["cases"];
  std::vector<std::vector<int32_t>> expected;
  for (const Json& c : cases) expected.push_back(*tok.Encode(c["text"].get<std::string>(), true));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < cases.size(); ++i) {
          absl::StatusOr<std::vector<int32_t>> ids =
              tok.Encode(cases[i]["text"].get<std::string>(), true);
          if (!ids.ok() || *ids != expected[i]) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

TEST(TokenizerTest, TokenLookups) {
  const Tokenizer tok = Load("llama3_like/tokenizer.json");
  // 4000 trained tokens, " zyzzyva" (4000), then the added tokens from 4001.
  EXPECT_EQ(tok.vocab_size(), 4009);
  EXPECT_EQ(tok.TokenId("<|begin_of_text|>"), 4001);
  EXPECT_EQ(tok.TokenId("<|eot_id|>"), 4005);
  EXPECT_EQ(tok.TokenId("<|python_tag|>"), 4007);
  EXPECT_EQ(tok.TokenId("\u0120zyzzyva"), 4000);
  EXPECT_EQ(tok.TokenId("\u0120"), 220);  // byte 0x20 is the 221st alphabet character
  EXPECT_EQ(tok.TokenId("no such token"), std::nullopt);
  EXPECT_EQ(tok.TokenText(4005), "<|eot_id|>");
  EXPECT_EQ(tok.TokenText(220), "\u0120");
  EXPECT_EQ(tok.TokenText(4009), std::nullopt);
  EXPECT_EQ(tok.TokenText(-1), std::nullopt);
  EXPECT_TRUE(tok.IsSpecial(4001));
  EXPECT_TRUE(tok.IsSpecial(4006));   // <|fim_middle|>
  EXPECT_FALSE(tok.IsSpecial(4007));  // <|python_tag|> is not special
  EXPECT_FALSE(tok.IsSpecial(220));
  EXPECT_FALSE(tok.IsSpecial(99999));
  DF11_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok.Encode("", true));
  EXPECT_THAT(ids, ElementsAre(4001));  // BOS from the TemplateProcessing post-processor
}

TEST(TokenizerTest, NormalizedAddedTokenDecodesAsItsNfcForm) {
  const Tokenizer tok = Load("qwen2_like/tokenizer.json");
  const std::optional<int32_t> id = tok.TokenId("Cafe\u0301!");
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(tok.TokenText(*id), "Caf\u00e9!");
  DF11_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok.Encode("Caf\u00e9!", false));
  EXPECT_THAT(ids, ElementsAre(*id));
}

TEST(TokenizerTest, InvalidUtf8InputIsInvalidArgument) {
  const Tokenizer tok = Load("qwen2_like/tokenizer.json");
  for (const std::string bad : {"abc\xff", "\xc3", "\xed\xa0\x80", "\xc0\xaf", "a\xe4\xbdz"}) {
    EXPECT_THAT(tok.Encode(bad, false),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("UTF-8")));
  }
  // Embedded NULs are valid text.
  DF11_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok.Encode(std::string("a\0b", 3), false));
  EXPECT_EQ(tok.Decode(ids, false), std::string("a\0b", 3));
}

TEST(IncrementalDecoderTest, HoldsBackIncompleteCharacters) {
  const Tokenizer tok = Load("qwen2_like/tokenizer.json");
  // "é" is C3 A9; its byte tokens are the alphabet characters U+00C3 and U+00A9.
  const int32_t c3 = *tok.TokenId("\u00c3"), a9 = *tok.TokenId("\u00a9");
  IncrementalDecoder d(tok, false);
  EXPECT_EQ(d.Feed(c3), "");
  EXPECT_EQ(d.Feed(a9), "\u00e9");
  EXPECT_EQ(d.Feed(c3), "");
  EXPECT_EQ(d.Finish(), "\ufffd");  // a truncated sequence at the end
  EXPECT_EQ(d.Feed(a9), "\ufffd");  // a lone continuation byte after Finish reset the stream
  EXPECT_EQ(d.Feed(*tok.TokenId("<|im_end|>")), "<|im_end|>");
  EXPECT_EQ(d.Finish(), "");
}

TEST(IncrementalDecoderTest, SkipsSpecialTokensWhenAsked) {
  const Tokenizer tok = Load("qwen2_like/tokenizer.json");
  IncrementalDecoder d(tok, true);
  EXPECT_EQ(d.Feed(*tok.TokenId("<|im_end|>")), "");
  EXPECT_EQ(d.Feed(*tok.TokenId("<tool_call>")), "<tool_call>");  // not special
  EXPECT_EQ(d.Feed(-5), "");
  EXPECT_EQ(d.Finish(), "");
}

TEST(TokenizerTest, ByteFallbackTokensKeepTheirBytes) {
  const Tokenizer tok = Load("mistral_like/tokenizer.json");
  const int32_t e4 = *tok.TokenId("<0xE4>"), the = *tok.TokenId("\u2581the");
  EXPECT_EQ(tok.TokenBytes(e4), "\xE4");
  EXPECT_EQ(tok.TokenBytes(the), " the");
  EXPECT_EQ(tok.TokenBytes(*tok.TokenId("<s>")), "<s>");
  EXPECT_EQ(tok.Decode(std::vector<int32_t>{the}, false), "the");  // Strip: the text's first space
  // "😀" is not in the vocab: its four UTF-8 bytes, as <0xNN> tokens.
  DF11_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok.Encode("\U0001F600", false));
  EXPECT_THAT(ids,
              ElementsAre(*tok.TokenId("\u2581"), *tok.TokenId("<0xF0>"), *tok.TokenId("<0x9F>"),
                          *tok.TokenId("<0x98>"), *tok.TokenId("<0x80>")));
}

TEST(IncrementalDecoderTest, HoldsBackAByteFallbackRunUntilItEnds) {
  const Tokenizer tok = Load("mistral_like/tokenizer.json");
  auto id = [&tok](const char* token) { return *tok.TokenId(token); };
  IncrementalDecoder d(tok, true);
  EXPECT_EQ(d.Feed(id("<s>")), "");
  EXPECT_EQ(d.Feed(id("\u2581the")), "the");
  EXPECT_EQ(d.Feed(id("<0xE4>")), "");
  EXPECT_EQ(d.Feed(id("<0xBD>")), "");
  EXPECT_EQ(d.Feed(id("<0xA0>")), "");  // a whole character, but the run may still turn invalid
  EXPECT_EQ(d.Feed(id("\u2581the")), "\u4f60 the");
  EXPECT_EQ(d.Feed(id("<0xFF>")), "\ufffd");  // invalid: settled at once
  EXPECT_EQ(d.Feed(id("<0xE4>")), "\ufffd");  // the rest of an invalid run too
  EXPECT_EQ(d.Finish(), "");
}

TEST(IncrementalDecoderTest, IsMovable) {
  const Tokenizer tok = Load("qwen2_like/tokenizer.json");
  IncrementalDecoder a(tok, false);
  EXPECT_EQ(a.Feed(*tok.TokenId("\u00c3")), "");
  IncrementalDecoder b = std::move(a);
  EXPECT_EQ(b.Feed(*tok.TokenId("\u00a9")), "\u00e9");
}

// A minimal byte-level tokenizer: the 256 alphabet characters, "ab" and "abc".
Json TinyTokenizer() {
  Json vocab = Json::object();
  const std::string alphabet_source = ReadFile(DataDir() + "/qwen2_like/tokenizer.json");
  const Json full = Json::parse(alphabet_source);
  for (auto it = full["model"]["vocab"].begin(); it != full["model"]["vocab"].end(); ++it) {
    if (it.value().get<int>() < 256) vocab[it.key()] = it.value();
  }
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  return Json{
      {"version", "1.0"},
      {"added_tokens", Json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "ByteLevel"},
        {"add_prefix_space", true},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"vocab", vocab},
        {"merges", Json::array({Json::array({"a", "b"}), Json::array({"ab", "c"})})}}},
  };
}

TEST(TokenizerTest, TinyTokenizerWithGpt2Split) {
  DF11_ASSERT_OK_AND_ASSIGN(Tokenizer tok, Tokenizer::FromJson(TinyTokenizer().dump()));
  DF11_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok.Encode("abc ab", false));
  // GPT-2 split: "abc" and " ab"; the space is its own byte token (Ġ, not merged with "ab").
  EXPECT_THAT(ids, ElementsAre(257, *tok.TokenId("Ġ"), 256));
  EXPECT_EQ(tok.Decode(ids, false), "abc ab");
}

TEST(TokenizerTest, LegacyMergeStringsSkipVersionLine) {
  Json j = TinyTokenizer();
  j["model"]["merges"] = Json::array({"#version: 0.2", "a b", "ab c"});
  DF11_ASSERT_OK_AND_ASSIGN(Tokenizer tok, Tokenizer::FromJson(j.dump()));
  DF11_ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok.Encode("abc", false));
  EXPECT_THAT(ids, ElementsAre(257));
}

struct BadCase {
  const char* name;
  void (*mutate)(Json&);
  absl::StatusCode code;
  const char* substring;
};

TEST(TokenizerTest, MalformedOrUnsupportedFilesNameTheField) {
  const BadCase cases[] = {
      {"model type", [](Json& j) { j["model"]["type"] = "WordPiece"; },
       absl::StatusCode::kFailedPrecondition,
       "model.type: \"WordPiece\" is not supported (supported: type BPE"},
      {"no model", [](Json& j) { j.erase("model"); }, absl::StatusCode::kInvalidArgument,
       "model: missing"},
      {"vocab type", [](Json& j) { j["model"]["vocab"] = Json::array(); },
       absl::StatusCode::kInvalidArgument, "model.vocab: expected an object"},
      {"negative id", [](Json& j) { j["model"]["vocab"]["ab"] = -1; },
       absl::StatusCode::kInvalidArgument, "model.vocab[\"ab\"]"},
      // Found by tokenizer_fuzz: tables indexed by id would take gigabytes.
      {"id far beyond the tokens", [](Json& j) { j["model"]["vocab"]["ab"] = 2000000000; },
       absl::StatusCode::kInvalidArgument, "id 2000000000 is far beyond the "},
      {"merge out of vocab",
       [](Json& j) {
         j["model"]["merges"].push_back(Json::array({"x", "yz"}));
       },
       absl::StatusCode::kInvalidArgument,
       "model.merges (rank 2): token \"yz\" is not in model.vocab"},
      {"merge string", [](Json& j) { j["model"]["merges"] = Json::array({"a  b"}); },
       absl::StatusCode::kInvalidArgument, "model.merges[0]"},
      {"merge entry", [](Json& j) { j["model"]["merges"] = Json::array({1}); },
       absl::StatusCode::kInvalidArgument, "model.merges[0]"},
      {"dropout", [](Json& j) { j["model"]["dropout"] = 0.1; },
       absl::StatusCode::kFailedPrecondition, "model.dropout"},
      {"subword prefix", [](Json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
       absl::StatusCode::kFailedPrecondition, "model.continuing_subword_prefix"},
      {"unk not in vocab", [](Json& j) { j["model"]["unk_token"] = "<unk>"; },
       absl::StatusCode::kInvalidArgument, "model.unk_token"},
      {"normalizer",
       [](Json& j) {
         j["normalizer"] = {{"type", "NFKC"}};
       },
       absl::StatusCode::kFailedPrecondition,
       "normalizer: type \"NFKC\" is not supported (supported: null, NFC"},
      {"regex replace",
       [](Json& j) {
         j["normalizer"] = {
             {"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", "\u2581"}};
       },
       absl::StatusCode::kFailedPrecondition, "normalizer.pattern: a Regex pattern"},
      {"nested normalizer",
       [](Json& j) {
         j["normalizer"] = {{"type", "Sequence"},
                            {"normalizers", Json::array({{{"type", "Lowercase"}}})}};
       },
       absl::StatusCode::kFailedPrecondition, "normalizer.normalizers[0]: type \"Lowercase\""},
      {"prepend",
       [](Json& j) {
         j["normalizer"] = {{"type", "Prepend"}};
       },
       absl::StatusCode::kInvalidArgument, "normalizer.prepend: missing"},
      {"after byte-level",
       [](Json& j) {
         j["pre_tokenizer"] = {
             {"type", "Sequence"},
             {"pretokenizers", Json::array({j["pre_tokenizer"],
                                            {{"type", "Metaspace"}, {"replacement", "\u2581"}}})}};
       },
       absl::StatusCode::kFailedPrecondition,
       "pre_tokenizer.pretokenizers[1]: type \"Metaspace\" after ByteLevel"},
      {"prefix space", [](Json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; },
       absl::StatusCode::kFailedPrecondition, "pre_tokenizer.add_prefix_space"},
      {"split behavior",
       [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", Json::array({{{"type", "Split"},
                                                               {"pattern", {{"Regex", "\\s+"}}},
                                                               {"behavior", "Scattered"},
                                                               {"invert", false}},
                                                              j["pre_tokenizer"]})}};
       },
       absl::StatusCode::kFailedPrecondition, "pre_tokenizer.pretokenizers[0].behavior"},
      {"bad regex",
       [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", Json::array({{{"type", "Split"},
                                                               {"pattern", {{"Regex", "(a"}}},
                                                               {"behavior", "Isolated"},
                                                               {"invert", false}},
                                                              j["pre_tokenizer"]})}};
       },
       absl::StatusCode::kInvalidArgument, "pre_tokenizer.pretokenizers[0].pattern"},
      {"pre-tokenizer type",
       [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       absl::StatusCode::kFailedPrecondition,
       "pre_tokenizer: type \"Whitespace\" is not supported"},
      {"decoder",
       [](Json& j) {
         j["decoder"] = {{"type", "WordPiece"}};
       },
       absl::StatusCode::kFailedPrecondition,
       "decoder: type \"WordPiece\" is not supported (supported: ByteLevel, Metaspace"},
      {"no decoder", [](Json& j) { j["decoder"] = nullptr; }, absl::StatusCode::kFailedPrecondition,
       "decoder: null is not supported"},
      {"post-processor",
       [](Json& j) {
         j["post_processor"] = {{"type", "BertProcessing"}};
       },
       absl::StatusCode::kFailedPrecondition, "post_processor: type \"BertProcessing\""},
      {"template token",
       [](Json& j) {
         j["post_processor"] = {
             {"type", "TemplateProcessing"},
             {"single", Json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
             {"special_tokens", Json::object()}};
       },
       absl::StatusCode::kInvalidArgument, "post_processor.special_tokens[\"<s>\"]: missing"},
      {"added token",
       [](Json& j) {
         j["added_tokens"] = Json::array({{{"id", 300}}});
       },
       absl::StatusCode::kInvalidArgument, "added_tokens[0].content: missing"},
      {"version", [](Json& j) { j["version"] = "2.0"; }, absl::StatusCode::kFailedPrecondition,
       "version"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    Json j = TinyTokenizer();
    c.mutate(j);
    EXPECT_THAT(Tokenizer::FromJson(j.dump()), StatusIs(c.code, HasSubstr(c.substring)));
  }
}

TEST(TokenizerTest, NotJsonIsInvalidArgument) {
  EXPECT_THAT(Tokenizer::FromJson("{\"model\": "),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
  EXPECT_THAT(Tokenizer::FromJson("[]"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected an object")));
}

TEST(TokenizerTest, MissingFileIsNotFound) {
  EXPECT_THAT(Tokenizer::FromFile(DataDir() + "/no_such/tokenizer.json"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no_such/tokenizer.json")));
}

}  // namespace
}  // namespace df11::runtime
