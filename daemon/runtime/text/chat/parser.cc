#include "daemon/runtime/text/chat/parser.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/text/chat/expression_parser.h"
#include "daemon/runtime/text/chat/str_cat.h"
#include "daemon/runtime/text/chat/token_stream.h"

namespace df11::runtime::chat {
namespace {

// Tags jinja2 itself knows that this interpreter does not implement.
constexpr std::string_view kUnsupportedTags[] = {"macro",  "call",       "filter",  "include",
                                                 "import", "from",       "extends", "block",
                                                 "with",   "autoescape", "print",   "raw"};

// jinja2's statement parser (parse_statement, subparse and the parse_<tag> methods).
class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : ts_(tokens), exprs_(ts_) {}

  absl::StatusOr<std::unique_ptr<Program>> Run() {
    auto program = std::make_unique<Program>();
    std::string end_tag;
    DF11_ASSIGN_OR_RETURN(program->body, ParseBody({}, end_tag));
    return program;
  }

 private:
  // Statements up to a {% tag %} named in `end_tags` (left current, its name in `end_tag`), or
  // to the end of the template when `end_tags` is empty.
  absl::StatusOr<std::vector<Stmt>> ParseBody(std::vector<std::string_view> end_tags,
                                              std::string& end_tag) {
    DepthGuard guard(block_depth_);
    if (block_depth_ > kMaxBlockDepth) {
      return absl::ResourceExhaustedError(
          AtLine(ts_.Cur().line, Cat("blocks nested deeper than ", kMaxBlockDepth, " levels")));
    }
    std::vector<Stmt> body;
    while (true) {
      const Token& token = ts_.Cur();
      switch (token.type) {
        case TokenType::kData: {
          Stmt stmt;
          stmt.kind = StmtKind::kText;
          stmt.line = token.line;
          stmt.text = token.text;
          body.push_back(std::move(stmt));
          ts_.Next();
          break;
        }
        case TokenType::kVariableBegin: {
          Stmt stmt;
          stmt.kind = StmtKind::kOutput;
          stmt.line = token.line;
          ts_.Next();
          DF11_ASSIGN_OR_RETURN(stmt.expr, exprs_.ParseTuple(/*with_condexpr=*/true));
          if (ts_.Cur().type != TokenType::kVariableEnd) {
            return ts_.Expected(DescribeType(TokenType::kVariableEnd));
          }
          ts_.Next();
          body.push_back(std::move(stmt));
          break;
        }
        case TokenType::kBlockBegin: {
          ts_.Next();
          if (ts_.Cur().type != TokenType::kName) return ts_.Error("tag name expected");
          if (std::find(end_tags.begin(), end_tags.end(), ts_.Cur().text) != end_tags.end()) {
            end_tag = ts_.Cur().text;
            return body;
          }
          DF11_ASSIGN_OR_RETURN(Stmt stmt, ParseStatement());
          body.push_back(std::move(stmt));
          if (ts_.Cur().type != TokenType::kBlockEnd) {
            return ts_.Expected(DescribeType(TokenType::kBlockEnd));
          }
          ts_.Next();
          break;
        }
        case TokenType::kEnd:
          if (!end_tags.empty()) {
            std::vector<std::string> quoted;
            for (std::string_view tag : end_tags) quoted.push_back(Cat("'", tag, "'"));
            return ts_.Error(
                Cat("unexpected end of template, expected ", absl::StrJoin(quoted, " or ")));
          }
          return body;
        default:
          return ts_.Error(Cat("unexpected ", Describe(token)));
      }
    }
  }

  absl::StatusOr<Stmt> ParseStatement() {
    const std::string& name = ts_.Cur().text;
    if (name == "if") return ParseIf();
    if (name == "for") return ParseFor();
    if (name == "set") return ParseSet();
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) return ts_.Error(Cat("'", name, "' outside of a for loop"));
      Stmt stmt;
      stmt.kind = name == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      stmt.line = ts_.Cur().line;
      ts_.Next();
      return stmt;
    }
    if (name == "generation") {
      Stmt stmt;
      stmt.kind = StmtKind::kBlock;
      stmt.line = ts_.Cur().line;
      ts_.Next();
      DF11_RETURN_IF_ERROR(ts_.ExpectBlockEnd());
      std::string end_tag;
      DF11_ASSIGN_OR_RETURN(stmt.body, ParseBody({"endgeneration"}, end_tag));
      ts_.Next();
      return stmt;
    }
    if (std::find(std::begin(kUnsupportedTags), std::end(kUnsupportedTags), name) !=
        std::end(kUnsupportedTags)) {
      return ts_.Unsupported(Cat("Jinja tag '", name, "'"));
    }
    return ts_.Error(Cat("unknown tag '", name, "'"));
  }

  absl::StatusOr<Stmt> ParseIf() {
    Stmt stmt;
    stmt.kind = StmtKind::kIf;
    stmt.line = ts_.Cur().line;
    ts_.Next();
    while (true) {
      IfBranch branch;
      DF11_ASSIGN_OR_RETURN(branch.condition, exprs_.ParseTuple(/*with_condexpr=*/false));
      DF11_RETURN_IF_ERROR(ts_.ExpectBlockEnd());
      std::string end_tag;
      DF11_ASSIGN_OR_RETURN(branch.body, ParseBody({"elif", "else", "endif"}, end_tag));
      stmt.branches.push_back(std::move(branch));
      ts_.Next();
      if (end_tag == "elif") continue;
      if (end_tag == "else") {
        IfBranch else_branch;
        DF11_RETURN_IF_ERROR(ts_.ExpectBlockEnd());
        DF11_ASSIGN_OR_RETURN(else_branch.body, ParseBody({"endif"}, end_tag));
        ts_.Next();
        stmt.branches.push_back(std::move(else_branch));
      }
      return stmt;
    }
  }

  absl::StatusOr<Stmt> ParseFor() {
    Stmt stmt;
    stmt.kind = StmtKind::kFor;
    stmt.line = ts_.Cur().line;
    ts_.Next();
    DF11_ASSIGN_OR_RETURN(stmt.target, ParseAssignTarget({"in"}, /*with_namespace=*/false));
    DF11_RETURN_IF_ERROR(ts_.ExpectName("in"));
    DF11_ASSIGN_OR_RETURN(stmt.expr, exprs_.ParseTuple(/*with_condexpr=*/false, {"recursive"}));
    if (ts_.IsName("if")) {
      ts_.Next();
      DF11_ASSIGN_OR_RETURN(stmt.filter, exprs_.ParseExpression(/*with_condexpr=*/true));
    }
    if (ts_.IsName("recursive")) return ts_.Unsupported("recursive for loop");
    DF11_RETURN_IF_ERROR(ts_.ExpectBlockEnd());
    std::string end_tag;
    ++loop_depth_;
    absl::StatusOr<std::vector<Stmt>> body = ParseBody({"endfor", "else"}, end_tag);
    --loop_depth_;
    if (!body.ok()) return body.status();
    stmt.body = *std::move(body);
    ts_.Next();
    if (end_tag == "else") {
      DF11_RETURN_IF_ERROR(ts_.ExpectBlockEnd());
      // The else block runs outside the loop: break and continue are not allowed there.
      const int saved_loop_depth = loop_depth_;
      loop_depth_ = 0;
      absl::StatusOr<std::vector<Stmt>> else_body = ParseBody({"endfor"}, end_tag);
      loop_depth_ = saved_loop_depth;
      if (!else_body.ok()) return else_body.status();
      stmt.else_body = *std::move(else_body);
      ts_.Next();
    }
    return stmt;
  }

  absl::StatusOr<Stmt> ParseSet() {
    Stmt stmt;
    stmt.line = ts_.Cur().line;
    ts_.Next();
    DF11_ASSIGN_OR_RETURN(stmt.target, ParseAssignTarget({}, /*with_namespace=*/true));
    if (ts_.IsOp("=")) {
      ts_.Next();
      stmt.kind = StmtKind::kSet;
      DF11_ASSIGN_OR_RETURN(stmt.expr, exprs_.ParseTuple(/*with_condexpr=*/true));
      return stmt;
    }
    if (ts_.IsOp("|")) return ts_.Unsupported("filter on a {% set %} block");
    stmt.kind = StmtKind::kSetBlock;
    DF11_RETURN_IF_ERROR(ts_.ExpectBlockEnd());
    std::string end_tag;
    DF11_ASSIGN_OR_RETURN(stmt.body, ParseBody({"endset"}, end_tag));
    ts_.Next();
    return stmt;
  }

  // Names, `a, b`, `(a, b)`, or (for set) `ns.attr`.
  absl::StatusOr<Target> ParseAssignTarget(const std::vector<std::string_view>& extra_end,
                                           bool with_namespace) {
    Target target;
    if (with_namespace && ts_.Cur().type == TokenType::kName &&
        ts_.Look().type == TokenType::kOperator && ts_.Look().text == ".") {
      target.names.push_back(ts_.Cur().text);
      ts_.Next();
      ts_.Next();
      if (ts_.Cur().type != TokenType::kName) return ts_.Expected("an attribute name");
      target.attribute = ts_.Cur().text;
      ts_.Next();
      return target;
    }
    size_t elements = 0;
    bool parenthesized = false;
    while (true) {
      if (elements > 0) DF11_RETURN_IF_ERROR(ts_.ExpectOp(","));
      if (ts_.IsTupleEnd(extra_end)) break;
      if (ts_.IsOp("(")) {
        // (a, b) is the same as a, b when it is the whole target; (a) is just a.
        ts_.Next();
        parenthesized = true;
        size_t inner = 0;
        while (!ts_.IsOp(")")) {
          if (inner > 0) {
            DF11_RETURN_IF_ERROR(ts_.ExpectOp(","));
            target.unpack = true;
            if (ts_.IsOp(")")) break;
          }
          DF11_RETURN_IF_ERROR(AppendTargetName(target));
          ++inner;
        }
        if (inner == 0) return ts_.Error("can't assign to an empty tuple");
        ts_.Next();
      } else {
        DF11_RETURN_IF_ERROR(AppendTargetName(target));
      }
      ++elements;
      if (!ts_.IsOp(",")) break;
      target.unpack = true;
    }
    if (target.names.empty()) return ts_.Expected("a name to assign to");
    if (parenthesized && elements > 1) return ts_.Unsupported("nested tuple unpacking");
    return target;
  }

  absl::Status AppendTargetName(Target& target) {
    if (ts_.Cur().type != TokenType::kName || ts_.IsName("true") || ts_.IsName("false") ||
        ts_.IsName("True") || ts_.IsName("False") || ts_.IsName("none") || ts_.IsName("None")) {
      return ts_.Error(Cat("can't assign to ", Describe(ts_.Cur())));
    }
    target.names.push_back(ts_.Cur().text);
    ts_.Next();
    return absl::OkStatus();
  }

  TokenStream ts_;
  ExpressionParser exprs_;
  int block_depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Program>> Parse(const std::vector<Token>& tokens) {
  return Parser(tokens).Run();
}

}  // namespace df11::runtime::chat
