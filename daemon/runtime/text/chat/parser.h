// Builds the syntax tree (ast.h) of a chat template from its tokens, following jinja2's parser
// (jinja2/parser.py) for the supported subset, so that precedence and the places where a
// conditional expression is allowed match Jinja:
//
//   or < and < not < comparisons (chained, `in`, `not in`) < + - < ~ < * / // % < ** <
//   filters and tests (`x | f`, `x is t`) < unary - + < postfix (.attr, [i], [a:b:c], calls)
//
// (loosest first), so `content | trim + 'x'` trims only `content`, `-x | abs` is abs(-x),
// `a ~ b + c` is (a ~ b) + c and 2 ** 3 ** 2 is 64 (left-associative, as in Jinja).
//
// Tags: if/elif/else, for (with unpacking, an `if` filter and else), set (name, names unpacked,
// `ns.attr`, and the {% set x %}...{% endset %} block form), break, continue (inside a for body
// only) and transformers' {% generation %} block (rendered as its body). Everything else Jinja
// knows (macro, call, filter, include, import, from, extends, block, with, autoescape, print,
// raw) is kFailedPrecondition "chat template line N: unsupported Jinja tag 'macro'", as is any
// filter or test outside builtins.h's lists, `*args` / `**kwargs`, recursive loops and filters on
// a {% set %} block. Syntax errors are kInvalidArgument with the line. Expressions nested deeper
// than kMaxExpressionDepth or blocks deeper than kMaxBlockDepth are kResourceExhausted.
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_PARSER_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_PARSER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/runtime/text/chat/ast.h"
#include "daemon/runtime/text/chat/expression_parser.h"
#include "daemon/runtime/text/chat/lexer.h"

namespace df11::runtime::chat {

inline constexpr int kMaxBlockDepth = 50;

absl::StatusOr<std::unique_ptr<Program>> Parse(const std::vector<Token>& tokens);

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_PARSER_H_
