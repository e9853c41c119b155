#include "daemon/runtime/text/chat/operators.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/runtime/text/chat/str_cat.h"

namespace df11::runtime::chat {
namespace {

absl::Status Overflow(std::string_view op) {
  return absl::FailedPreconditionError(
      Cat("integer overflow in '", op, "' (arbitrary-precision integers are unsupported)"));
}

absl::Status UnsupportedOperands(std::string_view op, const Value& a, const Value& b) {
  return absl::InvalidArgumentError(
      Cat("unsupported operand type(s) for ", op, ": '", TypeName(a), "' and '", TypeName(b), "'"));
}

// Python's float floor division and modulo (float_divmod in CPython's floatobject.c).
void FloatDivMod(double vx, double wx, double& floordiv, double& mod) {
  mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
}

absl::StatusOr<Value> Repeat(const Value& seq, int64_t n, Budget& budget) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<uint64_t>(n) > budget.limits().max_output_bytes / s.size()) {
      return budget.CheckStringSize(budget.limits().max_output_bytes + 1);
    }
    std::string out;
    out.reserve(s.size() * n);
    for (int64_t i = 0; i < n; ++i) out.append(s);
    if (absl::Status st = budget.Built(out.size()); !st.ok()) return st;
    return Value::String(std::move(out));
  }
  const List& list = seq.as_list();
  if (!list.items.empty() && static_cast<uint64_t>(n) > budget.limits().max_list_items) {
    return budget.CheckListSize(budget.limits().max_list_items + 1);
  }
  if (absl::Status st = budget.CheckListSize(list.items.size() * n); !st.ok()) return st;
  if (absl::Status st = budget.Step(static_cast<int64_t>(list.items.size() * n)); !st.ok()) {
    return st;
  }
  std::vector<Value> items;
  items.reserve(list.items.size() * n);
  for (int64_t i = 0; i < n; ++i) items.insert(items.end(), list.items.begin(), list.items.end());
  return MakeList(std::move(items), list.kind);
}

bool IsSequence(const Value& v) {
  return v.is_string() || (v.is_list() && (v.as_list().kind == ListKind::kList ||
                                           v.as_list().kind == ListKind::kTuple));
}

absl::StatusOr<Value> IntPower(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return Overflow("**");
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow("**");
  }
  return Value::Int(result);
}

}  // namespace

absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b,
                               Budget& budget) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  const bool ints = a.is_integral() && b.is_integral();
  const bool numbers = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.ToInt(), b.ToInt(), &r)) return Overflow(op);
      return Value::Int(r);
    }
    if (numbers) return Value::Float(a.ToDouble() + b.ToDouble());
    if (a.is_string() && b.is_string()) {
      const size_t size = a.as_string().size() + b.as_string().size();
      if (absl::Status s = budget.CheckStringSize(size); !s.ok()) return s;
      std::string out = a.as_string();
      out += b.as_string();
      if (absl::Status s = budget.Built(out.size()); !s.ok()) return s;
      return Value::String(std::move(out));
    }
    if (a.is_list() && b.is_list() && a.as_list().kind == b.as_list().kind && IsSequence(a)) {
      const size_t size = a.as_list().items.size() + b.as_list().items.size();
      if (absl::Status s = budget.CheckListSize(size); !s.ok()) return s;
      if (absl::Status s = budget.Step(static_cast<int64_t>(size)); !s.ok()) return s;
      std::vector<Value> items = a.as_list().items;
      items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
      return MakeList(std::move(items), a.as_list().kind);
    }
    if (a.is_string() || (a.is_list() && IsSequence(a))) {
      return absl::InvalidArgumentError(Cat("can only concatenate ", TypeName(a), " (not \"",
                                            TypeName(b), "\") to ", TypeName(a)));
    }
    return UnsupportedOperands(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.ToInt(), b.ToInt(), &r)) return Overflow(op);
      return Value::Int(r);
    }
    if (numbers) return Value::Float(a.ToDouble() - b.ToDouble());
    return UnsupportedOperands(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(a.ToInt(), b.ToInt(), &r)) return Overflow(op);
      return Value::Int(r);
    }
    if (numbers) return Value::Float(a.ToDouble() * b.ToDouble());
    if (IsSequence(a) && b.is_integral()) return Repeat(a, b.ToInt(), budget);
    if (a.is_integral() && IsSequence(b)) return Repeat(b, a.ToInt(), budget);
    if (IsSequence(a) || IsSequence(b)) {
      return absl::InvalidArgumentError(Cat("can't multiply sequence by non-int of type '",
                                            TypeName(IsSequence(a) ? b : a), "'"));
    }
    return UnsupportedOperands(op, a, b);
  }
  if (op == "/") {
    if (!numbers) return UnsupportedOperands(op, a, b);
    if (b.ToDouble() == 0) {
      return absl::InvalidArgumentError(ints ? "division by zero" : "float division by zero");
    }
    return Value::Float(a.ToDouble() / b.ToDouble());
  }
  if (op == "//" || op == "%") {
    if (a.is_string() && op == "%") {
      return absl::FailedPreconditionError("printf-style string formatting with % is unsupported");
    }
    if (!numbers) return UnsupportedOperands(op, a, b);
    if (ints) {
      const int64_t x = a.ToInt(), y = b.ToInt();
      if (y == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) {
        if (op == "//") return Overflow(op);
        return Value::Int(0);
      }
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        r += y;
        q -= 1;
      }
      return Value::Int(op == "//" ? q : r);
    }
    if (b.ToDouble() == 0) {
      return absl::InvalidArgumentError(op == "//" ? "float floor division by zero"
                                                   : "float modulo");
    }
    double q, r;
    FloatDivMod(a.ToDouble(), b.ToDouble(), q, r);
    return Value::Float(op == "//" ? q : r);
  }
  if (op == "**") {
    if (!numbers) return UnsupportedOperands("** or pow()", a, b);
    if (ints && b.ToInt() >= 0) return IntPower(a.ToInt(), b.ToInt());
    const double x = a.ToDouble(), y = b.ToDouble();
    if (x == 0 && y < 0) {
      return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
    }
    if (x < 0 && y != std::floor(y)) {
      return absl::FailedPreconditionError(
          "a negative number to a fractional power is complex (unsupported)");
    }
    return Value::Float(std::pow(x, y));
  }
  return absl::InternalError(Cat("unknown operator ", op));
}

absl::StatusOr<Value> UnaryOp(bool negate, const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_integral()) {
    if (!negate) return Value::Int(v.ToInt());
    if (v.ToInt() == INT64_MIN) return Overflow("-");
    return Value::Int(-v.ToInt());
  }
  if (v.is_float()) return Value::Float(negate ? -v.as_float() : v.as_float());
  return absl::InvalidArgumentError(
      Cat("bad operand type for unary ", negate ? "-" : "+", ": '", TypeName(v), "'"));
}

}  // namespace df11::runtime::chat
