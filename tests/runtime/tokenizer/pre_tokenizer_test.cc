// PreTokenizer (daemon/runtime/text/tokenizer/pre_tokenizer.h) splits as `tokenizers` does. Each
// expectation was printed by tokenizers 0.23.3, e.g.
//   pre_tokenizers.Split("-", "merged_with_previous", invert=False).pre_tokenize_str("--ab-c--d-")
// (pre_tokenize_str encodes a whole input, so the text is at the start of the input).
#include "daemon/runtime/text/tokenizer/pre_tokenizer.h"

#include <forward_list>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"

namespace df11::runtime::tokenizer_internal {
namespace {

using ::df11::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

std::vector<std::string> Pieces(const Json& config, std::string_view text,
                                bool at_text_start = true) {
  absl::StatusOr<PreTokenizer> p = PreTokenizer::FromJson(&config);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  std::forward_list<std::string> storage;
  std::vector<std::string_view> views;
  EXPECT_TRUE(p->Split(text, at_text_start, &storage, &views).ok());
  return std::vector<std::string>(views.begin(), views.end());
}

Json Split(const std::string& pattern, bool literal, const std::string& behavior, bool invert) {
  return Json{{"type", "Split"},
              {"pattern", {{literal ? "String" : "Regex", pattern}}},
              {"behavior", behavior},
              {"invert", invert}};
}

Json Metaspace(const std::string& scheme, bool split) {
  return Json{{"type", "Metaspace"},
              {"replacement", "\u2581"},
              {"prepend_scheme", scheme},
              {"split", split}};
}

TEST(PreTokenizerTest, SplitBehaviorsWithAndWithoutInvert) {
  struct Case {
    const char* behavior;
    bool invert;
    std::vector<std::string> pieces;
  };
  const Case cases[] = {
      {"Removed", false, {"ab", "c", "d"}},
      {"Removed", true, {"-", "-", "-", "-", "-", "-"}},
      {"Isolated", false, {"-", "-", "ab", "-", "c", "-", "-", "d", "-"}},
      {"Isolated", true, {"-", "-", "ab", "-", "c", "-", "-", "d", "-"}},
      {"MergedWithPrevious", false, {"-", "-", "ab-", "c-", "-", "d-"}},
      {"MergedWithPrevious", true, {"-", "-ab", "-c", "-", "-d", "-"}},
      {"MergedWithNext", false, {"-", "-ab", "-c", "-", "-d", "-"}},
      {"MergedWithNext", true, {"-", "-", "ab-", "c-", "-", "d-"}},
      {"Contiguous", false, {"--", "ab", "-", "c", "--", "d", "-"}},
      {"Contiguous", true, {"--", "ab", "-", "c", "--", "d", "-"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.behavior) + (c.invert ? " inverted" : ""));
    EXPECT_EQ(Pieces(Split("-", true, c.behavior, c.invert), "--ab-c--d-"), c.pieces);
  }
}

// Regression: a String pattern was compiled with PCRE2_LITERAL | PCRE2_UCP, which PCRE2 rejects
// ("invalid option bits"), so every Split with a String pattern failed to load.
TEST(PreTokenizerTest, StringPatternWithRegexCharactersIsLiteral) {
  EXPECT_THAT(Pieces(Split(".*", true, "Isolated", false), "a.*b.c"),
              ElementsAre("a", ".*", "b.c"));
}

TEST(PreTokenizerTest, EmptyMatchesFollowTheOnigCrate) {
  // find_iter drops an empty match right where the previous match ended; the others are entries
  // that the merging behaviors see.
  EXPECT_THAT(Pieces(Split("x*", false, "MergedWithPrevious", false), "axxbx"),
              ElementsAre("axx", "bx"));
  EXPECT_THAT(Pieces(Split("x*", false, "MergedWithNext", false), "axxbx"),
              ElementsAre("a", "xxb", "x"));
  EXPECT_THAT(Pieces(Split("x*", false, "Contiguous", false), "axxbx"),
              ElementsAre("a", "xx", "b", "x"));
}

TEST(PreTokenizerTest, MergedWithPreviousKeepsRunsApart) {
  EXPECT_THAT(Pieces(Split("\\s+", false, "MergedWithPrevious", false), "a  b c "),
              ElementsAre("a  ", "b ", "c "));
  // Gemma 3's pre-tokenizer, without its Replace(" " -> "▁") normalizer before it.
  EXPECT_THAT(Pieces(Split(" ", true, "MergedWithPrevious", false), "a  b "),
              ElementsAre("a ", " ", "b "));
}

TEST(PreTokenizerTest, MetaspaceReplacesSpacesAndPrepends) {
  EXPECT_THAT(Pieces(Metaspace("first", true), "Hello big  world"),
              ElementsAre("\u2581Hello", "\u2581big", "\u2581", "\u2581world"));
  EXPECT_THAT(Pieces(Metaspace("always", false), " x y"), ElementsAre("\u2581x\u2581y"));
  EXPECT_THAT(Pieces(Metaspace("never", true), "x\u2581y z"),
              ElementsAre("x", "\u2581y", "\u2581z"));
  // "first" prepends only to text at offset 0 of the input.
  EXPECT_THAT(Pieces(Metaspace("first", false), "x y", /*at_text_start=*/false),
              ElementsAre("x\u2581y"));
  EXPECT_THAT(Pieces(Metaspace("always", false), "x y", /*at_text_start=*/false),
              ElementsAre("\u2581x\u2581y"));
}

TEST(PreTokenizerTest, MetaspaceFirstSeesOnlyThePieceAtTheStart) {
  const Json split_digits = Split("\\d", false, "Isolated", false);
  EXPECT_THAT(
      Pieces(Json{{"type", "Sequence"},
                  {"pretokenizers", Json::array({split_digits, Metaspace("first", false)})}},
             "a1 b2"),
      ElementsAre("\u2581a", "1", "\u2581b", "2"));
  EXPECT_THAT(
      Pieces(Json{{"type", "Sequence"},
                  {"pretokenizers", Json::array({split_digits, Metaspace("always", false)})}},
             "a1 b2"),
      ElementsAre("\u2581a", "\u25811", "\u2581b", "\u25812"));
}

TEST(PreTokenizerTest, NullKeepsTheTextWhole) {
  DF11_ASSERT_OK_AND_ASSIGN(PreTokenizer p, PreTokenizer::FromJson(nullptr));
  EXPECT_FALSE(p.byte_level());
  std::forward_list<std::string> storage;
  std::vector<std::string_view> pieces;
  DF11_ASSERT_OK(p.Split("a b  c", true, &storage, &pieces));
  EXPECT_THAT(pieces, ElementsAre("a b  c"));
}

TEST(PreTokenizerTest, MalformedMetaspaceIsInvalidArgument) {
  Json two_chars = Metaspace("first", false);
  two_chars["replacement"] = "ab";
  EXPECT_THAT(PreTokenizer::FromJson(&two_chars),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("pre_tokenizer.replacement: expected one character")));
  // tokenizers refuses add_prefix_space false next to a scheme that prepends.
  Json mismatch = Metaspace("first", false);
  mismatch["add_prefix_space"] = false;
  EXPECT_THAT(
      PreTokenizer::FromJson(&mismatch),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pre_tokenizer.add_prefix_space")));
  Json scheme = Metaspace("sometimes", false);
  EXPECT_THAT(PreTokenizer::FromJson(&scheme), StatusIs(absl::StatusCode::kInvalidArgument,
                                                        HasSubstr("pre_tokenizer.prepend_scheme")));
}

}  // namespace
}  // namespace df11::runtime::tokenizer_internal
