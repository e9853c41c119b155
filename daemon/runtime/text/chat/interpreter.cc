#include "daemon/runtime/text/chat/interpreter.h"

#include <cmath>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/text/chat/builtins.h"
#include "daemon/runtime/text/chat/lexer.h"
#include "daemon/runtime/text/chat/operators.h"
#include "daemon/runtime/text/chat/str_cat.h"

namespace df11::runtime::chat {
namespace {

// Gives an error from a builtin the line of the node that called it (errors that already have
// a position pass through).
absl::Status Annotate(absl::Status status, int line) {
  if (status.ok() || absl::StartsWith(status.message(), "chat template line ")) return status;
  return absl::Status(status.code(), AtLine(line, ToStd(status.message())));
}

template <typename T>
absl::StatusOr<T> Annotate(absl::StatusOr<T> result, int line) {
  if (result.ok()) return result;
  return Annotate(result.status(), line);
}

// Defined with the constant folder below.
std::string NonFiniteName(const Value& v);

enum class Flow { kNormal, kBreak, kContinue };

using Scope = std::vector<std::pair<std::string, Value>>;

class Renderer {
 public:
  Renderer(const Dict& context, const RenderLimits& limits)
      : context_(context), budget_(limits), scopes_(1) {}

  // jinja2's Node.as_const for `e`: its value, or an error where as_const raises Impossible
  // (a name, a call, a filter that needs the render context, an inline if without else whose
  // test is false, or any error while evaluating).
  absl::StatusOr<Value> EvalConstant(const Expr& e) {
    const_mode_ = true;
    absl::StatusOr<Value> value = Eval(e);
    const_mode_ = false;
    return value;
  }

  absl::StatusOr<std::string> Run(const Program& program) {
    std::string out;
    out_ = &out;
    DF11_ASSIGN_OR_RETURN(Flow flow, ExecBody(program.body));
    (void)flow;  // the parser allows break / continue only inside loops
    return out;
  }

 private:
  // ---- Scopes -----------------------------------------------------------------------------

  Value Lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      for (const auto& [key, value] : *scope) {
        if (key == name) return value;
      }
    }
    if (const Value* v = context_.Find(name); v != nullptr) return *v;
    if (std::optional<Value> global = LookupGlobal(name); global.has_value()) return *global;
    return Value::Undefined(Cat("'", name, "' is undefined"));
  }

  void Bind(const std::string& name, Value value) {
    for (auto& [key, v] : scopes_.back()) {
      if (key == name) {
        v = std::move(value);
        return;
      }
    }
    scopes_.back().emplace_back(name, std::move(value));
  }

  absl::Status Assign(const Target& target, Value value, int line) {
    if (!target.attribute.empty()) {
      const Value ns = Lookup(target.names[0]);
      if (!ns.is_object() || ns.as_object().kind != Object::Kind::kNamespace) {
        return absl::InvalidArgumentError(
            AtLine(line, "cannot assign attribute on non-namespace object"));
      }
      if (target.attribute[0] == '_') {
        return absl::InvalidArgumentError(
            AtLine(line, Cat("Chat templates cannot store underscore-prefixed attributes on a "
                             "namespace, but got '",
                             target.attribute, "'. Please rename the attribute.")));
      }
      ns.as_object().attrs.Set(target.attribute, std::move(value));
      return absl::OkStatus();
    }
    if (!target.unpack) {
      Bind(target.names[0], std::move(value));
      return absl::OkStatus();
    }
    DF11_ASSIGN_OR_RETURN(std::vector<Value> items, Annotate(Iterate(value), line));
    if (items.size() != target.names.size()) {
      return absl::InvalidArgumentError(
          AtLine(line, items.size() > target.names.size()
                           ? Cat("too many values to unpack (expected ", target.names.size(), ")")
                           : Cat("not enough values to unpack (expected ", target.names.size(),
                                 ", got ", items.size(), ")")));
    }
    for (size_t i = 0; i < items.size(); ++i) Bind(target.names[i], std::move(items[i]));
    return absl::OkStatus();
  }

  // ---- Statements -------------------------------------------------------------------------

  absl::Status Emit(std::string_view text, int line) {
    out_->append(text);
    if (out_->size() > budget_.limits().max_output_bytes) {
      return absl::ResourceExhaustedError(AtLine(
          line,
          Cat("rendered text exceeds the limit of ", budget_.limits().max_output_bytes, " bytes")));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Flow> ExecBody(const std::vector<Stmt>& body) {
    for (const Stmt& stmt : body) {
      DF11_ASSIGN_OR_RETURN(Flow flow, Exec(stmt));
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  absl::StatusOr<Flow> ExecInScope(const std::vector<Stmt>& body) {
    scopes_.emplace_back();
    absl::StatusOr<Flow> flow = ExecBody(body);
    scopes_.pop_back();
    return flow;
  }

  absl::StatusOr<Flow> Exec(const Stmt& stmt) {
    DF11_RETURN_IF_ERROR(Annotate(budget_.Step(), stmt.line));
    switch (stmt.kind) {
      case StmtKind::kText:
        DF11_RETURN_IF_ERROR(Emit(stmt.text, stmt.line));
        return Flow::kNormal;
      case StmtKind::kOutput: {
        DF11_ASSIGN_OR_RETURN(Value value, Eval(*stmt.expr));
        DF11_ASSIGN_OR_RETURN(std::string text, Annotate(ToStr(value), stmt.line));
        DF11_RETURN_IF_ERROR(Emit(text, stmt.line));
        return Flow::kNormal;
      }
      case StmtKind::kIf:
        for (const IfBranch& branch : stmt.branches) {
          bool taken = true;
          if (branch.condition != nullptr) {
            DF11_ASSIGN_OR_RETURN(Value condition, Eval(*branch.condition));
            taken = Truthy(condition);
          }
          if (taken) return ExecBody(branch.body);
        }
        return Flow::kNormal;
      case StmtKind::kFor:
        return ExecFor(stmt);
      case StmtKind::kSet: {
        DF11_ASSIGN_OR_RETURN(Value value, Eval(*stmt.expr));
        DF11_RETURN_IF_ERROR(Assign(stmt.target, std::move(value), stmt.line));
        return Flow::kNormal;
      }
      case StmtKind::kSetBlock: {
        std::string captured;
        std::string* const saved = out_;
        out_ = &captured;
        absl::StatusOr<Flow> flow = ExecInScope(stmt.body);
        out_ = saved;
        if (!flow.ok()) return flow.status();
        DF11_RETURN_IF_ERROR(Assign(stmt.target, Value::String(std::move(captured)), stmt.line));
        return *flow;
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kBlock:
        return ExecBody(stmt.body);
    }
    return Flow::kNormal;
  }

  absl::StatusOr<Flow> ExecFor(const Stmt& stmt) {
    DF11_ASSIGN_OR_RETURN(Value iterable, Eval(*stmt.expr));
    DF11_ASSIGN_OR_RETURN(std::vector<Value> items, Annotate(Iterate(iterable), stmt.line));
    if (stmt.filter != nullptr) {
      std::vector<Value> kept;
      for (Value& item : items) {
        scopes_.emplace_back();
        absl::Status assigned = Assign(stmt.target, item, stmt.line);
        absl::StatusOr<Value> keep =
            assigned.ok() ? Eval(*stmt.filter) : absl::StatusOr<Value>(assigned);
        scopes_.pop_back();
        if (!keep.ok()) return keep.status();
        if (Truthy(*keep)) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    // Jinja runs the else block unless some iteration reached the end of the body (one that
    // ends in break or continue does not count): an empty loop, but also one where every
    // iteration continued, or the first broke.
    bool completed_an_iteration = false;
    if (!items.empty()) {
      auto loop_items = std::make_shared<List>();
      loop_items->items = std::move(items);
      for (size_t i = 0; i < loop_items->items.size(); ++i) {
        DF11_RETURN_IF_ERROR(Annotate(budget_.Step(), stmt.line));
        auto loop = std::make_shared<Object>();
        loop->kind = Object::Kind::kLoop;
        loop->loop_items = loop_items;
        loop->loop_index0 = static_cast<int64_t>(i);
        scopes_.emplace_back();
        absl::Status assigned = Assign(stmt.target, loop_items->items[i], stmt.line);
        Bind("loop", Value::FromObject(std::move(loop)));
        absl::StatusOr<Flow> flow =
            assigned.ok() ? ExecBody(stmt.body) : absl::StatusOr<Flow>(assigned);
        scopes_.pop_back();
        if (!flow.ok()) return flow.status();
        if (*flow == Flow::kNormal) completed_an_iteration = true;
        if (*flow == Flow::kBreak) break;
      }
    }
    if (!completed_an_iteration && !stmt.else_body.empty()) {
      DF11_ASSIGN_OR_RETURN(Flow flow, ExecInScope(stmt.else_body));
      (void)flow;  // break / continue are not allowed in the else block
    }
    return Flow::kNormal;
  }

  // ---- Expressions ------------------------------------------------------------------------

  absl::StatusOr<Args> EvalArgs(const Expr& e, size_t first) {
    Args args;
    for (size_t i = first; i < e.children.size(); ++i) {
      DF11_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i]));
      args.positional.push_back(std::move(v));
    }
    for (const auto& [key, expr] : e.kwargs) {
      DF11_ASSIGN_OR_RETURN(Value v, Eval(*expr));
      args.keyword.emplace_back(key, std::move(v));
    }
    return args;
  }

  absl::StatusOr<std::vector<Value>> EvalChildren(const Expr& e) {
    std::vector<Value> values;
    values.reserve(e.children.size());
    for (const auto& child : e.children) {
      DF11_ASSIGN_OR_RETURN(Value v, Eval(*child));
      values.push_back(std::move(v));
    }
    return values;
  }

  absl::StatusOr<bool> CompareOne(CompareOp op, const Value& a, const Value& b, int line) {
    switch (op) {
      case CompareOp::kEq:
        return Equals(a, b);
      case CompareOp::kNe:
        return !Equals(a, b);
      case CompareOp::kLt:
        return Annotate(Compare(a, b, Ordering::kLess), line);
      case CompareOp::kLe:
        return Annotate(Compare(a, b, Ordering::kLessEqual), line);
      case CompareOp::kGt:
        return Annotate(Compare(a, b, Ordering::kGreater), line);
      case CompareOp::kGe:
        return Annotate(Compare(a, b, Ordering::kGreaterEqual), line);
      case CompareOp::kIn:
      case CompareOp::kNotIn: {
        if (b.is_list()) {
          DF11_RETURN_IF_ERROR(
              Annotate(budget_.Step(static_cast<int64_t>(b.as_list().items.size())), line));
        }
        DF11_ASSIGN_OR_RETURN(bool found, Annotate(Contains(b, a), line));
        return op == CompareOp::kIn ? found : !found;
      }
    }
    return false;
  }

  absl::StatusOr<Value> EvalCall(const Expr& e) {
    DF11_ASSIGN_OR_RETURN(Value function, Eval(*e.children[0]));
    DF11_ASSIGN_OR_RETURN(Args args, EvalArgs(e, 1));
    if (function.is_undefined()) return Annotate(UndefinedError(function), e.line);
    if (!function.is_callable()) {
      return absl::InvalidArgumentError(
          AtLine(e.line, Cat("'", TypeName(function), "' object is not callable")));
    }
    const Callable& callable = function.as_callable();
    if (!callable.is_method && callable.name == "raise_exception") {
      // transformers: raise TemplateError(message); its text is exactly the message.
      DF11_ASSIGN_OR_RETURN(auto bound,
                            Annotate(BindArgs("raise_exception", args, {"message"}), e.line));
      if (!bound[0].has_value()) {
        return absl::InvalidArgumentError(
            AtLine(e.line, "raise_exception() missing 1 required positional argument"));
      }
      DF11_ASSIGN_OR_RETURN(std::string message, Annotate(ToStr(*bound[0]), e.line));
      return absl::InvalidArgumentError(message);
    }
    return Annotate(CallFunction(callable, args, budget_), e.line);
  }

  absl::StatusOr<Value> Eval(const Expr& e) {
    DF11_RETURN_IF_ERROR(Annotate(budget_.Step(), e.line));
    switch (e.kind) {
      case ExprKind::kLiteral:
        return e.literal;
      case ExprKind::kNonFiniteConstant:
        if (const_mode_) return e.literal;
        return absl::InvalidArgumentError(
            AtLine(e.line, Cat("name '", NonFiniteName(e.literal), "' is not defined")));
      case ExprKind::kName:
        if (const_mode_) return NotConstant();
        return Lookup(e.name);
      case ExprKind::kList:
      case ExprKind::kTuple: {
        DF11_ASSIGN_OR_RETURN(std::vector<Value> items, EvalChildren(e));
        return Annotate(MakeList(std::move(items),
                                 e.kind == ExprKind::kList ? ListKind::kList : ListKind::kTuple),
                        e.line);
      }
      case ExprKind::kDict: {
        Dict dict;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          DF11_ASSIGN_OR_RETURN(Value key, Eval(*e.children[i]));
          DF11_ASSIGN_OR_RETURN(Value value, Eval(*e.children[i + 1]));
          if (!key.is_string()) {
            return absl::FailedPreconditionError(
                AtLine(e.line, Cat("unsupported dict key of type '", TypeName(key),
                                   "' (only string keys are supported)")));
          }
          dict.Set(key.as_string(), std::move(value));
        }
        return Annotate(MakeDict(std::move(dict)), e.line);
      }
      case ExprKind::kAttribute: {
        DF11_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
        return Annotate(GetAttribute(obj, e.name), e.line);
      }
      case ExprKind::kItem: {
        DF11_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
        DF11_ASSIGN_OR_RETURN(Value key, Eval(*e.children[1]));
        return Annotate(GetItem(obj, key), e.line);
      }
      case ExprKind::kSlice: {
        DF11_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
        Value bounds[3] = {Value::None(), Value::None(), Value::None()};
        for (int i = 0; i < 3; ++i) {
          if (e.children[i + 1] != nullptr) {
            DF11_ASSIGN_OR_RETURN(bounds[i], Eval(*e.children[i + 1]));
          }
        }
        return Annotate(GetSlice(obj, bounds[0], bounds[1], bounds[2], /*folded=*/const_mode_),
                        e.line);
      }
      case ExprKind::kCall:
        if (const_mode_) return NotConstant();
        return EvalCall(e);
      case ExprKind::kFilter: {
        if (const_mode_ && (e.name == "select" || e.name == "reject" || e.name == "selectattr" ||
                            e.name == "rejectattr" || e.name == "map")) {
          return NotConstant();  // jinja2 @pass_context filters
        }
        DF11_ASSIGN_OR_RETURN(Value operand, Eval(*e.children[0]));
        DF11_ASSIGN_OR_RETURN(Args args, EvalArgs(e, 1));
        return Annotate(ApplyFilter(e.name, operand, args, budget_), e.line);
      }
      case ExprKind::kTest: {
        DF11_ASSIGN_OR_RETURN(Value operand, Eval(*e.children[0]));
        DF11_ASSIGN_OR_RETURN(Args args, EvalArgs(e, 1));
        DF11_ASSIGN_OR_RETURN(bool passed, Annotate(ApplyTest(e.name, operand, args), e.line));
        return Value::Bool(passed);
      }
      case ExprKind::kNegate:
      case ExprKind::kPlus: {
        DF11_ASSIGN_OR_RETURN(Value operand, Eval(*e.children[0]));
        return Annotate(UnaryOp(e.kind == ExprKind::kNegate, operand), e.line);
      }
      case ExprKind::kNot: {
        DF11_ASSIGN_OR_RETURN(Value operand, Eval(*e.children[0]));
        return Value::Bool(!Truthy(operand));
      }
      case ExprKind::kAnd:
      case ExprKind::kOr: {
        // Python's and / or return an operand, not a bool.
        DF11_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0]));
        if (Truthy(left) == (e.kind == ExprKind::kOr)) return left;
        return Eval(*e.children[1]);
      }
      case ExprKind::kBinary: {
        DF11_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0]));
        DF11_ASSIGN_OR_RETURN(Value right, Eval(*e.children[1]));
        return Annotate(BinaryOp(e.name, left, right, budget_), e.line);
      }
      case ExprKind::kConcat: {
        std::string out;
        for (const auto& child : e.children) {
          DF11_ASSIGN_OR_RETURN(Value part, Eval(*child));
          DF11_ASSIGN_OR_RETURN(std::string text, Annotate(ToStr(part), e.line));
          DF11_RETURN_IF_ERROR(Annotate(budget_.CheckStringSize(out.size() + text.size()), e.line));
          out.append(text);
        }
        DF11_RETURN_IF_ERROR(Annotate(budget_.Built(out.size()), e.line));
        return Value::String(std::move(out));
      }
      case ExprKind::kCompare: {
        DF11_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0]));
        for (size_t i = 0; i < e.ops.size(); ++i) {
          DF11_ASSIGN_OR_RETURN(Value right, Eval(*e.children[i + 1]));
          DF11_ASSIGN_OR_RETURN(bool holds, CompareOne(e.ops[i], left, right, e.line));
          if (!holds) return Value::Bool(false);
          left = std::move(right);
        }
        return Value::Bool(true);
      }
      case ExprKind::kCondition: {
        DF11_ASSIGN_OR_RETURN(Value condition, Eval(*e.children[0]));
        if (Truthy(condition)) return Eval(*e.children[1]);
        if (e.children[2] != nullptr) return Eval(*e.children[2]);
        if (const_mode_) return NotConstant();
        return Value::Undefined(Cat("the inline if-expression on line ", e.line,
                                    " evaluated to false and no else section was "
                                    "defined."));
      }
    }
    return absl::InternalError("unknown expression kind");
  }

  static absl::Status NotConstant() { return absl::CancelledError("not a constant"); }

  const Dict& context_;
  Budget budget_;
  std::vector<Scope> scopes_;  // scopes_[0]: the template's top level
  std::string* out_ = nullptr;
  // Evaluating for jinja2's compile-time constant folding (see FoldConstants).
  bool const_mode_ = false;
};

// Python's has_safe_repr (jinja2/compiler.py): the values the optimizer may fold into a constant.
bool HasSafeRepr(const Value& v) {
  switch (v.type()) {
    case Value::Type::kNone:
    case Value::Type::kBool:
    case Value::Type::kInt:
    case Value::Type::kFloat:
    case Value::Type::kString:
      return true;
    case Value::Type::kList: {
      const List& list = v.as_list();
      if (list.kind == ListKind::kRange) return true;
      if (list.kind != ListKind::kList && list.kind != ListKind::kTuple) return false;
      for (const Value& item : list.items) {
        if (!HasSafeRepr(item)) return false;
      }
      return true;
    }
    case Value::Type::kDict:
      for (const auto& entry : v.as_dict().entries()) {
        if (!HasSafeRepr(entry.second)) return false;
      }
      return true;
    default:
      return false;
  }
}

// "nan" or "inf": the name Python's repr writes for the first non-finite float in `v`, or "" if
// there is none.
std::string NonFiniteName(const Value& v) {
  if (v.is_float() && !std::isfinite(v.as_float())) {
    return std::isnan(v.as_float()) ? "nan" : "inf";
  }
  if (v.is_list()) {
    for (const Value& item : v.as_list().items) {
      if (std::string name = NonFiniteName(item); !name.empty()) return name;
    }
  }
  if (v.is_dict()) {
    for (const auto& entry : v.as_dict().entries()) {
      if (std::string name = NonFiniteName(entry.second); !name.empty()) return name;
    }
  }
  return "";
}

class ConstantFolder {
 public:
  void FoldBody(std::vector<Stmt>& body) {
    for (Stmt& stmt : body) {
      if (stmt.expr != nullptr) {
        FoldExpr(stmt.expr);
        if (stmt.kind == StmtKind::kOutput) FoldOutput(stmt.expr);
      }
      if (stmt.filter != nullptr) FoldExpr(stmt.filter);
      for (IfBranch& branch : stmt.branches) {
        if (branch.condition != nullptr) FoldExpr(branch.condition);
        FoldBody(branch.body);
      }
      FoldBody(stmt.body);
      FoldBody(stmt.else_body);
    }
  }

 private:
  std::optional<Value> AsConst(const Expr& e) {
    absl::StatusOr<Value> value = Renderer(empty_, limits_).EvalConstant(e);
    if (!value.ok()) return std::nullopt;
    return *std::move(value);
  }

  static void MakeLiteral(std::unique_ptr<Expr>& e, Value value) {
    auto literal = std::make_unique<Expr>();
    literal->kind =
        NonFiniteName(value).empty() ? ExprKind::kLiteral : ExprKind::kNonFiniteConstant;
    literal->line = e->line;
    literal->literal = std::move(value);
    e = std::move(literal);
  }

  // jinja2's Optimizer: bottom-up, a node whose as_const succeeds with a safe value becomes a
  // constant.
  void FoldExpr(std::unique_ptr<Expr>& e) {
    for (std::unique_ptr<Expr>& child : e->children) {
      if (child != nullptr) FoldExpr(child);
    }
    for (auto& kwarg : e->kwargs) FoldExpr(kwarg.second);
    if (e->kind == ExprKind::kLiteral) {
      // A literal like 1e309 is inf too.
      if (!NonFiniteName(e->literal).empty()) e->kind = ExprKind::kNonFiniteConstant;
      return;
    }
    if (e->kind == ExprKind::kNonFiniteConstant) return;
    std::optional<Value> value = AsConst(*e);
    if (value.has_value() && HasSafeRepr(*value)) MakeLiteral(e, *std::move(value));
  }

  // The code generator also folds the expression of a {{ }} whatever its value (an Undefined
  // from a folded slice prints as ""). Generators stay unfolded: they are single-use.
  void FoldOutput(std::unique_ptr<Expr>& e) {
    if (e->kind == ExprKind::kLiteral) return;
    if (e->kind == ExprKind::kNonFiniteConstant) {
      // Printed at compile time: str(inf) is "inf", no name lookup.
      e->kind = ExprKind::kLiteral;
      return;
    }
    std::optional<Value> value = AsConst(*e);
    if (!value.has_value()) return;
    if (value->is_list() && value->as_list().kind == ListKind::kGenerator) return;
    MakeLiteral(e, *std::move(value));
  }

  const Dict empty_{};
  const RenderLimits limits_{};
};

}  // namespace

void FoldConstants(Program& program) { ConstantFolder().FoldBody(program.body); }

absl::StatusOr<std::string> RenderProgram(const Program& program, const Dict& context,
                                          const RenderLimits& limits) {
  return Renderer(context, limits).Run(program);
}

}  // namespace df11::runtime::chat
