#include "daemon/runtime/text/chat/expression_parser.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/text/chat/builtins.h"
#include "daemon/runtime/text/chat/str_cat.h"

namespace df11::runtime::chat {

using ExprPtr = ExpressionParser::ExprPtr;

// A node over `children`, with its depth checked.
absl::StatusOr<ExprPtr> ExpressionParser::Node(ExprKind kind, int line,
                                               std::vector<ExprPtr> children) {
  auto node = std::make_unique<Expr>();
  node->kind = kind;
  node->line = line;
  for (const ExprPtr& child : children) {
    if (child != nullptr) node->depth = std::max(node->depth, child->depth + 1);
  }
  if (node->depth > kMaxExpressionDepth) {
    return absl::ResourceExhaustedError(
        AtLine(line, Cat("expression nested deeper than ", kMaxExpressionDepth, " levels")));
  }
  node->children = std::move(children);
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::Node(ExprKind kind, int line, ExprPtr a, ExprPtr b) {
  std::vector<ExprPtr> children;
  children.push_back(std::move(a));
  if (b != nullptr) children.push_back(std::move(b));
  return Node(kind, line, std::move(children));
}

ExprPtr ExpressionParser::Literal(Value value, int line) {
  auto node = std::make_unique<Expr>();
  node->kind = ExprKind::kLiteral;
  node->line = line;
  node->literal = std::move(value);
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseTuple(bool with_condexpr,
                                                     const std::vector<std::string_view>& extra_end,
                                                     bool explicit_parentheses) {
  const int line = ts_.Cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) DF11_RETURN_IF_ERROR(ts_.ExpectOp(","));
    if (ts_.IsTupleEnd(extra_end)) break;
    DF11_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condexpr));
    items.push_back(std::move(item));
    if (!ts_.IsOp(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) return ts_.Expected("an expression");
  }
  return Node(ExprKind::kTuple, line, std::move(items));
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseExpression(bool with_condexpr) {
  return with_condexpr ? ParseCondition() : ParseOr();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCondition() {
  DepthGuard guard(recursion_);
  DF11_RETURN_IF_ERROR(CheckRecursion());
  DF11_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
  while (ts_.IsName("if")) {
    const int line = ts_.Cur().line;
    ts_.Next();
    DF11_ASSIGN_OR_RETURN(ExprPtr condition, ParseOr());
    ExprPtr otherwise;
    if (ts_.IsName("else")) {
      ts_.Next();
      DF11_ASSIGN_OR_RETURN(otherwise, ParseCondition());
    }
    std::vector<ExprPtr> children;
    children.push_back(std::move(condition));
    children.push_back(std::move(expr));
    children.push_back(std::move(otherwise));
    DF11_ASSIGN_OR_RETURN(expr, Node(ExprKind::kCondition, line, std::move(children)));
  }
  return expr;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseOr() {
  DF11_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (ts_.IsName("or")) {
    const int line = ts_.Cur().line;
    ts_.Next();
    DF11_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    DF11_ASSIGN_OR_RETURN(left, Node(ExprKind::kOr, line, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseAnd() {
  DF11_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (ts_.IsName("and")) {
    const int line = ts_.Cur().line;
    ts_.Next();
    DF11_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    DF11_ASSIGN_OR_RETURN(left, Node(ExprKind::kAnd, line, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseNot() {
  if (ts_.IsName("not")) {
    DepthGuard guard(recursion_);
    DF11_RETURN_IF_ERROR(CheckRecursion());
    const int line = ts_.Cur().line;
    ts_.Next();
    DF11_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
    return Node(ExprKind::kNot, line, std::move(operand));
  }
  return ParseCompare();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCompare() {
  const int line = ts_.Cur().line;
  DF11_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  std::vector<ExprPtr> operands;
  std::vector<CompareOp> ops;
  operands.push_back(std::move(first));
  while (true) {
    CompareOp op;
    if (ts_.IsOp("==")) {
      op = CompareOp::kEq;
    } else if (ts_.IsOp("!=")) {
      op = CompareOp::kNe;
    } else if (ts_.IsOp("<")) {
      op = CompareOp::kLt;
    } else if (ts_.IsOp("<=")) {
      op = CompareOp::kLe;
    } else if (ts_.IsOp(">")) {
      op = CompareOp::kGt;
    } else if (ts_.IsOp(">=")) {
      op = CompareOp::kGe;
    } else if (ts_.IsName("in")) {
      op = CompareOp::kIn;
    } else if (ts_.IsName("not") && ts_.Look().type == TokenType::kName &&
               ts_.Look().text == "in") {
      ts_.Next();
      op = CompareOp::kNotIn;
    } else {
      break;
    }
    ts_.Next();
    DF11_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
    operands.push_back(std::move(operand));
    ops.push_back(op);
  }
  if (ops.empty()) return std::move(operands[0]);
  DF11_ASSIGN_OR_RETURN(ExprPtr node, Node(ExprKind::kCompare, line, std::move(operands)));
  node->ops = std::move(ops);
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::Binary(std::string op, int line, ExprPtr left,
                                                 ExprPtr right) {
  DF11_ASSIGN_OR_RETURN(ExprPtr node,
                        Node(ExprKind::kBinary, line, std::move(left), std::move(right)));
  node->name = std::move(op);
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseMath1() {
  DF11_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
  while (ts_.IsAnyOp({"+", "-"})) {
    const std::string op = ts_.Cur().text;
    const int line = ts_.Cur().line;
    ts_.Next();
    DF11_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
    DF11_ASSIGN_OR_RETURN(left, Binary(op, line, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseConcat() {
  const int line = ts_.Cur().line;
  std::vector<ExprPtr> parts;
  DF11_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
  parts.push_back(std::move(first));
  while (ts_.IsOp("~")) {
    ts_.Next();
    DF11_ASSIGN_OR_RETURN(ExprPtr part, ParseMath2());
    parts.push_back(std::move(part));
  }
  if (parts.size() == 1) return std::move(parts[0]);
  return Node(ExprKind::kConcat, line, std::move(parts));
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseMath2() {
  DF11_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
  while (ts_.IsAnyOp({"*", "/", "//", "%"})) {
    const std::string op = ts_.Cur().text;
    const int line = ts_.Cur().line;
    ts_.Next();
    DF11_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
    DF11_ASSIGN_OR_RETURN(left, Binary(op, line, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePow() {
  DF11_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(/*with_filter=*/true));
  while (ts_.IsOp("**")) {
    const int line = ts_.Cur().line;
    ts_.Next();
    DF11_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(/*with_filter=*/true));
    DF11_ASSIGN_OR_RETURN(left, Binary("**", line, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseUnary(bool with_filter) {
  DepthGuard guard(recursion_);
  DF11_RETURN_IF_ERROR(CheckRecursion());
  const int line = ts_.Cur().line;
  ExprPtr node;
  if (ts_.IsOp("-") || ts_.IsOp("+")) {
    const ExprKind kind = ts_.IsOp("-") ? ExprKind::kNegate : ExprKind::kPlus;
    ts_.Next();
    DF11_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(/*with_filter=*/false));
    DF11_ASSIGN_OR_RETURN(node, Node(kind, line, std::move(operand)));
  } else {
    DF11_ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  DF11_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    DF11_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

absl::Status ExpressionParser::CheckRecursion() const {
  if (recursion_ > kMaxExpressionDepth) {
    return absl::ResourceExhaustedError(AtLine(
        ts_.Cur().line, Cat("expression nested deeper than ", kMaxExpressionDepth, " levels")));
  }
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePrimary() {
  const Token& token = ts_.Cur();
  const int line = token.line;
  switch (token.type) {
    case TokenType::kName: {
      const std::string& name = token.text;
      if (name == "true" || name == "True" || name == "false" || name == "False") {
        ExprPtr node = Literal(Value::Bool(name == "true" || name == "True"), line);
        ts_.Next();
        return node;
      }
      if (name == "none" || name == "None") {
        ts_.Next();
        return Literal(Value::None(), line);
      }
      auto node = std::make_unique<Expr>();
      node->kind = ExprKind::kName;
      node->line = line;
      node->name = name;
      ts_.Next();
      return node;
    }
    case TokenType::kString: {
      // Adjacent literals concatenate: "a" "b" is "ab".
      std::string text;
      while (ts_.Cur().type == TokenType::kString) {
        text += ts_.Cur().text;
        ts_.Next();
      }
      return Literal(Value::String(std::move(text)), line);
    }
    case TokenType::kInteger: {
      ExprPtr node = Literal(Value::Int(token.int_value), line);
      ts_.Next();
      return node;
    }
    case TokenType::kFloat: {
      ExprPtr node = Literal(Value::Float(token.float_value), line);
      ts_.Next();
      return node;
    }
    case TokenType::kOperator:
      if (ts_.IsOp("(")) {
        ts_.Next();
        DF11_ASSIGN_OR_RETURN(ExprPtr node, ParseTuple(/*with_condexpr=*/true, {},
                                                       /*explicit_parentheses=*/true));
        DF11_RETURN_IF_ERROR(ts_.ExpectOp(")"));
        return node;
      }
      if (ts_.IsOp("[")) return ParseList();
      if (ts_.IsOp("{")) return ParseDict();
      break;
    default:
      break;
  }
  return ts_.Error(Cat("unexpected ", Describe(token)));
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseList() {
  const int line = ts_.Cur().line;
  ts_.Next();
  std::vector<ExprPtr> items;
  while (!ts_.IsOp("]")) {
    if (!items.empty()) DF11_RETURN_IF_ERROR(ts_.ExpectOp(","));
    if (ts_.IsOp("]")) break;
    DF11_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
    items.push_back(std::move(item));
  }
  ts_.Next();
  return Node(ExprKind::kList, line, std::move(items));
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseDict() {
  const int line = ts_.Cur().line;
  ts_.Next();
  std::vector<ExprPtr> items;
  while (!ts_.IsOp("}")) {
    if (!items.empty()) DF11_RETURN_IF_ERROR(ts_.ExpectOp(","));
    if (ts_.IsOp("}")) break;
    DF11_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
    DF11_RETURN_IF_ERROR(ts_.ExpectOp(":"));
    DF11_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
    items.push_back(std::move(key));
    items.push_back(std::move(value));
  }
  ts_.Next();
  return Node(ExprKind::kDict, line, std::move(items));
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (ts_.IsOp(".") || ts_.IsOp("[")) {
      DF11_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (ts_.IsOp("(")) {
      DF11_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (ts_.IsOp("|")) {
      DF11_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
    } else if (ts_.IsName("is")) {
      DF11_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (ts_.IsOp("(")) {
      DF11_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseSubscript(ExprPtr node) {
  const int line = ts_.Cur().line;
  if (ts_.IsOp(".")) {
    ts_.Next();
    if (ts_.Cur().type == TokenType::kName) {
      DF11_ASSIGN_OR_RETURN(ExprPtr attr, Node(ExprKind::kAttribute, line, std::move(node)));
      attr->name = ts_.Cur().text;
      ts_.Next();
      return attr;
    }
    if (ts_.Cur().type != TokenType::kInteger) return ts_.Expected("a name or number");
    ExprPtr index = Literal(Value::Int(ts_.Cur().int_value), ts_.Cur().line);
    ts_.Next();
    return Node(ExprKind::kItem, line, std::move(node), std::move(index));
  }
  ts_.Next();  // [
  std::vector<ExprPtr> args;
  while (!ts_.IsOp("]")) {
    if (!args.empty()) DF11_RETURN_IF_ERROR(ts_.ExpectOp(","));
    DF11_ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
    args.push_back(std::move(arg));
  }
  DF11_RETURN_IF_ERROR(ts_.ExpectOp("]"));
  if (args.size() == 1 && args[0]->kind == ExprKind::kSlice) {
    ExprPtr slice = std::move(args[0]);
    slice->children[0] = std::move(node);
    for (const ExprPtr& child : slice->children) {
      if (child != nullptr) slice->depth = std::max(slice->depth, child->depth + 1);
    }
    if (slice->depth > kMaxExpressionDepth) return CheckRecursionAt(line);
    return slice;
  }
  for (const ExprPtr& arg : args) {
    if (arg->kind == ExprKind::kSlice) return ts_.Unsupported("slice inside a tuple subscript");
  }
  ExprPtr key;
  if (args.size() == 1) {
    key = std::move(args[0]);
  } else {
    DF11_ASSIGN_OR_RETURN(key, Node(ExprKind::kTuple, line, std::move(args)));
  }
  return Node(ExprKind::kItem, line, std::move(node), std::move(key));
}

absl::Status ExpressionParser::CheckRecursionAt(int line) const {
  return absl::ResourceExhaustedError(
      AtLine(line, Cat("expression nested deeper than ", kMaxExpressionDepth, " levels")));
}

// One subscript: an expression or a slice start:stop:step with any part omitted. A slice is
// returned as a kSlice node whose children[0] (the sliced object) is still null.
absl::StatusOr<ExprPtr> ExpressionParser::ParseSubscribed() {
  const int line = ts_.Cur().line;
  ExprPtr start, stop, step;
  if (ts_.IsOp(":")) {
    ts_.Next();
  } else {
    DF11_ASSIGN_OR_RETURN(ExprPtr expr, ParseExpression());
    if (!ts_.IsOp(":")) return expr;
    ts_.Next();
    start = std::move(expr);
  }
  if (!ts_.IsOp(":") && !ts_.IsOp("]") && !ts_.IsOp(",")) {
    DF11_ASSIGN_OR_RETURN(stop, ParseExpression());
  }
  if (ts_.IsOp(":")) {
    ts_.Next();
    if (!ts_.IsOp("]") && !ts_.IsOp(",")) {
      DF11_ASSIGN_OR_RETURN(step, ParseExpression());
    }
  }
  auto slice = std::make_unique<Expr>();
  slice->kind = ExprKind::kSlice;
  slice->line = line;
  slice->children.push_back(nullptr);
  slice->children.push_back(std::move(start));
  slice->children.push_back(std::move(stop));
  slice->children.push_back(std::move(step));
  return slice;
}

// (args, name=kwargs) into `node`'s children (after any already there) and kwargs.
absl::Status ExpressionParser::ParseCallArgs(Expr& node) {
  const int line = ts_.Cur().line;
  DF11_RETURN_IF_ERROR(ts_.ExpectOp("("));
  bool require_comma = false;
  while (!ts_.IsOp(")")) {
    if (require_comma) {
      DF11_RETURN_IF_ERROR(ts_.ExpectOp(","));
      if (ts_.IsOp(")")) break;  // trailing comma
    }
    if (ts_.IsOp("*") || ts_.IsOp("**")) return ts_.Unsupported("*args / **kwargs in a call");
    if (ts_.Cur().type == TokenType::kName && ts_.Look().type == TokenType::kOperator &&
        ts_.Look().text == "=") {
      std::string key = ts_.Cur().text;
      ts_.Next();
      ts_.Next();
      DF11_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      node.depth = std::max(node.depth, value->depth + 1);
      node.kwargs.emplace_back(std::move(key), std::move(value));
    } else {
      if (!node.kwargs.empty()) {
        return absl::InvalidArgumentError(
            AtLine(line, "invalid syntax for function call expression"));
      }
      DF11_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      node.depth = std::max(node.depth, value->depth + 1);
      node.children.push_back(std::move(value));
    }
    require_comma = true;
  }
  ts_.Next();
  if (node.depth > kMaxExpressionDepth) return CheckRecursionAt(line);
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCall(ExprPtr callee) {
  DF11_ASSIGN_OR_RETURN(ExprPtr node, Node(ExprKind::kCall, ts_.Cur().line, std::move(callee)));
  DF11_RETURN_IF_ERROR(ParseCallArgs(*node));
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilter(ExprPtr operand) {
  ts_.Next();  // |
  const int line = ts_.Cur().line;
  if (ts_.Cur().type != TokenType::kName) return ts_.Expected("a filter name");
  std::string name = ts_.Cur().text;
  ts_.Next();
  if (ts_.IsOp(".")) return ts_.Unsupported("dotted filter name");
  if (!IsSupportedFilter(name)) return ts_.Unsupported(Cat("Jinja filter '", name, "'"));
  DF11_ASSIGN_OR_RETURN(ExprPtr node, Node(ExprKind::kFilter, line, std::move(operand)));
  node->name = std::move(name);
  if (ts_.IsOp("(")) DF11_RETURN_IF_ERROR(ParseCallArgs(*node));
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseTest(ExprPtr operand) {
  const int line = ts_.Cur().line;
  ts_.Next();  // is
  bool negated = false;
  if (ts_.IsName("not")) {
    negated = true;
    ts_.Next();
  }
  if (ts_.Cur().type != TokenType::kName) return ts_.Expected("a test name");
  std::string name = ts_.Cur().text;
  ts_.Next();
  if (ts_.IsOp(".")) return ts_.Unsupported("dotted test name");
  if (!IsSupportedTest(name)) return ts_.Unsupported(Cat("Jinja test '", name, "'"));
  DF11_ASSIGN_OR_RETURN(ExprPtr node, Node(ExprKind::kTest, line, std::move(operand)));
  node->name = std::move(name);
  if (ts_.IsOp("(")) {
    DF11_RETURN_IF_ERROR(ParseCallArgs(*node));
  } else if ((ts_.Cur().type == TokenType::kName || ts_.Cur().type == TokenType::kString ||
              ts_.Cur().type == TokenType::kInteger || ts_.Cur().type == TokenType::kFloat ||
              ts_.IsOp("[") || ts_.IsOp("{")) &&
             !ts_.IsName("else") && !ts_.IsName("or") && !ts_.IsName("and")) {
    // `x is divisibleby 3`: one argument without parentheses.
    if (ts_.IsName("is")) return ts_.Error("you cannot chain multiple tests with is");
    DF11_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    DF11_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    node->depth = std::max(node->depth, arg->depth + 1);
    node->children.push_back(std::move(arg));
    if (node->depth > kMaxExpressionDepth) return CheckRecursionAt(line);
  }
  if (negated) return Node(ExprKind::kNot, line, std::move(node));
  return node;
}

}  // namespace df11::runtime::chat
