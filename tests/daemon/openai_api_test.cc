// The OpenAI API's request parsing and response shapes (daemon/server/openai_api.h), without a
// server: every parameter's mapping onto the wire API's GenerateRequest, the errors naming their
// parameter, and the exact JSON of responses and SSE events.
#include "daemon/server/openai_api.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_data_dir.h"

namespace df11::server::openai {
namespace {

using ::df11::testing::StatusIs;
using ::testing::HasSubstr;
using Json = nlohmann::json;

TEST(OpenAiRequestTest, ChatParametersMapOntoTheGenerateRequest) {
  DF11_ASSERT_OK_AND_ASSIGN(Request r, ParseRequest(R"({
      "model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                                              {"type": "text", "text": "there"}]}],
      "max_tokens": 5, "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9,
      "top_k": -1, "min_p": 0.1, "presence_penalty": 0.2, "frequency_penalty": -0.3,
      "repetition_penalty": 1.1, "seed": 42, "stop": "END", "stop_token_ids": [3],
      "ignore_eos": true, "n": 1, "stream": true, "stream_options": {"include_usage": true},
      "logprobs": true, "top_logprobs": 4, "user": "someone",
      "chat_template_kwargs": {"enable_thinking": true}, "response_format": {"type": "text"}})",
                                                    /*chat=*/true));
  const df11::v1::GenerateRequest& g = r.generate;
  EXPECT_TRUE(r.chat);
  EXPECT_EQ(g.model(), "m");
  ASSERT_EQ(g.chat().messages_size(), 2);
  EXPECT_EQ(g.chat().messages(1).role(), "user");
  EXPECT_EQ(g.chat().messages(1).content(), "Hi there");
  EXPECT_TRUE(g.chat().add_generation_prompt());
  EXPECT_EQ(g.max_tokens(), 7);  // max_completion_tokens wins
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  EXPECT_EQ(g.sampling().top_k(), 0);  // -1: off
  EXPECT_FLOAT_EQ(g.sampling().min_p(), 0.1f);
  EXPECT_FLOAT_EQ(g.sampling().presence_penalty(), 0.2f);
  EXPECT_FLOAT_EQ(g.sampling().frequency_penalty(), -0.3f);
  EXPECT_FLOAT_EQ(g.sampling().repetition_penalty(), 1.1f);
  EXPECT_EQ(g.sampling().seed(), 42u);
  EXPECT_THAT(g.stop(), ::testing::ElementsAre("END"));
  EXPECT_THAT(g.stop_token_ids(), ::testing::ElementsAre(3));
  EXPECT_TRUE(g.ignore_eos());
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_TRUE(g.logprobs());
  EXPECT_EQ(g.top_logprobs(), 4);
  EXPECT_TRUE(g.enable_thinking());
}

TEST(OpenAiRequestTest, UnsetParametersStayUnset) {
  DF11_ASSERT_OK_AND_ASSIGN(
      Request r, ParseRequest(R"({"model": "m", "prompt": "x", "temperature": null})", false));
  EXPECT_FALSE(r.generate.sampling().has_temperature());
  EXPECT_FALSE(r.generate.sampling().has_seed());
  EXPECT_EQ(r.generate.max_tokens(), 0);  // the configured default
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
}

TEST(OpenAiRequestTest, PromptsAreAStringTokenIdsOrAListOfOne) {
  DF11_ASSERT_OK_AND_ASSIGN(Request text,
                            ParseRequest(R"({"model": "m", "prompt": ["a b"]})", false));
  EXPECT_EQ(text.generate.text(), "a b");
  DF11_ASSERT_OK_AND_ASSIGN(Request ids,
                            ParseRequest(R"({"model": "m", "prompt": [1, 2, 3]})", false));
  EXPECT_THAT(ids.generate.token_ids().ids(), ::testing::ElementsAre(1, 2, 3));
  DF11_ASSERT_OK_AND_ASSIGN(Request nested,
                            ParseRequest(R"({"model": "m", "prompt": [[4, 5]]})", false));
  EXPECT_THAT(nested.generate.token_ids().ids(), ::testing::ElementsAre(4, 5));
  // Completions' logprobs is the number of top tokens.
  DF11_ASSERT_OK_AND_ASSIGN(Request lp,
                            ParseRequest(R"({"model": "m", "prompt": "x", "logprobs": 3})", false));
  EXPECT_TRUE(lp.logprobs);
  EXPECT_EQ(lp.generate.top_logprobs(), 3);
}

TEST(OpenAiRequestTest, BadRequestsNameTheirParameter) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prompt": "x"})", "model"},
      {R"({"model": "m"})", "prompt"},
      {R"({"model": "m", "prompt": ["a", "b"]})", "prompt"},
      {R"({"model": "m", "prompt": [1, -2]})", "prompt"},
      {R"({"model": "m", "prompt": "x", "n": 2})", "n"},
      {R"({"model": "m", "prompt": "x", "best_of": 3})", "best_of"},
      {R"({"model": "m", "prompt": "x", "echo": true})", "echo"},
      {R"({"model": "m", "prompt": "x", "suffix": "y"})", "suffix"},
      {R"({"model": "m", "prompt": "x", "logit_bias": {"1": 5}})", "logit_bias"},
      {R"({"model": "m", "prompt": "x", "temperature": "hot"})", "temperature"},
      {R"({"model": "m", "prompt": "x", "max_tokens": 0})", "max_tokens"},
      {R"({"model": "m", "prompt": "x", "max_tokens": 1.5})", "max_tokens"},
      {R"({"model": "m", "prompt": "x", "stop": 3})", "stop"},
      {R"({"model": "m", "prompt": [2147483648]})", "prompt"},
      {R"({"model": "m", "prompt": "x", "stop_token_ids": [1099511627776]})", "stop_token_ids"},
      {R"({"model": "m", "prompt": "x", "stop_token_ids": [-1]})", "stop_token_ids"},
      {R"({"model": "m", "prompt": "x", "stop_token_ids": [1.5]})", "stop_token_ids"},
      {R"({"model": "m", "prompt": "x", "top_k": -2})", "top_k"},
      {R"({"model": "m", "prompt": "x", "logprobs": 9})", "logprobs"},
      {R"({"model": "m", "prompt": "x", "stream_options": {"include_usage": true}})",
       "stream_options"},
  };
  for (const auto& [body, param] : cases) {
    SCOPED_TRACE(body);
    absl::StatusOr<Request> r = ParseRequest(body, false);
    EXPECT_THAT(r.status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(param)));
    EXPECT_EQ(ParamOf(r.status()), param);
  }
  const std::pair<const char*, const char*> chat_cases[] = {
      {R"({"model": "m", "messages": []})", "messages"},
      {R"({"model": "m", "messages": [{"content": "x"}]})", "messages[0].role"},
      {R"({"model": "m", "messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0]"},
      // Found by generate_request_fuzz: a part's type that is not a string threw.
      {R"({"model": "m", "messages": [{"role": "user", "content": [{"type": -0.5, "text": "x"}]}]})",
       "messages[0].content[0]"},
      {R"({"model": "m", "messages": [{"role": "user", "content": [{"type": null, "text": "x"}]}]})",
       "messages[0].content[0]"},
      {R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": 7}]}]})",
       "messages[0].content[0]"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
       "top_logprobs"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{}]})", "tools"},
  };
  for (const auto& [body, param] : chat_cases) {
    SCOPED_TRACE(body);
    absl::StatusOr<Request> r = ParseRequest(body, true);
    EXPECT_EQ(ParamOf(r.status()), param) << r.status();
  }
  // Token ids are range-checked as the int32 they become, never truncated.
  EXPECT_THAT(
      ParseRequest(R"({"model": "m", "prompt": "x", "stop_token_ids": [1099511627776]})", false)
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("from 0 to 2147483647 (got 1099511627776)")));
  DF11_ASSERT_OK_AND_ASSIGN(
      Request largest,
      ParseRequest(R"({"model": "m", "prompt": [2147483647], "stop_token_ids": [2147483647]})",
                   false));
  EXPECT_THAT(largest.generate.stop_token_ids(), ::testing::ElementsAre(2147483647));
  EXPECT_THAT(ParseRequest("{not json", false).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not JSON")));
}

TEST(OpenAiResponseTest, ErrorsHaveOpenAisShape) {
  const Json e = Json::parse(ErrorBody(absl::NotFoundError("model \"x\" is not loaded")));
  EXPECT_EQ(e, Json::parse(R"({"error": {"message": "model \"x\" is not loaded",
      "type": "invalid_request_error", "param": null, "code": "model_not_found"}})"));
  const Json full = Json::parse(ErrorBody(absl::ResourceExhaustedError("queue full")));
  EXPECT_EQ(full["error"]["type"], "rate_limit_error");
  EXPECT_EQ(full["error"]["code"], "resource_exhausted");
  const absl::Status bad = ParseRequest(R"({"model": "m", "prompt": "x", "n": 2})", false).status();
  EXPECT_EQ(Json::parse(ErrorBody(bad))["error"]["param"], "n");
}

class ResponderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = *runtime::Tokenizer::FromFile(
        (::df11::testing::TestDataDir("tokenizer") / "qwen2_like" / "tokenizer.json").string());
  }
  runtime::GeneratedToken Token(int32_t id, std::string text, float logprob) {
    runtime::GeneratedToken t;
    t.id = id;
    t.text = std::move(text);
    t.logprob = logprob;
    return t;
  }
  std::optional<runtime::Tokenizer> tokenizer_;
};

// "data: {...}\n\n" events, parsed.
std::vector<Json> Events(const std::string& sse) {
  std::vector<Json> out;
  size_t at = 0;
  while ((at = sse.find("data: ", at)) != std::string::npos) {
    const size_t end = sse.find("\n\n", at);
    const std::string data = sse.substr(at + 6, end - at - 6);
    out.push_back(data == "[DONE]" ? Json("[DONE]") : Json::parse(data));
    at = end + 2;
  }
  return out;
}

TEST_F(ResponderTest, ChatStreamSendsTheRoleThenDeltasThenTheFinishUsageAndDone) {
  Request r = *ParseRequest(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
      "stream": true, "stream_options": {"include_usage": true}})",
                            true);
  Responder out(r, *tokenizer_, 1700000000);
  std::vector<Json> events = Events(out.Chunk({Token(1, "Hel", -0.5f), Token(2, "lo", -1.0f)}));
  const std::vector<Json> last = Events(out.FinishStream(runtime::FinishReason::kLength, 3, 2));
  events.insert(events.end(), last.begin(), last.end());
  ASSERT_EQ(events.size(), 5);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["id"], out.id());
  EXPECT_EQ(events[0]["created"], 1700000000);
  EXPECT_EQ(events[0]["choices"][0]["delta"],
            Json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_EQ(events[1]["choices"][0]["delta"]["content"], "Hello");
  EXPECT_TRUE(events[1]["usage"].is_null());
  EXPECT_EQ(events[2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events[2]["choices"][0]["delta"], Json::object());
  EXPECT_EQ(events[3]["choices"], Json::array());
  EXPECT_EQ(events[3]["usage"],
            Json::parse(R"({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})"));
  EXPECT_EQ(events[4], "[DONE]");
  EXPECT_THAT(out.id(), ::testing::StartsWith("chatcmpl-"));
}

TEST_F(ResponderTest, CompletionBodyWithLogprobs) {
  Request r = *ParseRequest(R"({"model": "m", "prompt": "x", "logprobs": 1})", false);
  Responder out(r, *tokenizer_, 5);
  runtime::GeneratedToken a = Token(1, "ab", -0.25f);
  a.top_logprobs[0] = {1, -0.25f};
  a.top_logprobs_count = 1;
  out.Add({a, Token(2, "c", -2.0f)});
  const Json body = Json::parse(out.Body(runtime::FinishReason::kStop, 4, 2));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "abc");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  const Json& lp = body["choices"][0]["logprobs"];
  EXPECT_EQ(lp["token_logprobs"], Json::parse("[-0.25, -2.0]"));
  EXPECT_EQ(lp["text_offset"], Json::parse("[0, 2]"));
  EXPECT_EQ(lp["top_logprobs"][0].size(), 1);
  EXPECT_EQ(lp["top_logprobs"][1], Json::object());
  EXPECT_EQ(body["usage"]["total_tokens"], 6);
}

}  // namespace
}  // namespace df11::server::openai
