// The syntax tree of a chat template, as parser.h builds it and interpreter.h runs it. Nodes
// mirror jinja2's (jinja2/nodes.py) for the supported subset; every node keeps its source line
// for error messages.
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_AST_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/runtime/text/chat/value.h"

namespace df11::runtime::chat {

enum class ExprKind {
  kLiteral,    // `literal`: strings, numbers, true/false/none
  kName,       // `name`
  kList,       // [children...]
  kTuple,      // (children...)
  kDict,       // {children[0]: children[1], ...}
  kAttribute,  // children[0].name
  kItem,       // children[0][children[1]]
  kSlice,      // children[0][children[1]:children[2]:children[3]] (absent bounds are null)
  kCall,       // children[0](children[1..], kwargs)
  kFilter,     // children[0] | name(children[1..], kwargs)
  kTest,       // children[0] is name(children[1..])
  kNegate,     // -children[0]
  kPlus,       // +children[0]
  kNot,        // not children[0]
  kAnd,        // children[0] and children[1]
  kOr,         // children[0] or children[1]
  kBinary,     // children[0] `name` children[1]; name is + - * / // % **
  kConcat,     // children[0] ~ children[1] ~ ...
  kCompare,    // children[0] ops[0] children[1] ops[1] children[2] ... (a chain)
  kCondition,  // children[1] if children[0] else children[2] (children[2] null without else)
  // `literal`, a value with inf or nan in it that jinja2's optimizer folded: jinja2 writes
  // repr(value) into the Python code it generates, where `inf` / `nan` are undefined names, so
  // evaluating the node at render time raises NameError (a quirk reproduced on purpose). Only
  // FoldConstants creates it.
  kNonFiniteConstant,
};

enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 1;
  // Height of the tree below and including this node; the parser bounds it.
  int depth = 1;
  Value literal;
  std::string name;
  std::vector<std::unique_ptr<Expr>> children;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;
  std::vector<CompareOp> ops;
};

enum class StmtKind {
  kText,      // `text`, verbatim
  kOutput,    // {{ expr }}
  kIf,        // branches
  kFor,       // {% for targets in expr if filter %} body {% else %} else_body {% endfor %}
  kSet,       // {% set target = expr %}
  kSetBlock,  // {% set target %} body {% endset %}
  kBreak,
  kContinue,
  kBlock,  // body run in place: {% generation %} ... {% endgeneration %}
};

struct Stmt;

struct IfBranch {
  std::unique_ptr<Expr> condition;  // null for else
  std::vector<Stmt> body;
};

// What `set` and `for` assign to: one name, several names unpacked from an iterable, or a
// namespace attribute (`ns.attr`, when `attribute` is set).
struct Target {
  std::vector<std::string> names;
  bool unpack = false;  // names came as a tuple, even if only one: `for (a,) in ...`
  std::string attribute;
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 1;
  std::string text;
  std::unique_ptr<Expr> expr;
  std::unique_ptr<Expr> filter;  // kFor's `if`
  Target target;
  std::vector<IfBranch> branches;
  std::vector<Stmt> body;
  std::vector<Stmt> else_body;
};

struct Program {
  std::vector<Stmt> body;
};

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_AST_H_
