// The expression half of the chat-template parser: jinja2's expression grammar (parse_tuple,
// parse_expression and below in jinja2/parser.py), on a TokenStream shared with the statement
// parser (parser.h, which documents the precedence and the limits).
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_EXPRESSION_PARSER_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_EXPRESSION_PARSER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/runtime/text/chat/ast.h"
#include "daemon/runtime/text/chat/token_stream.h"

namespace df11::runtime::chat {

inline constexpr int kMaxExpressionDepth = 100;

class ExpressionParser {
 public:
  using ExprPtr = std::unique_ptr<Expr>;

  explicit ExpressionParser(TokenStream& tokens) : ts_(tokens) {}

  // Expressions separated by commas (a tuple when there is a comma), up to the end of the tag,
  // a `)` or a name in `extra_end`. Without `with_condexpr`, `a if b else c` is not parsed at
  // the top level (jinja2 parses if and for conditions that way). `explicit_parentheses` allows
  // the empty tuple `()`.
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr,
                                     const std::vector<std::string_view>& extra_end = {},
                                     bool explicit_parentheses = false);
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr = true);

 private:
  // A node over `children`, with its depth checked.
  absl::StatusOr<ExprPtr> Node(ExprKind kind, int line, std::vector<ExprPtr> children);
  absl::StatusOr<ExprPtr> Node(ExprKind kind, int line, ExprPtr a, ExprPtr b = nullptr);
  ExprPtr Literal(Value value, int line);
  absl::StatusOr<ExprPtr> ParseCondition();
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> Binary(std::string op, int line, ExprPtr left, ExprPtr right);
  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::Status CheckRecursion() const;
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParseList();
  absl::StatusOr<ExprPtr> ParseDict();
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  absl::Status CheckRecursionAt(int line) const;
  // One subscript: an expression or a slice start:stop:step with any part omitted. A slice is
  // returned as a kSlice node whose children[0] (the sliced object) is still null.
  absl::StatusOr<ExprPtr> ParseSubscribed();
  // (args, name=kwargs) into `node`'s children (after any already there) and kwargs.
  absl::Status ParseCallArgs(Expr& node);
  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee);
  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr operand);
  absl::StatusOr<ExprPtr> ParseTest(ExprPtr operand);

  TokenStream& ts_;
  int recursion_ = 0;
};

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_EXPRESSION_PARSER_H_
