// Filters and tests (builtins.h), after jinja2/filters.py and jinja2/tests.py.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "codec/base/status_macros.h"
#include "daemon/runtime/text/chat/builtins.h"
#include "daemon/runtime/text/chat/json_dump.h"
#include "daemon/runtime/text/chat/operators.h"
#include "daemon/runtime/text/chat/py_text.h"
#include "daemon/runtime/text/chat/str_cat.h"

namespace df11::runtime::chat {
namespace {

constexpr std::string_view kFilters[] = {
    "abs",    "capitalize", "count",      "d",       "default", "first",  "float",
    "int",    "items",      "join",       "last",    "length",  "list",   "lower",
    "map",    "reject",     "rejectattr", "replace", "reverse", "select", "selectattr",
    "string", "title",      "tojson",     "trim",    "upper"};

constexpr std::string_view kTests[] = {
    "defined",     "undefined", "none",    "boolean",  "true",     "false",    "integer", "float",
    "number",      "string",    "mapping", "sequence", "iterable", "callable", "odd",     "even",
    "divisibleby", "lower",     "upper",   "in",       "eq",       "equalto",  "==",      "ne",
    "!=",          "lt",        "<",       "lessthan", "le",       "<=",       "gt",      ">",
    "greaterthan", "ge",        ">=",      "sameas"};

template <size_t N>
bool Listed(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

absl::StatusOr<Value> StringResult(std::string s, Budget& budget) {
  DF11_RETURN_IF_ERROR(budget.Built(s.size()));
  return Value::String(std::move(s));
}

// Jinja's soft_str: str(x), "" for an Undefined.
absl::StatusOr<std::string> SoftStr(const Value& v) { return ToStr(v); }

// The generator a lazy Jinja filter (select, reject, map, items) returns: `fill` computes its
// items now, and an error it meets is kept for when the generator is iterated, which is when
// Python would raise it. Limits (kResourceExhausted) are not deferred.
template <typename Fill>
absl::StatusOr<Value> LazyGenerator(Fill fill) {
  std::vector<Value> items;
  absl::Status error = fill(items);
  if (error.code() == absl::StatusCode::kResourceExhausted) return error;
  return MakeGenerator(std::move(items), std::move(error));
}

// Python int(text, base) for base 10 / 2 / 8 / 16 / 0: optional whitespace and sign, digits
// with single underscores between them, an optional matching 0x / 0o / 0b prefix. nullopt if
// Python would raise ValueError; `overflow` is set for a valid integer beyond int64.
std::optional<int64_t> ParsePyInt(std::string_view text, int base, bool& overflow) {
  overflow = false;
  const std::string stripped = AsciiDigits(PyStrip(text, nullptr, true, true));
  std::string_view s = stripped;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.size() >= 2 && s[0] == '0') {
    const char p = static_cast<char>(s[1] | 0x20);
    const int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed != 0 && (base == 0 || base == prefixed)) {
      base = prefixed;
      s.remove_prefix(2);
      if (!s.empty() && s[0] == '_') s.remove_prefix(1);
    }
  }
  if (base == 0) {
    base = 10;
    // Base 0 refuses leading zeros in a nonzero decimal ("010").
    if (s.size() > 1 && s[0] == '0' && s.find_first_not_of("0_") != std::string_view::npos) {
      return std::nullopt;
    }
  }
  if (s.empty() || s.front() == '_' || s.back() == '_') return std::nullopt;
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '_') {
      if (s[i - 1] == '_') return std::nullopt;
      continue;
    }
    const int v = c >= '0' && c <= '9'                     ? c - '0'
                  : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10
                                                           : 99;
    if (v >= base) return std::nullopt;
    digits.push_back(c);
  }
  errno = 0;
  const unsigned long long magnitude = std::strtoull(digits.c_str(), nullptr, base);
  const unsigned long long limit = negative ? 9223372036854775808ULL : 9223372036854775807ULL;
  if (errno == ERANGE || magnitude > limit) {
    overflow = true;
    return std::nullopt;
  }
  return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
}

// Python float(text): whitespace, sign, digits with underscores, inf / nan.
std::optional<double> ParsePyFloat(std::string_view text) {
  const std::string stripped = AsciiDigits(PyStrip(text, nullptr, true, true));
  std::string clean;
  for (size_t i = 0; i < stripped.size(); ++i) {
    const char c = stripped[i];
    if (c == '_') {
      // Underscores only between digits.
      if (i == 0 || i + 1 >= stripped.size() ||
          !std::isdigit(static_cast<unsigned char>(stripped[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(stripped[i + 1]))) {
        return std::nullopt;
      }
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '+' && c != '-') {
      return std::nullopt;
    }
    clean.push_back(c);
  }
  if (clean.empty()) return std::nullopt;
  std::string lower = clean;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view body = lower;
  if (body[0] == '+' || body[0] == '-') body.remove_prefix(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -v : v;
  }
  // Only decimal syntax: no hex floats, no "infinity" spellings strtod also takes.
  if (body.find_first_not_of("0123456789.e+-") != std::string_view::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return v;
}

absl::Status BeyondInt64() {
  return absl::FailedPreconditionError(
      "int filter: integer beyond int64 (arbitrary-precision integers are unsupported)");
}

// int(d); for inf and nan (on which Python raises) the filter returns `fallback`.
absl::StatusOr<Value> TruncateDouble(double d, const Value& fallback) {
  if (!std::isfinite(d)) return fallback;
  // [-2^63, 2^63): the doubles whose truncation fits int64.
  if (d >= 9223372036854775808.0 || d < -9223372036854775808.0) return BeyondInt64();
  return Value::Int(static_cast<int64_t>(d));
}

// x|int and x|float. Python's int() / float() errors become the default; Undefined raises.
absl::StatusOr<Value> ToIntFilter(const Value& v, const Value& fallback, int base) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_integral()) return Value::Int(v.ToInt());
  if (v.is_float()) {
    // do_int catches the OverflowError of int(inf) only on its string path.
    if (std::isinf(v.as_float())) {
      return absl::InvalidArgumentError("cannot convert float infinity to integer");
    }
    return TruncateDouble(v.as_float(), fallback);
  }
  if (v.is_string()) {
    bool overflow = false;
    if (std::optional<int64_t> i = ParsePyInt(v.as_string(), base, overflow); i.has_value()) {
      return Value::Int(*i);
    }
    if (overflow) return BeyondInt64();
    // "42.23"|int is 42.
    if (std::optional<double> d = ParsePyFloat(v.as_string()); d.has_value()) {
      return TruncateDouble(*d, fallback);
    }
  }
  return fallback;
}

absl::StatusOr<Value> ToFloatFilter(const Value& v, const Value& fallback) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_number()) return Value::Float(v.ToDouble());
  if (v.is_string()) {
    if (std::optional<double> d = ParsePyFloat(v.as_string()); d.has_value()) {
      return Value::Float(*d);
    }
  }
  return fallback;
}

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then element 0.
absl::StatusOr<Value> LookupPath(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return GetItem(item, attribute);
  Value current = item;
  std::string_view path = attribute.as_string();
  while (true) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    Value key = digits ? Value::Int(std::strtoll(std::string(part).c_str(), nullptr, 10))
                       : Value::String(std::string(part));
    DF11_ASSIGN_OR_RETURN(current, GetItem(current, key));
    if (dot == std::string_view::npos) return current;
    path.remove_prefix(dot + 1);
  }
}

// select / reject / selectattr / rejectattr (jinja2's select_or_reject, a generator).
absl::Status SelectOrReject(const Value& value, const Args& args, bool select, bool by_attribute,
                            Budget& budget, std::vector<Value>& kept) {
  if (!Truthy(value)) return absl::OkStatus();
  if (!args.keyword.empty()) {
    return absl::FailedPreconditionError("keyword arguments to select/reject are unsupported");
  }
  size_t offset = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) {
      return absl::InvalidArgumentError("Missing parameter for attribute name");
    }
    attribute = args.positional[0];
    offset = 1;
  }
  std::string test;
  Args test_args;
  if (args.positional.size() > offset) {
    if (!args.positional[offset].is_string()) {
      return absl::InvalidArgumentError("the test name must be a string");
    }
    test = args.positional[offset].as_string();
    test_args.positional.assign(args.positional.begin() + offset + 1, args.positional.end());
  }
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
  DF11_RETURN_IF_ERROR(budget.Step(static_cast<int64_t>(items.size())));
  for (const Value& item : items) {
    Value subject = item;
    if (by_attribute) {
      DF11_ASSIGN_OR_RETURN(subject, LookupPath(item, attribute));
    }
    bool passed;
    if (test.empty()) {
      passed = Truthy(subject);
    } else {
      DF11_ASSIGN_OR_RETURN(passed, ApplyTest(test, subject, test_args));
    }
    if (passed == select) kept.push_back(item);
  }
  return absl::OkStatus();
}

// map (jinja2's do_map, a generator).
absl::Status MapFilter(const Value& value, const Args& args, Budget& budget,
                       std::vector<Value>& mapped) {
  if (!Truthy(value)) return absl::OkStatus();
  const Value* attribute = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [key, v] : args.keyword) {
    if (key == "attribute") {
      attribute = &v;
    } else if (key == "default") {
      fallback = &v;
    } else {
      return absl::InvalidArgumentError(Cat("Unexpected keyword argument '", key, "'"));
    }
  }
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
  DF11_RETURN_IF_ERROR(budget.Step(static_cast<int64_t>(items.size())));
  if (attribute != nullptr) {
    if (!args.positional.empty()) {
      return absl::InvalidArgumentError("map() with attribute= takes no positional arguments");
    }
    for (const Value& item : items) {
      DF11_ASSIGN_OR_RETURN(Value v, LookupPath(item, *attribute));
      if (fallback != nullptr && v.is_undefined()) v = *fallback;
      mapped.push_back(std::move(v));
    }
    return absl::OkStatus();
  }
  if (fallback != nullptr) {
    return absl::InvalidArgumentError("map() takes default= only with attribute=");
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return absl::InvalidArgumentError("map requires a filter argument");
  }
  const std::string& filter = args.positional[0].as_string();
  if (!IsSupportedFilter(filter)) {
    return absl::FailedPreconditionError(Cat("unsupported Jinja filter '", filter, "'"));
  }
  Args filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  for (const Value& item : items) {
    DF11_ASSIGN_OR_RETURN(Value v, ApplyFilter(filter, item, filter_args, budget));
    mapped.push_back(std::move(v));
  }
  return absl::OkStatus();
}

// items (jinja2's do_items, a generator).
absl::Status ItemsFilter(const Value& value, const Args& args, Budget& budget,
                         std::vector<Value>& pairs) {
  if (value.is_undefined()) return absl::OkStatus();
  if (!value.is_dict())
    return absl::InvalidArgumentError("Can only get item pairs from a mapping.");
  DF11_RETURN_IF_ERROR(budget.Step(static_cast<int64_t>(value.as_dict().size())));
  for (const auto& [key, v] : value.as_dict().entries()) {
    DF11_ASSIGN_OR_RETURN(Value pair, MakeList({Value::String(key), v}, ListKind::kTuple));
    pairs.push_back(std::move(pair));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> JoinFilter(const Value& value, const Args& args, Budget& budget) {
  DF11_ASSIGN_OR_RETURN(auto bound, BindArgs("join", args, {"d", "attribute"}));
  std::string separator;
  if (bound[0].has_value()) {
    DF11_ASSIGN_OR_RETURN(separator, SoftStr(*bound[0]));
  }
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
  DF11_RETURN_IF_ERROR(budget.Step(static_cast<int64_t>(items.size())));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (bound[1].has_value() && !bound[1]->is_none()) {
      DF11_ASSIGN_OR_RETURN(item, LookupPath(item, *bound[1]));
    }
    if (i > 0) out.append(separator);
    DF11_ASSIGN_OR_RETURN(std::string text, ToStr(item));
    out.append(text);
    DF11_RETURN_IF_ERROR(budget.CheckStringSize(out.size()));
  }
  return StringResult(std::move(out), budget);
}

absl::StatusOr<Value> ToJsonFilter(const Value& value, const Args& args, Budget& budget) {
  // transformers' override: tojson(x, ensure_ascii=False, indent=None, separators=None,
  // sort_keys=False) -> json.dumps(...).
  DF11_ASSIGN_OR_RETURN(
      auto bound, BindArgs("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonDumpOptions options;
  options.max_bytes = budget.limits().max_output_bytes;
  if (bound[0].has_value()) options.ensure_ascii = Truthy(*bound[0]);
  if (bound[1].has_value() && !bound[1]->is_none()) {
    const Value& indent = *bound[1];
    if (indent.is_string()) {
      options.indent = indent.as_string();
    } else if (indent.is_integral()) {
      const int64_t n = indent.ToInt();
      DF11_RETURN_IF_ERROR(budget.CheckStringSize(n > 0 ? static_cast<size_t>(n) : 0));
      options.indent = std::string(n > 0 ? static_cast<size_t>(n) : 0, ' ');
    } else {
      return absl::InvalidArgumentError(
          Cat("can't multiply sequence by non-int of type '", TypeName(indent), "'"));
    }
    options.item_separator = ",";
  }
  if (bound[2].has_value() && !bound[2]->is_none()) {
    const Value& separators = *bound[2];
    if (!separators.is_list() || separators.as_list().items.size() != 2 ||
        !separators.as_list().items[0].is_string() || !separators.as_list().items[1].is_string()) {
      return absl::InvalidArgumentError("tojson separators must be a pair of strings");
    }
    options.item_separator = separators.as_list().items[0].as_string();
    options.key_separator = separators.as_list().items[1].as_string();
  }
  if (bound[3].has_value()) options.sort_keys = Truthy(*bound[3]);
  std::string out;
  DF11_RETURN_IF_ERROR(DumpJson(value, options, out));
  return StringResult(std::move(out), budget);
}

// jinja2's do_title: split at runs of [-\s({[<] (kept), then each piece's first character
// uppercased and the rest lowercased.
std::string JinjaTitle(std::string_view s) {
  const std::u32string text = DecodeUtf8(s);
  auto is_boundary = [](char32_t c) {
    return IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
  };
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const bool boundary = is_boundary(text[i]);
    size_t j = i;
    while (j < text.size() && is_boundary(text[j]) == boundary) ++j;
    const std::u32string_view piece = std::u32string_view(text).substr(i, j - i);
    out.append(PyUpper(EncodeUtf8(piece.substr(0, 1))));
    out.append(PyLower(EncodeUtf8(piece.substr(1))));
    i = j;
  }
  return out;
}

absl::StatusOr<Value> ReverseFilter(const Value& value) {
  if (value.is_string()) {
    std::u32string text = DecodeUtf8(value.as_string());
    std::reverse(text.begin(), text.end());
    return Value::String(EncodeUtf8(text));
  }
  // reversed(x) is an iterator; a generator, which reversed() refuses, becomes a list.
  const bool is_generator = value.is_list() && value.as_list().kind == ListKind::kGenerator;
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
  std::reverse(items.begin(), items.end());
  return MakeList(std::move(items), is_generator ? ListKind::kList : ListKind::kGenerator);
}

absl::StatusOr<Value> LastFilter(const Value& value) {
  if (value.is_list() && value.as_list().kind == ListKind::kGenerator) {
    return absl::InvalidArgumentError("'generator' object is not reversible");
  }
  DF11_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

absl::StatusOr<std::vector<std::optional<Value>>> Bind(std::string_view filter, const Args& args,
                                                       std::vector<std::string_view> params) {
  return BindArgs(filter, args, std::move(params));
}

}  // namespace

absl::StatusOr<std::vector<std::optional<Value>>> BindArgs(std::string_view function,
                                                           const Args& args,
                                                           std::vector<std::string_view> params) {
  std::vector<std::optional<Value>> bound(params.size());
  if (args.positional.size() > params.size()) {
    return absl::InvalidArgumentError(Cat(function, "() takes at most ", params.size(),
                                          " argument(s) (", args.positional.size(), " given)"));
  }
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    const auto it = std::find(params.begin(), params.end(), key);
    if (it == params.end()) {
      return absl::InvalidArgumentError(
          Cat(function, "() got an unexpected keyword argument '", key, "'"));
    }
    std::optional<Value>& slot = bound[it - params.begin()];
    if (slot.has_value()) {
      return absl::InvalidArgumentError(
          Cat(function, "() got multiple values for argument '", key, "'"));
    }
    slot = value;
  }
  return bound;
}

bool IsSupportedFilter(std::string_view name) { return Listed(kFilters, name); }
bool IsSupportedTest(std::string_view name) { return Listed(kTests, name); }

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& value, const Args& args,
                                  Budget& budget) {
  DF11_RETURN_IF_ERROR(budget.Step());
  if (name == "length" || name == "count") {
    DF11_RETURN_IF_ERROR(Bind(name, args, {}).status());
    DF11_ASSIGN_OR_RETURN(int64_t n, Length(value));
    return Value::Int(n);
  }
  if (name == "trim") {
    DF11_ASSIGN_OR_RETURN(auto bound, Bind(name, args, {"chars"}));
    DF11_ASSIGN_OR_RETURN(std::string text, SoftStr(value));
    const std::string* chars = nullptr;
    if (bound[0].has_value() && !bound[0]->is_none()) {
      if (!bound[0]->is_string()) {
        return absl::InvalidArgumentError("strip arg must be None or str");
      }
      chars = &bound[0]->as_string();
    }
    return StringResult(PyStrip(text, chars, true, true), budget);
  }
  if (name == "tojson") return ToJsonFilter(value, args, budget);
  if (name == "items") {
    DF11_RETURN_IF_ERROR(Bind(name, args, {}).status());
    return LazyGenerator(
        [&](std::vector<Value>& out) { return ItemsFilter(value, args, budget, out); });
  }
  if (name == "join") return JoinFilter(value, args, budget);
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool select = name == "select" || name == "selectattr";
    const bool by_attribute = name == "selectattr" || name == "rejectattr";
    return LazyGenerator([&](std::vector<Value>& out) {
      return SelectOrReject(value, args, select, by_attribute, budget, out);
    });
  }
  if (name == "map") {
    return LazyGenerator(
        [&](std::vector<Value>& out) { return MapFilter(value, args, budget, out); });
  }
  if (name == "first") {
    DF11_RETURN_IF_ERROR(Bind(name, args, {}).status());
    // next(iter(x)): a generator yields its first item even if a later one fails.
    if (value.is_list() && value.as_list().kind == ListKind::kGenerator &&
        !value.as_list().consumed && !value.as_list().items.empty()) {
      value.as_list().consumed = true;
      return value.as_list().items.front();
    }
    DF11_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
    if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
    return items.front();
  }
  if (name == "last") {
    DF11_RETURN_IF_ERROR(Bind(name, args, {}).status());
    return LastFilter(value);
  }
  if (name == "lower" || name == "upper" || name == "capitalize" || name == "title" ||
      name == "string") {
    DF11_RETURN_IF_ERROR(Bind(name, args, {}).status());
    DF11_ASSIGN_OR_RETURN(std::string text, SoftStr(value));
    if (name == "lower") return StringResult(PyLower(text), budget);
    if (name == "upper") return StringResult(PyUpper(text), budget);
    if (name == "capitalize") return StringResult(PyCapitalize(text), budget);
    if (name == "title") return StringResult(JinjaTitle(text), budget);
    return StringResult(std::move(text), budget);
  }
  if (name == "default" || name == "d") {
    DF11_ASSIGN_OR_RETURN(auto bound, Bind(name, args, {"default_value", "boolean"}));
    const bool boolean = bound[1].has_value() && Truthy(*bound[1]);
    if (value.is_undefined() || (boolean && !Truthy(value))) {
      return bound[0].has_value() ? *bound[0] : Value::String("");
    }
    return value;
  }
  if (name == "list") {
    DF11_RETURN_IF_ERROR(Bind(name, args, {}).status());
    DF11_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
    DF11_RETURN_IF_ERROR(budget.Step(static_cast<int64_t>(items.size())));
    return MakeList(std::move(items));
  }
  if (name == "int") {
    DF11_ASSIGN_OR_RETURN(auto bound, Bind(name, args, {"default", "base"}));
    int base = 10;
    if (bound[1].has_value()) {
      if (!bound[1]->is_integral() ||
          (bound[1]->ToInt() != 0 && (bound[1]->ToInt() < 2 || bound[1]->ToInt() > 36))) {
        return absl::InvalidArgumentError("int() base must be >= 2 and <= 36, or 0");
      }
      base = static_cast<int>(bound[1]->ToInt());
    }
    return ToIntFilter(value, bound[0].value_or(Value::Int(0)), base);
  }
  if (name == "float") {
    DF11_ASSIGN_OR_RETURN(auto bound, Bind(name, args, {"default"}));
    return ToFloatFilter(value, bound[0].value_or(Value::Float(0.0)));
  }
  if (name == "abs") {
    DF11_RETURN_IF_ERROR(Bind(name, args, {}).status());
    if (value.is_float()) return Value::Float(std::fabs(value.as_float()));
    if (value.is_integral()) {
      const int64_t i = value.ToInt();
      if (i == INT64_MIN) return absl::FailedPreconditionError("integer overflow in abs()");
      return Value::Int(i < 0 ? -i : i);
    }
    if (value.is_undefined()) return UndefinedError(value);
    return absl::InvalidArgumentError(Cat("bad operand type for abs(): '", TypeName(value), "'"));
  }
  if (name == "replace") {
    DF11_ASSIGN_OR_RETURN(auto bound, Bind(name, args, {"old", "new", "count"}));
    if (!bound[0].has_value() || !bound[1].has_value()) {
      return absl::InvalidArgumentError("replace() missing required argument");
    }
    DF11_ASSIGN_OR_RETURN(std::string text, SoftStr(value));
    DF11_ASSIGN_OR_RETURN(std::string old, SoftStr(*bound[0]));
    DF11_ASSIGN_OR_RETURN(std::string repl, SoftStr(*bound[1]));
    Args method_args;
    method_args.positional = {Value::String(std::move(old)), Value::String(std::move(repl))};
    if (bound[2].has_value() && !bound[2]->is_none()) method_args.positional.push_back(*bound[2]);
    auto method = std::make_shared<Callable>();
    method->name = "replace";
    method->receiver = Value::String(std::move(text));
    method->is_method = true;
    return CallFunction(*method, method_args, budget);
  }
  if (name == "reverse") {
    DF11_RETURN_IF_ERROR(Bind(name, args, {}).status());
    return ReverseFilter(value);
  }
  return absl::FailedPreconditionError(Cat("unsupported Jinja filter '", name, "'"));
}

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& value, const Args& args) {
  if (!IsSupportedTest(name)) {
    return absl::FailedPreconditionError(Cat("unsupported Jinja test '", name, "'"));
  }
  const bool takes_argument =
      name == "divisibleby" || name == "in" || name == "eq" || name == "equalto" || name == "==" ||
      name == "ne" || name == "!=" || name == "lt" || name == "<" || name == "lessthan" ||
      name == "le" || name == "<=" || name == "gt" || name == ">" || name == "greaterthan" ||
      name == "ge" || name == ">=" || name == "sameas";
  DF11_ASSIGN_OR_RETURN(auto bound, BindArgs(Cat("test ", name), args,
                                             takes_argument ? std::vector<std::string_view>{"other"}
                                                            : std::vector<std::string_view>{}));
  if (takes_argument && !bound[0].has_value()) {
    return absl::InvalidArgumentError(Cat("test '", name, "' needs an argument"));
  }
  const Value& other = takes_argument ? *bound[0] : value;
  if (name == "defined") return !value.is_undefined();
  if (name == "undefined") return value.is_undefined();
  if (name == "none") return value.is_none();
  if (name == "boolean") return value.is_bool();
  if (name == "true") return value.is_bool() && value.as_bool();
  if (name == "false") return value.is_bool() && !value.as_bool();
  if (name == "integer") return value.is_int();
  if (name == "float") return value.is_float();
  if (name == "number") return value.is_number();
  if (name == "string") return value.is_string();
  if (name == "mapping") return value.is_dict();
  if (name == "sequence") {
    // len(x) and x.__getitem__ both exist.
    if (value.is_undefined() || value.is_string() || value.is_dict()) return true;
    if (!value.is_list()) return false;
    const ListKind kind = value.as_list().kind;
    return kind == ListKind::kList || kind == ListKind::kTuple || kind == ListKind::kRange;
  }
  if (name == "iterable") {
    return value.is_undefined() || value.is_string() || value.is_list() || value.is_dict() ||
           (value.is_object() && value.as_object().kind == Object::Kind::kLoop);
  }
  if (name == "callable") {
    // Jinja's Undefined and LoopContext define __call__.
    return value.is_callable() || value.is_undefined() ||
           (value.is_object() && value.as_object().kind == Object::Kind::kLoop);
  }
  if (name == "lower" || name == "upper") {
    DF11_ASSIGN_OR_RETURN(std::string text, ToStr(value));
    return name == "lower" ? PyIsLower(text) : PyIsUpper(text);
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    RenderLimits limits;
    Budget budget(limits);
    DF11_ASSIGN_OR_RETURN(
        Value mod, BinaryOp("%", value, name == "divisibleby" ? other : Value::Int(2), budget));
    return Equals(mod, Value::Int(name == "odd" ? 1 : 0));
  }
  if (name == "in") return Contains(other, value);
  if (name == "eq" || name == "equalto" || name == "==") return Equals(value, other);
  if (name == "ne" || name == "!=") return !Equals(value, other);
  if (name == "lt" || name == "<" || name == "lessthan") {
    return Compare(value, other, Ordering::kLess);
  }
  if (name == "le" || name == "<=") return Compare(value, other, Ordering::kLessEqual);
  if (name == "gt" || name == ">" || name == "greaterthan") {
    return Compare(value, other, Ordering::kGreater);
  }
  if (name == "ge" || name == ">=") return Compare(value, other, Ordering::kGreaterEqual);
  // sameas: identity, which is well-defined here only for the None / True / False singletons.
  const bool singleton_value = value.is_none() || value.is_bool();
  const bool singleton_other = other.is_none() || other.is_bool();
  if (!singleton_value && !singleton_other) {
    return absl::FailedPreconditionError(
        "the 'sameas' test is supported only against none, true or false");
  }
  if (value.type() != other.type()) return false;
  return value.is_none() || value.as_bool() == other.as_bool();
}

}  // namespace df11::runtime::chat
