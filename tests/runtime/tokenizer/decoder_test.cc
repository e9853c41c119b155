// Decoder and DecoderStream (daemon/runtime/text/tokenizer/decoder.h) decode as `tokenizers` does.
// Each whole-sequence expectation was printed by tokenizers 0.23.3, e.g.
//   decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
//                      decoders.Strip(" ", 1, 0)]).decode(["▁", "▁x"])
#include "daemon/runtime/text/tokenizer/decoder.h"

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

const Json kReplace = {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}};
const Json kByteFallback = {{"type", "ByteFallback"}};
const Json kFuse = {{"type", "Fuse"}};

Json Strip(int start) {
  return Json{{"type", "Strip"}, {"content", " "}, {"start", start}, {"stop", 0}};
}

Json Sequence(std::vector<Json> steps) {
  return Json{{"type", "Sequence"}, {"decoders", Json(std::move(steps))}};
}

// The Llama-2 / Mistral decoder.
Json Llama2() { return Sequence({kReplace, kByteFallback, kFuse, Strip(1)}); }

Json Metaspace(const std::string& scheme) {
  return Json{{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", scheme}};
}

Decoder Parse(const Json& config) {
  absl::StatusOr<Decoder> d = Decoder::FromJson(&config);
  EXPECT_TRUE(d.ok()) << d.status();
  return *std::move(d);
}

// What each Feed returns, then Finish's text last.
std::vector<std::string> Stream(const Decoder& decoder, const std::vector<std::string>& tokens) {
  DecoderStream stream(decoder);
  std::vector<std::string> out;
  for (const std::string& t : tokens) {
    out.emplace_back();
    stream.Feed(t, &out.back());
  }
  out.emplace_back();
  stream.Finish(&out.back());
  return out;
}

std::string Decode(const Decoder& decoder, const std::vector<std::string>& tokens) {
  std::string all;
  for (const std::string& piece : Stream(decoder, tokens)) all += piece;
  return all;
}

TEST(DecoderTest, Llama2ChainMatchesTokenizers) {
  const Decoder d = Parse(Llama2());
  EXPECT_EQ(Decode(d, {"\u2581", "\u2581x"}), " x");
  // u8::from_str_radix accepts a '+' before one digit, and lower-case digits.
  EXPECT_EQ(Decode(d, {"<0x+A>", "<0x0a>", "<0xE4>", "<0xBD>", "<0xA0>", "\u2581a"}),
            "\n\n\u4f60 a");
  // One invalid byte makes every byte of its run U+FFFD.
  EXPECT_EQ(Decode(d, {"<0xE4>", "<0xBD>", "<0xA0>", "<0xFF>", "<0x41>", "b"}),
            "\ufffd\ufffd\ufffd\ufffd\ufffdb");
  EXPECT_EQ(Decode(d, {"<0x20>", "a"}), "a");  // Strip sees the fused text
  EXPECT_EQ(Decode(d, {}), "");
}

TEST(DecoderTest, MetaspaceDecoderDropsReplacementsOfTheFirstTokenOnly) {
  EXPECT_EQ(Decode(Parse(Metaspace("first")), {"\u2581\u2581a\u2581b", "\u2581c"}), "ab c");
  EXPECT_EQ(Decode(Parse(Metaspace("first")), {"x", "\u2581y"}), "x y");
  EXPECT_EQ(Decode(Parse(Metaspace("first")), {"<0x41>", "\u2581b"}), "<0x41> b");
  EXPECT_EQ(Decode(Parse(Metaspace("never")), {"\u2581a", "\u2581b"}), " a b");
}

TEST(DecoderTest, StripBeforeFuseIsPerTokenAndAfterFuseOnTheText) {
  EXPECT_EQ(Decode(Parse(Sequence({Strip(2), kReplace})), {"  \u2581x", " y"}), " xy");
  EXPECT_EQ(Decode(Parse(Sequence({kFuse, Strip(2)})), {" ", "", " ", " x"}), " x");
  EXPECT_EQ(Decode(Parse(Sequence({{{"type", "ByteLevel"}}, Strip(1)})), {"\u0120", "\u0120a"}),
            " a");
}

TEST(DecoderStreamTest, HoldsBackARunOfByteTokensWhileItIsValid) {
  const Decoder d = Parse(Llama2());
  EXPECT_THAT(Stream(d, {"\u2581I", "<0xE4>", "<0xBD>", "<0xA0>", "\u2581a"}),
              ElementsAre("I", "", "", "", "\u4f60 a", ""));
  // Once a run is invalid, its bytes come out at once, one U+FFFD each.
  EXPECT_THAT(Stream(d, {"<0xE4>", "<0xFF>", "<0x41>", "b"}),
              ElementsAre("", "\ufffd\ufffd", "\ufffd", "b", ""));
  // A run cut short by the end is invalid too.
  EXPECT_THAT(Stream(d, {"a", "<0xE4>", "<0xBD>"}), ElementsAre("a", "", "", "\ufffd\ufffd"));
}

TEST(DecoderStreamTest, FinishStartsANewText) {
  const Decoder d = Parse(Llama2());
  DecoderStream stream(d);
  std::string out;
  stream.Feed("\u2581a", &out);
  stream.Feed("<0xE4>", &out);
  stream.Finish(&out);
  stream.Feed("\u2581b", &out);  // Strip applies again
  stream.Finish(&out);
  EXPECT_EQ(out, "a\ufffdb");
}

TEST(DecoderTest, TokenBytesIgnoreNeighboursAndTheStart) {
  const Decoder d = Parse(Llama2());
  std::string bytes;
  d.AppendTokenBytes("<0xE4>", &bytes);
  d.AppendTokenBytes("\u2581the", &bytes);
  d.AppendTokenBytes("<s>", &bytes);
  EXPECT_EQ(bytes, "\xE4 the<s>");
  bytes.clear();
  Parse(Metaspace("first")).AppendTokenBytes("\u2581a\u2581", &bytes);
  EXPECT_EQ(bytes, " a ");
}

TEST(DecoderTest, UnsupportedDecodersNameTheStep) {
  const struct {
    Json config;
    absl::StatusCode code;
    const char* substring;
  } cases[] = {
      {Json{{"type", "WordPiece"}}, absl::StatusCode::kFailedPrecondition,
       "decoder: type \"WordPiece\" is not supported"},
      {Sequence({kReplace,
                 kByteFallback,
                 kFuse,
                 {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}}}),
       absl::StatusCode::kFailedPrecondition, "decoder.decoders[3].stop: 1 is not supported"},
      {Sequence({kFuse, kReplace}), absl::StatusCode::kFailedPrecondition,
       "decoder.decoders[1]: type \"Replace\" after Fuse or ByteLevel"},
      {Sequence({{{"type", "ByteLevel"}}, kByteFallback}), absl::StatusCode::kFailedPrecondition,
       "decoder.decoders[1]: type \"ByteFallback\" after Fuse or ByteLevel"},
      {Json{{"type", "Replace"}, {"pattern", {{"Regex", "\\s"}}}, {"content", " "}},
       absl::StatusCode::kFailedPrecondition, "decoder.pattern: a Regex pattern"},
      {Json{{"type", "Strip"}, {"content", "ab"}, {"start", 1}, {"stop", 0}},
       absl::StatusCode::kInvalidArgument, "decoder.content: expected one character"},
      {Json{{"type", "Strip"}, {"content", " "}, {"start", -1}, {"stop", 0}},
       absl::StatusCode::kInvalidArgument, "decoder.start"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.config.dump());
    EXPECT_THAT(Decoder::FromJson(&c.config), StatusIs(c.code, HasSubstr(c.substring)));
  }
  EXPECT_THAT(Decoder::FromJson(nullptr), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                   HasSubstr("decoder: null is not supported")));
}

}  // namespace
}  // namespace df11::runtime::tokenizer_internal
