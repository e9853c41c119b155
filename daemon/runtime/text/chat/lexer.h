// Splits a chat template into tokens exactly as jinja2's lexer does with the settings
// transformers uses (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False):
//
//   - "\r\n" and "\r" become "\n", and one trailing newline of the source is dropped;
//   - text outside tags becomes kData tokens; {{ }} and {% %} tags become kVariableBegin /
//     kBlockBegin, the expression tokens, then kVariableEnd / kBlockEnd; {# #} comments vanish;
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag and `-%}`, `-}}`, `-#}` all
//     whitespace after it;
//   - lstrip_blocks: spaces and tabs between the start of a line and a `{%` or `{#` are removed
//     (not before `{{`, and not for `{%+`);
//   - trim_blocks: the first newline after `%}` or `#}` is removed (not after `+%}`).
//
// Inside a tag, an end marker counts only while brackets are balanced, so `{{ {'a': 1}}}` works.
// String literals are decoded as jinja2 does (Python's unicode-escape). Identifiers are ASCII.
// A template ending right after `{#` ends there, as in jinja2.
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_LEXER_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace df11::runtime::chat {

enum class TokenType {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,   // `text` holds the decoded value
  kInteger,  // `int_value`
  kFloat,    // `float_value`
  kOperator,
  kEnd,  // end of the template
};

struct Token {
  TokenType type = TokenType::kEnd;
  std::string text;  // data, name, operator or decoded string
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// The tokens of `source` (valid UTF-8), ending with one kEnd token. kInvalidArgument for a
// syntax error ("chat template line 3: unexpected end of template inside a tag"),
// kFailedPrecondition for what jinja2 accepts but this lexer does not ({% raw %}, \N{...}
// escapes, lone surrogate escapes, integers beyond int64, non-ASCII identifiers).
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

// "chat template line N: " + message, the prefix of every positioned error.
std::string AtLine(int line, std::string_view message);

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_LEXER_H_
