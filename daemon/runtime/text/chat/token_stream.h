// A cursor over a chat template's tokens (lexer.h) with the checks both parsers use; errors
// carry "chat template line N: ", kInvalidArgument for syntax, kFailedPrecondition for what is
// unsupported.
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_TOKEN_STREAM_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_TOKEN_STREAM_H_

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "daemon/runtime/text/chat/lexer.h"

namespace df11::runtime::chat {

// How jinja2 names a token in its syntax errors ("end of statement block '%}'", "'if'").
std::string Describe(const Token& token);
std::string DescribeType(TokenType type);

class TokenStream {
 public:
  // `tokens` ends with a kEnd token and outlives the stream.
  explicit TokenStream(const std::vector<Token>& tokens) : tokens_(tokens) {}

  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(std::string_view op) const {
    return Cur().type == TokenType::kOperator && Cur().text == op;
  }
  bool IsName(std::string_view name) const {
    return Cur().type == TokenType::kName && Cur().text == name;
  }
  bool IsAnyOp(std::initializer_list<std::string_view> ops) const {
    return std::any_of(ops.begin(), ops.end(), [&](std::string_view op) { return IsOp(op); });
  }

  // kInvalidArgument at the current token's line.
  absl::Status Error(std::string_view message) const;
  // kFailedPrecondition "unsupported <what>" at the current token's line.
  absl::Status Unsupported(std::string_view what) const;
  // "expected <what>, got <current token>".
  absl::Status Expected(std::string_view what) const;
  // Consumes the operator / name, or fails with Expected.
  absl::Status ExpectOp(std::string_view op);
  absl::Status ExpectName(std::string_view name);
  // Consumes the `%}` ending a tag (after an optional Python-style colon: {% else: %}).
  absl::Status ExpectBlockEnd();

  // jinja2's is_tuple_end: the end of a tag or of parentheses, or a name in `extra_end`.
  bool IsTupleEnd(const std::vector<std::string_view>& extra_end) const {
    if (Cur().type == TokenType::kVariableEnd || Cur().type == TokenType::kBlockEnd || IsOp(")")) {
      return true;
    }
    return Cur().type == TokenType::kName &&
           std::find(extra_end.begin(), extra_end.end(), Cur().text) != extra_end.end();
  }

 private:
  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
};

// Counts recursion depth while in scope.
class DepthGuard {
 public:
  explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
  ~DepthGuard() { --depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int& depth_;
};

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_TOKEN_STREAM_H_
