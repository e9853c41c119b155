#include "daemon/runtime/text/chat/value.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "daemon/runtime/text/chat/py_text.h"
#include "daemon/runtime/text/chat/str_cat.h"

namespace df11::runtime::chat {
namespace {

// Dicts up to this size are searched linearly; bigger ones keep a hash index.
constexpr size_t kLinearDictSize = 8;

const std::string& DefaultUndefinedMessage() {
  static const std::string* const message = new std::string("undefined value");
  return *message;
}

absl::Status TooDeep() {
  return absl::ResourceExhaustedError(Cat("value nested deeper than ", kMaxValueDepth, " levels"));
}

// Jinja's object_type_repr: "None" for None, "<type> object" otherwise.
std::string ObjectTypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  return Cat(TypeName(v), " object");
}

absl::Status AppendRepr(const Value& v, std::string& out);

absl::Status AppendItemsRepr(const std::vector<Value>& items, std::string& out) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.append(", ");
    if (absl::Status s = AppendRepr(items[i], out); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status AppendRepr(const Value& v, std::string& out) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      out.append("Undefined");
      return absl::OkStatus();
    case Value::Type::kNone:
      out.append("None");
      return absl::OkStatus();
    case Value::Type::kBool:
      out.append(v.as_bool() ? "True" : "False");
      return absl::OkStatus();
    case Value::Type::kInt:
      absl::StrAppend(&out, v.as_int());
      return absl::OkStatus();
    case Value::Type::kFloat:
      out.append(PyFloatRepr(v.as_float()));
      return absl::OkStatus();
    case Value::Type::kString:
      out.append(PyStrRepr(v.as_string()));
      return absl::OkStatus();
    case Value::Type::kList: {
      const List& list = v.as_list();
      switch (list.kind) {
        case ListKind::kList:
          out.push_back('[');
          if (absl::Status s = AppendItemsRepr(list.items, out); !s.ok()) return s;
          out.push_back(']');
          return absl::OkStatus();
        case ListKind::kTuple:
          out.push_back('(');
          if (absl::Status s = AppendItemsRepr(list.items, out); !s.ok()) return s;
          if (list.items.size() == 1) out.push_back(',');
          out.push_back(')');
          return absl::OkStatus();
        case ListKind::kDictKeys:
        case ListKind::kDictValues:
        case ListKind::kDictItems:
          absl::StrAppend(&out, TypeName(v), "([");
          if (absl::Status s = AppendItemsRepr(list.items, out); !s.ok()) return s;
          out.append("])");
          return absl::OkStatus();
        case ListKind::kGenerator:
        case ListKind::kRange:
          break;
      }
      return absl::FailedPreconditionError(
          Cat("printing a ", TypeName(v), " object is unsupported (convert it with |list first)"));
    }
    case Value::Type::kDict: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, value] : v.as_dict().entries()) {
        if (!first) out.append(", ");
        first = false;
        out.append(PyStrRepr(key));
        out.append(": ");
        if (absl::Status s = AppendRepr(value, out); !s.ok()) return s;
      }
      out.push_back('}');
      return absl::OkStatus();
    }
    case Value::Type::kObject:
    case Value::Type::kCallable:
      break;
  }
  return absl::FailedPreconditionError(Cat("printing a ", TypeName(v), " object is unsupported"));
}

bool ItemsEqual(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!Equals(a[i], b[i])) return false;
  }
  return true;
}

// Set equality, for dict_keys and dict_items.
bool SameElements(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (const Value& x : a) {
    if (std::none_of(b.begin(), b.end(), [&](const Value& y) { return Equals(x, y); })) {
      return false;
    }
  }
  return true;
}

// Python's exact int/float comparison: -1, 0 or 1 (NaN compares unequal to everything, which
// callers handle before calling).
int CompareIntDouble(int64_t i, double d) {
  // Every int64 outside (-2^63, 2^63) compares by the double; inside, compare exactly.
  constexpr double kTwo63 = 9223372036854775808.0;
  if (d >= kTwo63) return -1;
  if (d < -kTwo63) return 1;
  const double floor = std::floor(d);
  const auto whole = static_cast<int64_t>(floor);
  if (i < whole) return -1;
  if (i > whole) return 1;
  return d > floor ? -1 : 0;
}

// Three-way comparison of two numbers; nullopt when one is NaN.
std::optional<int> CompareNumbers(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    const int64_t x = a.ToInt(), y = b.ToInt();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_float() && b.is_float()) {
    const double x = a.as_float(), y = b.as_float();
    if (std::isnan(x) || std::isnan(y)) return std::nullopt;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_float()) {
    if (std::isnan(a.as_float())) return std::nullopt;
    return -CompareIntDouble(b.ToInt(), a.as_float());
  }
  if (std::isnan(b.as_float())) return std::nullopt;
  return CompareIntDouble(a.ToInt(), b.as_float());
}

bool Holds(Ordering op, int cmp) {
  switch (op) {
    case Ordering::kLess:
      return cmp < 0;
    case Ordering::kLessEqual:
      return cmp <= 0;
    case Ordering::kGreater:
      return cmp > 0;
    case Ordering::kGreaterEqual:
      return cmp >= 0;
  }
  return false;
}

const char* OrderingSymbol(Ordering op) {
  switch (op) {
    case Ordering::kLess:
      return "<";
    case Ordering::kLessEqual:
      return "<=";
    case Ordering::kGreater:
      return ">";
    case Ordering::kGreaterEqual:
      return ">=";
  }
  return "?";
}

absl::Status PrefixPath(const absl::Status& s, std::string_view what) {
  return absl::Status(s.code(), Cat(what, s.message()));
}

absl::StatusOr<Value> BuildList(std::vector<Value> items, ListKind kind,
                                absl::Status deferred_error) {
  auto list = std::make_shared<List>();
  list->kind = kind;
  for (const Value& item : items) list->depth = std::max(list->depth, item.depth() + 1);
  if (list->depth > kMaxValueDepth) return TooDeep();
  list->items = std::move(items);
  list->deferred_error = std::move(deferred_error);
  return Value::FromList(std::move(list));
}

absl::StatusOr<Value> FromJsonAt(const nlohmann::ordered_json& json, int depth) {
  using Json = nlohmann::ordered_json;
  switch (json.type()) {
    case Json::value_t::null:
      return Value::None();
    case Json::value_t::boolean:
      return Value::Bool(json.get<bool>());
    case Json::value_t::number_integer:
      return Value::Int(json.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const auto u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::FailedPreconditionError(
            Cat(": integer ", u, " is beyond int64 (unsupported)"));
      }
      return Value::Int(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value::Float(json.get<double>());
    case Json::value_t::string: {
      const auto& s = json.get_ref<const std::string&>();
      if (!IsValidUtf8(s)) return absl::InvalidArgumentError(": string is not valid UTF-8");
      return Value::String(s);
    }
    case Json::value_t::array: {
      if (depth >= kMaxValueDepth) return PrefixPath(TooDeep(), ": ");
      std::vector<Value> items;
      items.reserve(json.size());
      for (size_t i = 0; i < json.size(); ++i) {
        absl::StatusOr<Value> item = FromJsonAt(json[i], depth + 1);
        if (!item.ok()) return PrefixPath(item.status(), Cat("[", i, "]"));
        items.push_back(*std::move(item));
      }
      return MakeList(std::move(items));
    }
    case Json::value_t::object: {
      if (depth >= kMaxValueDepth) return PrefixPath(TooDeep(), ": ");
      Dict dict;
      for (const auto& [key, value] : json.items()) {
        if (!IsValidUtf8(key)) {
          return absl::InvalidArgumentError(": an object key is not valid UTF-8");
        }
        absl::StatusOr<Value> item = FromJsonAt(value, depth + 1);
        if (!item.ok()) return PrefixPath(item.status(), Cat(".", key));
        dict.Set(key, *std::move(item));
      }
      return MakeDict(std::move(dict));
    }
    case Json::value_t::binary:
    case Json::value_t::discarded:
      break;
  }
  return absl::FailedPreconditionError(": binary JSON values are unsupported");
}

}  // namespace

Value::Value() : storage_(UndefinedTag{nullptr}) {}

Value Value::Undefined(std::string message) {
  return Value(UndefinedTag{std::make_shared<const std::string>(std::move(message))});
}
Value Value::None() { return Value(NoneTag{}); }
Value Value::Bool(bool b) { return Value(Storage(std::in_place_type<bool>, b)); }
Value Value::Int(int64_t i) { return Value(Storage(std::in_place_type<int64_t>, i)); }
Value Value::Float(double d) { return Value(Storage(std::in_place_type<double>, d)); }
Value Value::String(std::string s) {
  return Value(
      Storage(std::in_place_type<StringPtr>, std::make_shared<const std::string>(std::move(s))));
}
Value Value::FromList(std::shared_ptr<const List> list) { return Value(std::move(list)); }
Value Value::FromDict(std::shared_ptr<const Dict> dict) { return Value(std::move(dict)); }
Value Value::FromObject(std::shared_ptr<Object> object) { return Value(std::move(object)); }
Value Value::FromCallable(std::shared_ptr<const Callable> callable) {
  return Value(std::move(callable));
}

double Value::ToDouble() const { return is_float() ? as_float() : static_cast<double>(ToInt()); }

const std::string& Value::undefined_message() const {
  const auto& message = std::get<UndefinedTag>(storage_).message;
  return message != nullptr ? *message : DefaultUndefinedMessage();
}

int Value::depth() const {
  if (is_list()) return as_list().depth;
  if (is_dict()) return as_dict().depth();
  return 0;
}

const Value* Dict::Find(std::string_view key) const {
  if (!index_.empty()) {
    auto it = index_.find(ToAbsl(key));
    return it == index_.end() ? nullptr : &entries_[it->second].second;
  }
  for (const auto& [k, v] : entries_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(std::string key, Value value) {
  depth_ = std::max(depth_, value.depth() + 1);
  if (!index_.empty()) {
    auto [it, inserted] = index_.try_emplace(key, entries_.size());
    if (!inserted) {
      entries_[it->second].second = std::move(value);
      return;
    }
    entries_.emplace_back(std::move(key), std::move(value));
    return;
  }
  for (auto& [k, v] : entries_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
  if (entries_.size() > kLinearDictSize) {
    for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
  }
}

absl::StatusOr<Value> MakeList(std::vector<Value> items, ListKind kind) {
  return BuildList(std::move(items), kind, absl::OkStatus());
}

absl::StatusOr<Value> MakeGenerator(std::vector<Value> items, absl::Status deferred_error) {
  return BuildList(std::move(items), ListKind::kGenerator, std::move(deferred_error));
}

absl::StatusOr<Value> MakeDict(Dict dict) {
  if (dict.depth() > kMaxValueDepth) return TooDeep();
  return Value::FromDict(std::make_shared<const Dict>(std::move(dict)));
}

Value UndefinedAttribute(const Value& obj, std::string_view name) {
  return Value::Undefined(
      Cat(PyStrRepr(ObjectTypeRepr(obj)), " has no attribute ", PyStrRepr(name)));
}

Value UndefinedElement(const Value& obj, const Value& key) {
  if (key.is_string()) return UndefinedAttribute(obj, key.as_string());
  absl::StatusOr<std::string> key_repr = Repr(key);
  return Value::Undefined(
      Cat(ObjectTypeRepr(obj), " has no element ", key_repr.ok() ? *key_repr : TypeName(key)));
}

absl::Status UndefinedError(const Value& undefined) {
  return absl::InvalidArgumentError(undefined.undefined_message());
}

bool Truthy(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return false;
    case Value::Type::kBool:
      return v.as_bool();
    case Value::Type::kInt:
      return v.as_int() != 0;
    case Value::Type::kFloat:
      return v.as_float() != 0;
    case Value::Type::kString:
      return !v.as_string().empty();
    case Value::Type::kList:
      return v.as_list().kind == ListKind::kGenerator || !v.as_list().items.empty();
    case Value::Type::kDict:
      return v.as_dict().size() != 0;
    case Value::Type::kObject:
    case Value::Type::kCallable:
      return true;
  }
  return false;
}

std::string TypeName(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return "Undefined";
    case Value::Type::kNone:
      return "NoneType";
    case Value::Type::kBool:
      return "bool";
    case Value::Type::kInt:
      return "int";
    case Value::Type::kFloat:
      return "float";
    case Value::Type::kString:
      return "str";
    case Value::Type::kList:
      switch (v.as_list().kind) {
        case ListKind::kList:
          return "list";
        case ListKind::kTuple:
          return "tuple";
        case ListKind::kGenerator:
          return "generator";
        case ListKind::kRange:
          return "range";
        case ListKind::kDictKeys:
          return "dict_keys";
        case ListKind::kDictValues:
          return "dict_values";
        case ListKind::kDictItems:
          return "dict_items";
      }
      return "list";
    case Value::Type::kDict:
      return "dict";
    case Value::Type::kObject:
      return v.as_object().kind == Object::Kind::kNamespace ? "Namespace" : "LoopContext";
    case Value::Type::kCallable:
      return v.as_callable().is_method ? "builtin_function_or_method" : "function";
  }
  return "object";
}

absl::StatusOr<std::string> Repr(const Value& v) {
  std::string out;
  if (absl::Status s = AppendRepr(v, out); !s.ok()) return s;
  return out;
}

absl::StatusOr<std::string> ToStr(const Value& v) {
  if (v.is_undefined()) return std::string();
  if (v.is_string()) return v.as_string();
  return Repr(v);
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    const std::optional<int> cmp = CompareNumbers(a, b);
    return cmp.has_value() && *cmp == 0;
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return true;
    case Value::Type::kString:
      return a.as_string() == b.as_string();
    case Value::Type::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (&x == &y) return true;
      if (x.kind != y.kind) return false;
      switch (x.kind) {
        case ListKind::kList:
        case ListKind::kTuple:
        case ListKind::kRange:
          return ItemsEqual(x.items, y.items);
        case ListKind::kDictKeys:
        case ListKind::kDictItems:
          return SameElements(x.items, y.items);
        case ListKind::kGenerator:
        case ListKind::kDictValues:
          return false;  // identity, checked above
      }
      return false;
    }
    case Value::Type::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        const Value* other = y.Find(key);
        if (other == nullptr || !Equals(value, *other)) return false;
      }
      return true;
    }
    case Value::Type::kObject:
      return a.object_ptr() == b.object_ptr();
    case Value::Type::kCallable: {
      const Callable& x = a.as_callable();
      const Callable& y = b.as_callable();
      return &x == &y || (!x.is_method && !y.is_method && x.name == y.name);
    }
    default:
      return false;  // numbers handled above
  }
}

absl::StatusOr<bool> Compare(const Value& a, const Value& b, Ordering op) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) {
    const std::optional<int> cmp = CompareNumbers(a, b);
    return cmp.has_value() && Holds(op, *cmp);
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order.
    const int cmp = a.as_string().compare(b.as_string());
    return Holds(op, cmp);
  }
  if (a.is_list() && b.is_list() && a.as_list().kind == b.as_list().kind &&
      (a.as_list().kind == ListKind::kList || a.as_list().kind == ListKind::kTuple)) {
    const std::vector<Value>& x = a.as_list().items;
    const std::vector<Value>& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equals(x[i], y[i])) return Compare(x[i], y[i], op);
    }
    const int cmp = x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    return Holds(op, cmp);
  }
  return absl::InvalidArgumentError(Cat("'", OrderingSymbol(op),
                                        "' not supported between instances of '", TypeName(a),
                                        "' and '", TypeName(b), "'"));
}

absl::StatusOr<std::vector<Value>> Iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return std::vector<Value>();
    case Value::Type::kString: {
      std::vector<Value> chars;
      std::string piece;
      for (char32_t c : DecodeUtf8(v.as_string())) {
        piece.clear();
        AppendUtf8(c, piece);
        chars.push_back(Value::String(piece));
      }
      return chars;
    }
    case Value::Type::kList: {
      const List& list = v.as_list();
      if (list.kind == ListKind::kGenerator) {
        if (list.consumed) return std::vector<Value>();
        list.consumed = true;
        if (!list.deferred_error.ok()) return list.deferred_error;
      }
      return list.items;
    }
    case Value::Type::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.as_dict().size());
      for (const auto& entry : v.as_dict().entries()) keys.push_back(Value::String(entry.first));
      return keys;
    }
    default:
      return absl::InvalidArgumentError(Cat("'", TypeName(v), "' object is not iterable"));
  }
}

absl::StatusOr<int64_t> Length(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return 0;
    case Value::Type::kString:
      return CodePointCount(v.as_string());
    case Value::Type::kList:
      if (v.as_list().kind != ListKind::kGenerator) {
        return static_cast<int64_t>(v.as_list().items.size());
      }
      break;
    case Value::Type::kDict:
      return static_cast<int64_t>(v.as_dict().size());
    case Value::Type::kObject:
      if (v.as_object().kind == Object::Kind::kLoop) {
        return static_cast<int64_t>(v.as_object().loop_items->items.size());
      }
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(Cat("object of type '", TypeName(v), "' has no len()"));
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::kUndefined:
      return false;
    case Value::Type::kString:
      if (!item.is_string()) {
        return absl::InvalidArgumentError(
            Cat("'in <string>' requires string as left operand, not ", TypeName(item)));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::kDict:
      if (item.is_list() || item.is_dict()) {
        return absl::InvalidArgumentError(Cat("unhashable type: '", TypeName(item), "'"));
      }
      return item.is_string() && container.as_dict().Find(item.as_string()) != nullptr;
    case Value::Type::kList: {
      absl::StatusOr<std::vector<Value>> items = Iterate(container);
      if (!items.ok()) return items.status();
      return std::any_of(items->begin(), items->end(),
                         [&](const Value& x) { return Equals(x, item); });
    }
    default:
      return absl::InvalidArgumentError(
          Cat("argument of type '", TypeName(container), "' is not iterable"));
  }
}

absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json, std::string_view what) {
  absl::StatusOr<Value> value = FromJsonAt(json, 1);
  if (!value.ok()) return PrefixPath(value.status(), what);
  return value;
}

}  // namespace df11::runtime::chat
