// Chat-template tests. The parity tests replay tests/data/chat/goldens.json, made by
// tools/make_chat_template_goldens.py with transformers' apply_chat_template: the verbatim
// templates of Llama-3.1/3.2/3.3, Qwen2.5/Qwen3, Gemma 2/3, Mistral Nemo / Small 3.2 and Phi-4
// (tests/data/chat/README.md says where each copy comes from) over many conversations, plus one
// small template per Jinja construct. Every rendered text must match byte for byte, and every
// error golden must fail the same way (raise_exception with exactly its message). To add a case,
// edit that script and re-run it; this file needs no change (a new template file also goes into
// GoldenSetTest's list).
//
// The unit tests below pin each construct with literal expected output (checked against jinja2
// 3.1.6 when written), the errors for what is unsupported, the limits, and FromModelDir.
#include "daemon/runtime/text/chat/chat_template.h"

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
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

namespace fs = std::filesystem;
using ::df11::testing::StatusIs;
using ::testing::EndsWith;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::ordered_json;

std::string DataDir() { return ::df11::testing::TestDataDir("chat").string(); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// goldens.json; {"cases": []} if it is missing or unreadable, which GoldenSetTest reports.
const Json& Goldens() {
  static const Json* const goldens = [] {
    Json parsed = Json::parse(ReadFile(DataDir() + "/goldens.json"), nullptr,
                              /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !parsed.contains("cases")) parsed = {{"cases", Json::array()}};
    return new Json(std::move(parsed));
  }();
  return *goldens;
}

const Json& OneMessage() {
  static const Json* const messages =
      new Json(Json::parse(R"([{"role": "user", "content": "hi"}])"));
  return *messages;
}

// Renders `source` the way the snippet goldens do: one user message, no generation prompt, the
// variables of `context` (a JSON object).
absl::StatusOr<std::string> RenderSnippet(const std::string& source,
                                          const std::string& context = "{}") {
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource(source, "<s>", "</s>");
  if (!tmpl.ok()) return tmpl.status();
  return tmpl->Render(OneMessage(), /*add_generation_prompt=*/false, Json::parse(context));
}

// EXPECT_EQ on the rendered text, with the status in the failure message.
void ExpectRender(const std::string& source, const std::string& context,
                  const std::string& expected) {
  absl::StatusOr<std::string> text = RenderSnippet(source, context);
  ASSERT_TRUE(text.ok()) << source << "\n" << text.status();
  EXPECT_EQ(*text, expected) << source;
}

// ---- Goldens ------------------------------------------------------------------------------

std::vector<std::string> GoldenNames() {
  std::vector<std::string> names;
  for (const Json& c : Goldens()["cases"]) names.push_back(c["name"].get<std::string>());
  return names;
}

const Json& GoldenCase(const std::string& name) {
  for (const Json& c : Goldens()["cases"]) {
    if (c["name"] == name) return c;
  }
  static const Json* const none = new Json();
  return *none;
}

std::optional<std::string> OptionalString(const Json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<std::string>();
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, MatchesTransformers) {
  const Json& c = GoldenCase(GetParam());
  ASSERT_TRUE(c.is_object());
  const std::string source = c.contains("source")
                                 ? c["source"].get<std::string>()
                                 : ReadFile(DataDir() + "/" + c["template"].get<std::string>());
  ASSERT_FALSE(source.empty());
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource(
      source, OptionalString(c["bos_token"]), OptionalString(c["eos_token"]));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  absl::StatusOr<std::string> text =
      tmpl->Render(c["messages"], c["add_generation_prompt"].get<bool>(), c["extra"]);
  if (c.contains("expected")) {
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, c["expected"].get<std::string>());
    return;
  }
  const std::string type = c["error"]["type"].get<std::string>();
  const std::string message = c["error"]["message"].get<std::string>();
  if (type == "TemplateError") {
    // raise_exception(msg): the message is exactly msg.
    EXPECT_THAT(text, StatusIs(absl::StatusCode::kInvalidArgument, Eq(message)));
  } else {
    EXPECT_THAT(text,
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::AllOf(StartsWith("chat template line "), HasSubstr(message))))
        << type;
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, GoldenTest, ::testing::ValuesIn(GoldenNames()),
                         [](const auto& info) { return info.param; });

TEST(GoldenSetTest, CoversEveryTemplateAndBothOutcomes) {
  std::set<std::string> templates;
  int errors = 0, renders = 0;
  for (const Json& c : Goldens()["cases"]) {
    if (c.contains("template")) templates.insert(c["template"].get<std::string>());
    (c.contains("error") ? errors : renders)++;
  }
  EXPECT_THAT(
      templates,
      ::testing::ElementsAre(
          "templates/Mistral-Small-3.2-24B-Instruct-2506.jinja",
          "templates/Qwen-Qwen2.5-7B-Instruct.jinja", "templates/Qwen-Qwen3-0.6B.jinja",
          "templates/google-gemma-2-2b-it.jinja", "templates/google-gemma-3-4b-it.jinja",
          "templates/meta-llama-Llama-3.1-8B-Instruct.jinja",
          "templates/meta-llama-Llama-3.2-3B-Instruct.jinja",
          "templates/meta-llama-Llama-3.3-70B-Instruct.jinja", "templates/microsoft-phi-4.jinja",
          "templates/mistralai-Mistral-Nemo-Instruct-2407.jinja"));
  EXPECT_GE(renders, 100);
  EXPECT_GE(errors, 10);
}

// ---- Whitespace control -------------------------------------------------------------------

TEST(ChatTemplateSyntaxTest, TrimBlocksDropsTheNewlineAfterABlockTag) {
  ExpectRender(R"j({% if true %}
A
{% endif %}
B
)j",
               "{}", "A\nB");
}

TEST(ChatTemplateSyntaxTest, LstripBlocksRemovesIndentBeforeBlockTagsOnly) {
  ExpectRender("  {% if true %}\n  x\n  {% endif %}\ny", "{}", "  x\ny");
  // Not before {{ }}, and not when the tag follows text on its line.
  ExpectRender("  {{ 'v' }}\n  {% if true %}t{% endif %}", "{}", "  v\nt");
  ExpectRender("text {% if true %}\nx{% endif %}", "{}", "text x");
}

TEST(ChatTemplateSyntaxTest, MinusStripsAllWhitespaceOnThatSide) {
  ExpectRender("a  \n  {%- if true -%}  \n  b  \n  {%- endif -%}  \n  c", "{}", "abc");
  ExpectRender("a \n {{- 'x' -}} \n b {{ 'y' }} c", "{}", "axb y c");
}

TEST(ChatTemplateSyntaxTest, PlusKeepsWhitespace) {
  ExpectRender("  {%+ if true %}x{% endif +%}\ny", "{}", "  x\ny");
}

TEST(ChatTemplateSyntaxTest, CommentsVanishWithTheirWhitespaceRules) {
  ExpectRender("a\n  {# comment #}\nb {#- strip -#}   c\n{# last #}", "{}", "a\nbc\n");
}

TEST(ChatTemplateSyntaxTest, NewlinesAreNormalizedAndOneTrailingNewlineDropped) {
  ExpectRender("a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", "{}", "a\nb\n");
  ExpectRender("x\n\n", "{}", "x\n");
}

// ---- Expressions --------------------------------------------------------------------------

TEST(ChatTemplateExpressionTest, FiltersBindTighterThanArithmetic) {
  ExpectRender("{{ '  x  ' | trim + '|' }}", "{}", "x|");
  ExpectRender("{{ m | trim + '<|eot_id|>' }}", R"({"m": " hi \n"})", "hi<|eot_id|>");
  ExpectRender("{{ -3 | abs }}", "{}", "3");
  ExpectRender("{{ [1, 2] | length + 1 }}", "{}", "3");
}

TEST(ChatTemplateExpressionTest, ArithmeticFollowsPython) {
  ExpectRender("{{ 1 + 2 * 3 ** 2 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ (1 + 2) * 3 }}", "{}",
               "19 64 4 9");
  ExpectRender("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }}", "{}",
               "3 -4 1 2 3.5 2.0");
  ExpectRender("{{ 'ab' * 2 }} {{ [1] * 2 + [3] }} {{ 0.1 + 0.2 }}", "{}",
               "abab [1, 1, 3] 0.30000000000000004");
}

TEST(ChatTemplateExpressionTest, TildeConcatenatesStrAndBindsTighterThanPlus) {
  ExpectRender("{{ 'a' ~ 1 ~ none ~ true ~ 1.5 ~ [1] ~ missing }}", "{}", "a1NoneTrue1.5[1]");
  // 'a' ~ 1 + 2 is ('a' ~ 1) + 2: a str plus an int.
  EXPECT_THAT(RenderSnippet("{{ 'a' ~ 1 + 2 }}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("can only concatenate str (not \"int\") to str")));
}

TEST(ChatTemplateExpressionTest, ComparisonsChainAndLogicReturnOperands) {
  ExpectRender("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ [1, 2] == (1, 2) }}", "{}",
               "True False True False");
  ExpectRender("{{ none or 'x' }} {{ 0 and 1 }} {{ not 1 }} {{ 'a' and 'b' }}", "{}",
               "x 0 False b");
  ExpectRender("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in d }} {{ 3 not in [1] }}",
               R"({"d": {"k": 1}})", "True True True True");
}

TEST(ChatTemplateExpressionTest, InlineIfWithoutElseIsUndefined) {
  ExpectRender("[{{ 'a' if false }}] {{ ('a' if false) is defined }} {{ 'x' if 0 else 'y' }}", "{}",
               "[] False y");
}

TEST(ChatTemplateExpressionTest, SlicesAndNegativeIndices) {
  const std::string context = R"({"l": [1, 2, 3, 4], "s": "añb😀"})";
  ExpectRender("{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-1] }} {{ l[5:] }}",
               context, "[2, 3, 4] [1, 2, 3] [4, 3, 2, 1] [1, 3] 4 []");
  ExpectRender("{{ s[::-1] }} {{ s[1] }} {{ s[-1] }} {{ s | length }}", context, "😀bña ñ 😀 4");
  EXPECT_THAT(RenderSnippet("{{ l[::0] }}", context),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("slice step cannot be zero")));
}

TEST(ChatTemplateExpressionTest, AttributeAccessFallsBackToKeys) {
  const std::string context = R"({"m": {"role": "user", "items": "k"}})";
  ExpectRender("{{ m.role }} {{ m['role'] }} {{ m['items'] }} {{ m.get('role') }}", context,
               "user user k user");
  // As in Python, m.items is the dict method, not the key.
  ExpectRender("{% for k, v in m.items() %}{{ k }}={{ v }};{% endfor %}", context,
               "role=user;items=k;");
}

TEST(ChatTemplateExpressionTest, LiteralsAndPythonPrinting) {
  ExpectRender("{{ none }} {{ True }} {{ 1.0 }} {{ 1e16 }} {{ 1e-5 }} {{ 0x1F }} {{ 1_000 }}", "{}",
               "None True 1.0 1e+16 1e-05 31 1000");
  ExpectRender(R"j({{ [1, 'a', none, {'k': "it's"}] }} {{ (1,) }})j", "{}",
               R"j([1, 'a', None, {'k': "it's"}] (1,))j");
  ExpectRender(R"j({{ 'a\tb\u00e9\x41\101\q' }})j", "{}", "a\tbéAA\\q");
}

// ---- tojson -------------------------------------------------------------------------------

TEST(ChatTemplateToJsonTest, MatchesJsonDumpsWithoutHtmlEscaping) {
  const std::string context = R"({"d": {"z": [1, {"y": null}], "a": true, "m": "ünï <&>"}})";
  ExpectRender("{{ d | tojson }}", context,
               R"({"z": [1, {"y": null}], "a": true, "m": "ünï <&>"})");
  ExpectRender("{{ d | tojson(indent=2) }}", context,
               "{\n  \"z\": [\n    1,\n    {\n      \"y\": null\n    }\n  ],\n  \"a\": true,\n"
               "  \"m\": \"ünï <&>\"\n}");
  ExpectRender("{{ d | tojson(sort_keys=true) }}", context,
               R"({"a": true, "m": "ünï <&>", "z": [1, {"y": null}]})");
  ExpectRender(R"j({{ 'q"\\ \n\t\x01😀' | tojson }} {{ 'é😀' | tojson(ensure_ascii=true) }})j", "{}",
               R"j("q\"\\ \n\t\u0001😀" "\u00e9\ud83d\ude00")j");
  ExpectRender("{{ [1.0, 1e20, 0.1, 3, none, false] | tojson }}", "{}",
               "[1.0, 1e+20, 0.1, 3, null, false]");
}

// ---- Undefined ----------------------------------------------------------------------------

TEST(ChatTemplateUndefinedTest, UndefinedIsFalsyEmptyAndTestable) {
  ExpectRender(
      "[{{ u }}]{% if not u %}falsy{% endif %} {{ u | length }} {{ u is defined }} "
      "{{ u is undefined }} {{ u | default('d') }} {{ m.reasoning_content is defined }} "
      "{{ m.reasoning_content is not defined }}{% for x in u %}x{% endfor %}",
      R"({"m": {"content": "c"}})", "[]falsy 0 False True d False True");
}

TEST(ChatTemplateUndefinedTest, UsingAnUndefinedRaisesLikeJinja) {
  // Jinja's default Undefined: an attribute of an undefined value raises.
  EXPECT_THAT(RenderSnippet("{{ u.v }}"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   Eq("chat template line 1: 'u' is undefined")));
  EXPECT_THAT(RenderSnippet("\n{{ m.content.strip() }}", R"({"m": {}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("chat template line 2: 'dict object' has no attribute 'content'")));
  EXPECT_THAT(RenderSnippet("{{ u + 1 }}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'u' is undefined")));
}

// ---- Loops, scoping, namespace ------------------------------------------------------------

TEST(ChatTemplateLoopTest, LoopVariables) {
  ExpectRender(
      "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
      "{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}]"
      "{{ loop.cycle('o', 'e') }};{% endfor %}",
      R"({"l": ["a", "b", "c"]})",
      "1032TrueFalse3[|b]o;2121FalseFalse3[a|c]e;3210FalseTrue3[b|]o;");
}

TEST(ChatTemplateLoopTest, FilterElseAndUnpacking) {
  ExpectRender(
      "{% for x in l if x > 1 %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% endfor %}"
      "{% for x in [] %}no{% else %}empty{% endfor %} "
      "{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}",
      R"({"l": [1, 2, 3], "d": {"b": 1, "a": [2]}})", "1/2:2 2/2:3 empty b=1;a=[2];");
}

TEST(ChatTemplateLoopTest, BreakAndContinue) {
  ExpectRender(
      "{% for x in l %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}"
      "{% endif %}{{ x }}{% endfor %}",
      R"({"l": [1, 2, 3, 4, 5]})", "13");
}

TEST(ChatTemplateLoopTest, SetInsideALoopIsLocalToTheIteration) {
  ExpectRender(
      "{% set x = 'outer' %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}({{ x }}){% endfor %}"
      "<{{ x }}>{% if true %}{% set y = 3 %}{% endif %}{{ y }}",
      "{}", "[outer](1)[outer](2)<outer>3");
}

TEST(ChatTemplateLoopTest, NamespaceCarriesStateOutOfLoops) {
  ExpectRender(
      "{% set ns = namespace(count=0, last=none) %}{% for m in l %}{% if m > 1 %}"
      "{% set ns.count = ns.count + 1 %}{% set ns.last = m %}{% endif %}{% endfor %}"
      "{{ ns.count }} {{ ns.last }} {{ ns.missing is defined }}",
      R"({"l": [1, 2, 3]})", "2 3 False");
  EXPECT_THAT(RenderSnippet("{% set x = 1 %}{% set x.a = 2 %}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot assign attribute on non-namespace object")));
}

TEST(ChatTemplateLoopTest, SetBlockCapturesItsOutput) {
  ExpectRender("{% set t %}x{{ 1 + 1 }}y{% endset %}[{{ t }}]", "{}", "[x2y]");
}

// ---- String methods and filters -----------------------------------------------------------

TEST(ChatTemplateMethodTest, StringMethodsFollowPython) {
  ExpectRender(
      "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'xxhixx'.strip('x') }} "
      "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ '-'.join(['a', 'b']) }}",
      "{}", "['a', 'b', '', 'c'] ['a', 'b'] hi True True a-b");
  // Qwen3's reasoning extraction.
  ExpectRender(
      "{{ c.split('</think>')[-1].lstrip('\\n') }}|"
      "{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
      R"({"c": "<think>\nplan\n</think>\n\nanswer"})", "answer|plan");
}

TEST(ChatTemplateMethodTest, CaseFiltersUseFullUnicodeMappings) {
  ExpectRender(
      "{{ 'straße' | upper }} {{ 'ÀÉÎ' | lower }} {{ 'hELLO wORLD' | capitalize }} "
      "{{ 'hello-world foo(bar)' | title }} {{ 'ΣΑΣ'.lower() }}",
      "{}", "STRASSE àéî Hello world Hello-World Foo(Bar) σας");
}

TEST(ChatTemplateMethodTest, SelectRejectAndMap) {
  ExpectRender(
      "{{ [1, 2, 3, 4] | select('odd') | list }} {{ ['a', 'b', 'c'] | reject('equalto', 'b') | "
      "join }} {{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | "
      "join(',') }} {{ names | reject('equalto', 'code_interpreter') | join(', ') }}",
      R"({"ms": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"},
                 {"role": "user", "content": "c"}],
          "names": ["brave_search", "code_interpreter", "wolfram_alpha"]})",
      "[1, 3] ac a,c brave_search, wolfram_alpha");
}

// ---- Errors -------------------------------------------------------------------------------

TEST(ChatTemplateErrorTest, UnsupportedTagsAreFailedPreconditionWithTheLine) {
  const char* const kTags[] = {"macro m()",       "call m()",        "filter upper",
                               "include 'x'",     "import 'x' as y", "from 'x' import y",
                               "extends 'x'",     "block b",         "with a = 1",
                               "autoescape true", "print 1"};
  for (const char* tag : kTags) {
    const std::string name = std::string(tag).substr(0, std::string(tag).find(' '));
    EXPECT_THAT(ChatTemplate::FromSource(std::string("a\n\n{% ") + tag + " %}", "", ""),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         Eq("chat template line 3: unsupported Jinja tag '" + name + "'")))
        << tag;
  }
  EXPECT_THAT(ChatTemplate::FromSource("x\n{% raw %}{{ y }}{% endraw %}", "", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       Eq("chat template line 2: unsupported Jinja tag 'raw'")));
}

TEST(ChatTemplateErrorTest, UnsupportedFiltersTestsAndSyntaxAreNamed) {
  EXPECT_THAT(ChatTemplate::FromSource("{{ x | wordcount }}", "", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       Eq("chat template line 1: unsupported Jinja filter 'wordcount'")));
  EXPECT_THAT(ChatTemplate::FromSource("\n{% if x is escaped %}{% endif %}", "", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       Eq("chat template line 2: unsupported Jinja test 'escaped'")));
  EXPECT_THAT(ChatTemplate::FromSource("{{ f(*args) }}", "", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("*args")));
  EXPECT_THAT(ChatTemplate::FromSource("{% for x in l recursive %}{% endfor %}", "", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("recursive")));
  EXPECT_THAT(ChatTemplate::FromSource("{{ 99999999999999999999 }}", "", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("beyond int64")));
}

TEST(ChatTemplateErrorTest, SyntaxErrorsAreInvalidArgumentWithTheLine) {
  EXPECT_THAT(ChatTemplate::FromSource("a\n{% if x %}\nb", "", ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("chat template line 3: unexpected end of template, expected 'elif' "
                          "or 'else' or 'endif'")));
  EXPECT_THAT(ChatTemplate::FromSource("{% endif %}", "", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown tag 'endif'")));
  EXPECT_THAT(ChatTemplate::FromSource("\n\n{{ 1 + }}", "", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("chat template line 3:")));
  EXPECT_THAT(ChatTemplate::FromSource("{{ 'abc }}", "", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unterminated string")));
  EXPECT_THAT(ChatTemplate::FromSource("{% break %}", "", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'break' outside")));
  EXPECT_THAT(ChatTemplate::FromSource("{# open", "", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("missing end of comment")));
  EXPECT_THAT(ChatTemplate::FromSource("{{ (1 }}", "", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("chat template line 1:")));
  EXPECT_THAT(ChatTemplate::FromSource("\xff", "", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("UTF-8")));
}

TEST(ChatTemplateErrorTest, UnsupportedRuntimeConstructsAreFailedPrecondition) {
  EXPECT_THAT(RenderSnippet("{{ 'x'.format(1) }}"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       Eq("chat template line 1: unsupported method str.format()")));
  EXPECT_THAT(RenderSnippet("{{ [1] | select('odd') }}"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("generator")));
  EXPECT_THAT(RenderSnippet("{{ 2 ** 64 }}"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("integer overflow")));
  EXPECT_THAT(RenderSnippet("{{ '99999999999999999999' | int }}"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("beyond int64")));
  EXPECT_THAT(RenderSnippet("{{ '%s' % 1 }}"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("formatting")));
  EXPECT_THAT(RenderSnippet("{{ cycler() }}"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("'cycler'")));
}

TEST(ChatTemplateErrorTest, RaiseExceptionReturnsExactlyItsMessage) {
  EXPECT_THAT(RenderSnippet("a\n{{ raise_exception('Bad role: ' ~ r) }}", R"({"r": "x"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq("Bad role: x")));
}

// ---- Limits -------------------------------------------------------------------------------

TEST(ChatTemplateLimitTest, OutputSizeIsBounded) {
  absl::StatusOr<ChatTemplate> tmpl =
      ChatTemplate::FromSource("{% for i in range(1000) %}0123456789{% endfor %}", "", "");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  ChatTemplate::Limits limits;
  limits.max_output_bytes = 5000;
  tmpl->set_limits(limits);
  EXPECT_THAT(tmpl->Render(OneMessage(), false),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("5000 bytes")));
  limits.max_output_bytes = 10000;
  tmpl->set_limits(limits);
  absl::StatusOr<std::string> text = tmpl->Render(OneMessage(), false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->size(), 10000u);
}

TEST(ChatTemplateLimitTest, StepsAreBounded) {
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "", "");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  ChatTemplate::Limits limits;
  limits.max_steps = 100000;
  tmpl->set_limits(limits);
  EXPECT_THAT(tmpl->Render(OneMessage(), false),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("100000 steps")));
}

TEST(ChatTemplateLimitTest, HugeStringsAreRefusedBeforeAllocation) {
  EXPECT_THAT(RenderSnippet("{{ 'x' * 10000000000 }}"),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("exceeds the limit")));
  EXPECT_THAT(RenderSnippet("{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                            "{% set ns.s = ns.s + ns.s %}{% endfor %}"),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(ChatTemplateLimitTest, NestingDepthIsBounded) {
  const std::string deep = std::string(500, '(') + "1" + std::string(500, ')');
  EXPECT_THAT(ChatTemplate::FromSource("{{ " + deep + " }}", "", ""),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("nested deeper")));
  std::string chain = "{{ 1";
  for (int i = 0; i < 500; ++i) chain += " + 1";
  EXPECT_THAT(ChatTemplate::FromSource(chain + " }}", "", ""),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("nested deeper")));
  std::string blocks;
  for (int i = 0; i < 200; ++i) blocks += "{% if true %}";
  EXPECT_THAT(ChatTemplate::FromSource(blocks, "", ""),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("blocks nested")));
  // Values: a message nested 200 deep.
  Json deep_value = "leaf";
  for (int i = 0; i < 200; ++i) deep_value = Json::array({deep_value});
  Json messages = Json::array({{{"role", "user"}, {"content", deep_value}}});
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource("x", "", "");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_THAT(tmpl->Render(messages, false),
              StatusIs(absl::StatusCode::kResourceExhausted, StartsWith("messages[0].content[0]")));
  // And one built in a loop.
  EXPECT_THAT(RenderSnippet("{% set ns = namespace(v=1) %}{% for i in range(300) %}"
                            "{% set ns.v = [ns.v] %}{% endfor %}"),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("nested deeper")));
}

// ---- Render inputs ------------------------------------------------------------------------

TEST(ChatTemplateRenderTest, MessagesAreNormalizedLikeTransformers) {
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource(
      "{% for m in messages %}{{ m | tojson }}\n{% endfor %}{{ tools }} {{ documents }} "
      "{{ bos_token }}{{ eos_token }} {{ add_generation_prompt }} {{ flag }}",
      "<s>", "</s>");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  const Json messages = Json::parse(R"([
      {"role": "user", "content": "a", "name": null},
      {"role": "assistant", "content": "b", "reasoning": "r"},
      {"role": "assistant", "content": "c", "thinking": "t1", "reasoning_content": "t2"}])");
  absl::StatusOr<std::string> text = tmpl->Render(messages, true, {{"flag", 1}});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text,
            "{\"role\": \"user\", \"content\": \"a\"}\n"
            "{\"thinking\": \"r\", \"role\": \"assistant\", \"content\": \"b\", \"reasoning\": "
            "\"r\", \"reasoning_content\": \"r\"}\n"
            "{\"thinking\": \"t1\", \"role\": \"assistant\", \"content\": \"c\", "
            "\"reasoning_content\": \"t2\"}\n"
            "None None <s></s> True 1");
}

TEST(ChatTemplateRenderTest, UndefinedSpecialTokensStayUndefined) {
  absl::StatusOr<ChatTemplate> tmpl =
      ChatTemplate::FromSource("{{ bos_token is defined }} {{ eos_token }}", std::nullopt, "e");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  absl::StatusOr<std::string> text = tmpl->Render(OneMessage(), false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "False e");
}

TEST(ChatTemplateRenderTest, BadInputsAreInvalidArgument) {
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource("x", "", "");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_THAT(tmpl->Render(Json::array(), false), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(tmpl->Render(Json::parse(R"(["hi"])"), false),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("messages[0]")));
  EXPECT_THAT(tmpl->Render(OneMessage(), false, {{"messages", 1}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"messages\"")));
  Json bad_utf8 = Json::array({{{"role", "user"}, {"content", "\xc3("}}});
  EXPECT_THAT(tmpl->Render(bad_utf8, false),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("messages[0].content: string is not valid UTF-8")));
}

// Today's date in local time, formatted by strftime.
std::string LocalDate(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm local;
  localtime_r(&now, &local);
  char buf[64];
  std::strftime(buf, sizeof(buf), format, &local);
  return std::string(buf);
}

TEST(ChatTemplateRenderTest, Llama32UsesTheLocalDateWithoutDateString) {
  const std::string source =
      ReadFile(DataDir() + "/templates/meta-llama-Llama-3.2-3B-Instruct.jinja");
  absl::StatusOr<ChatTemplate> tmpl =
      ChatTemplate::FromSource(source, "<|begin_of_text|>", "<|eot_id|>");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  const std::string before = LocalDate("%d %b %Y");
  absl::StatusOr<std::string> text = tmpl->Render(OneMessage(), true);
  const std::string after = LocalDate("%d %b %Y");
  ASSERT_TRUE(text.ok()) << text.status();
  const bool has_date = text->find("Today Date: " + before + "\n") != std::string::npos ||
                        text->find("Today Date: " + after + "\n") != std::string::npos;
  EXPECT_TRUE(has_date) << *text;
}

// The goldens always give Mistral Small 3.2 a system message, since its default one carries
// strftime_now("%Y-%m-%d"); this checks the default.
TEST(ChatTemplateRenderTest, MistralSmall32DefaultSystemPromptHasTheLocalDate) {
  const std::string source =
      ReadFile(DataDir() + "/templates/Mistral-Small-3.2-24B-Instruct-2506.jinja");
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource(source, "<s>", "</s>");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  const std::string before = LocalDate("%Y-%m-%d");
  absl::StatusOr<std::string> text = tmpl->Render(OneMessage(), true);
  const std::string after = LocalDate("%Y-%m-%d");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, StartsWith("<s>[SYSTEM_PROMPT]You are Mistral Small 3, a Large Language "
                                "Model (LLM) created by Mistral AI, a French startup "
                                "headquartered in Paris.\nYour knowledge base was last updated "
                                "on 2023-10-01. The current date is "));
  EXPECT_THAT(*text, EndsWith("provide the most accurate and helpful response. If "
                              "tools are not available, inform the user that you "
                              "cannot perform the requested action at the moment."
                              "[/SYSTEM_PROMPT][INST]hi[/INST]"));
  const bool has_date =
      text->find("The current date is " + before + ".\n\n") != std::string::npos ||
      text->find("The current date is " + after + ".\n\n") != std::string::npos;
  EXPECT_TRUE(has_date) << *text;
}

TEST(ChatTemplateRenderTest, ConcurrentRendersAgree) {
  const Json& c = GoldenCase("qwen3_multi_step_tools");
  ASSERT_TRUE(c.is_object());
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromSource(
      ReadFile(DataDir() + "/" + c["template"].get<std::string>()), std::nullopt, "<|im_end|>");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  std::vector<std::string> outputs(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < outputs.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        absl::StatusOr<std::string> text = tmpl->Render(c["messages"], true, c["extra"]);
        outputs[t] = text.ok() ? *text : text.status().ToString();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::string& out : outputs) EXPECT_EQ(out, c["expected"].get<std::string>());
}

// ---- FromModelDir -------------------------------------------------------------------------

class ModelDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("chat_template_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Render(const ChatTemplate& tmpl) {
    absl::StatusOr<std::string> text = tmpl.Render(OneMessage(), false);
    return text.ok() ? *text : text.status().ToString();
  }

  fs::path dir_;
};

TEST_F(ModelDirTest, JinjaFileWinsOverTokenizerConfig) {
  WriteFile(dir_ / "chat_template.jinja", "jinja:{{ bos_token }}{{ eos_token }}\n");
  WriteFile(dir_ / "tokenizer_config.json",
            R"({"chat_template": "config", "bos_token": {"content": "<s>", "lstrip": false},
                "eos_token": "</s>"})");
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromModelDir(dir_.string());
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  EXPECT_EQ(Render(*tmpl), "jinja:<s></s>");
}

TEST_F(ModelDirTest, TokenizerConfigString) {
  WriteFile(dir_ / "tokenizer_config.json",
            R"({"chat_template": "str:{{ messages[0].content }}{{ bos_token is defined }}",
                "bos_token": null, "eos_token": "<|im_end|>"})");
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromModelDir(dir_.string());
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  EXPECT_EQ(Render(*tmpl), "str:hiFalse");
}

TEST_F(ModelDirTest, TokenizerConfigListPicksToolUseOnlyWithTools) {
  WriteFile(dir_ / "tokenizer_config.json",
            R"({"chat_template": [{"name": "tool_use", "template": "tools"},
                                  {"name": "default", "template": "plain"}]})");
  absl::StatusOr<ChatTemplate> plain = ChatTemplate::FromModelDir(dir_.string());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(Render(*plain), "plain");
  absl::StatusOr<ChatTemplate> tools = ChatTemplate::FromModelDir(dir_.string(), true);
  ASSERT_TRUE(tools.ok()) << tools.status();
  EXPECT_EQ(Render(*tools), "tools");
}

TEST_F(ModelDirTest, TokenizerConfigListWithoutDefault) {
  WriteFile(dir_ / "tokenizer_config.json",
            R"({"chat_template": [{"name": "tool_use", "template": "tools"}]})");
  EXPECT_THAT(ChatTemplate::FromModelDir(dir_.string()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("\"default\"")));
  absl::StatusOr<ChatTemplate> tools = ChatTemplate::FromModelDir(dir_.string(), true);
  ASSERT_TRUE(tools.ok()) << tools.status();
  EXPECT_EQ(Render(*tools), "tools");
}

TEST_F(ModelDirTest, MissingTemplateIsNotFoundNamingTheFiles) {
  WriteFile(dir_ / "tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_THAT(
      ChatTemplate::FromModelDir(dir_.string()),
      StatusIs(absl::StatusCode::kNotFound, ::testing::AllOf(HasSubstr("chat_template.jinja"),
                                                             HasSubstr("tokenizer_config.json"))));
  fs::remove(dir_ / "tokenizer_config.json");
  EXPECT_THAT(ChatTemplate::FromModelDir(dir_.string()), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(ModelDirTest, MalformedConfigAndTemplateErrors) {
  WriteFile(dir_ / "tokenizer_config.json", "{not json");
  EXPECT_THAT(ChatTemplate::FromModelDir(dir_.string()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tokenizer_config.json")));
  WriteFile(dir_ / "tokenizer_config.json", R"({"chat_template": 5})");
  EXPECT_THAT(ChatTemplate::FromModelDir(dir_.string()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"chat_template\"")));
  WriteFile(dir_ / "tokenizer_config.json", R"({"chat_template": "x", "bos_token": 3})");
  EXPECT_THAT(ChatTemplate::FromModelDir(dir_.string()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"bos_token\"")));
  WriteFile(dir_ / "chat_template.jinja", "{% macro m() %}{% endmacro %}");
  EXPECT_THAT(ChatTemplate::FromModelDir(dir_.string()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"bos_token\"")));
  WriteFile(dir_ / "tokenizer_config.json", "{}");
  EXPECT_THAT(ChatTemplate::FromModelDir(dir_.string()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       ::testing::AllOf(HasSubstr("chat_template.jinja: chat template line 1"),
                                        HasSubstr("'macro'"))));
}

TEST_F(ModelDirTest, HubTemplateFromTokenizerConfigMatchesTheGolden) {
  const Json& c = GoldenCase("qwen25_tools");
  ASSERT_TRUE(c.is_object());
  Json config = Json::object();
  config["bos_token"] = nullptr;
  config["eos_token"] = "<|im_end|>";
  config["chat_template"] = ReadFile(DataDir() + "/" + c["template"].get<std::string>());
  WriteFile(dir_ / "tokenizer_config.json", config.dump());
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::FromModelDir(dir_.string(), true);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  absl::StatusOr<std::string> text = tmpl->Render(c["messages"], true, c["extra"]);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, c["expected"].get<std::string>());
}

}  // namespace
}  // namespace df11::runtime
