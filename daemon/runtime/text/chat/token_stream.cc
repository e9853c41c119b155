#include "daemon/runtime/text/chat/token_stream.h"

#include "daemon/runtime/text/chat/str_cat.h"

namespace df11::runtime::chat {

std::string Describe(const Token& token) {
  switch (token.type) {
    case TokenType::kData:
      return "template data";
    case TokenType::kVariableBegin:
      return "'{{'";
    case TokenType::kVariableEnd:
      return "end of print statement '}}'";
    case TokenType::kBlockBegin:
      return "'{%'";
    case TokenType::kBlockEnd:
      return "end of statement block '%}'";
    case TokenType::kString:
      return "string literal";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kEnd:
      return "end of template";
    case TokenType::kName:
    case TokenType::kOperator:
      return Cat("'", token.text, "'");
  }
  return "token";
}

std::string DescribeType(TokenType type) {
  Token token;
  token.type = type;
  return Describe(token);
}

absl::Status TokenStream::Error(std::string_view message) const {
  return absl::InvalidArgumentError(AtLine(Cur().line, message));
}

absl::Status TokenStream::Unsupported(std::string_view what) const {
  return absl::FailedPreconditionError(AtLine(Cur().line, Cat("unsupported ", what)));
}

absl::Status TokenStream::Expected(std::string_view what) const {
  return Error(Cat("expected ", what, ", got ", Describe(Cur())));
}

absl::Status TokenStream::ExpectOp(std::string_view op) {
  if (!IsOp(op)) return Expected(Cat("'", op, "'"));
  Next();
  return absl::OkStatus();
}

absl::Status TokenStream::ExpectName(std::string_view name) {
  if (!IsName(name)) return Expected(Cat("'", name, "'"));
  Next();
  return absl::OkStatus();
}

absl::Status TokenStream::ExpectBlockEnd() {
  if (IsOp(":")) Next();
  if (Cur().type != TokenType::kBlockEnd) return Expected(DescribeType(TokenType::kBlockEnd));
  Next();
  return absl::OkStatus();
}

}  // namespace df11::runtime::chat
