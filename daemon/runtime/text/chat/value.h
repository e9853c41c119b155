// The values a chat template computes with: the Python objects Jinja would see for JSON inputs
// and template literals, with Python's truthiness, equality, ordering, iteration, len(), `in`,
// str() and repr().
//
//   Value v = Value::String("hi");
//   DF11_ASSIGN_OR_RETURN(std::string text, ToStr(v));   // "hi"; repr would give "'hi'"
//
// Lists, dicts and strings are immutable and shared (copying a Value is cheap); the sandbox that
// transformers renders with forbids mutating them too. Only a namespace() object is mutable, and
// it is shared by reference, as in Python. Jinja's Undefined is a value of its own: falsy, printed
// as "", iterable as empty, and an error (with Jinja's message, e.g. "'dict object' has no
// attribute 'content'") as soon as anything else is done with it.
//
// Errors are returned as statuses: kInvalidArgument for what raises in Python (TypeError,
// UndefinedError), kFailedPrecondition for what Python can do but this interpreter does not
// (printing a generator, whose text is a memory address), kResourceExhausted for a list or dict
// nested deeper than kMaxValueDepth.
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_VALUE_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_VALUE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace df11::runtime::chat {

// Lists and dicts nest at most this deep. Every recursive walk over a value (repr, tojson,
// equality) is bounded by it; namespace objects are never walked into, so cycles through them
// are harmless.
inline constexpr int kMaxValueDepth = 128;

struct List;
class Dict;
struct Object;
struct Callable;

class Value {
 public:
  enum class Type : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kObject,
    kCallable,
  };

  // An Undefined whose error message is "undefined value".
  Value();
  // An Undefined; `message` is the text of the error raised when it is used.
  static Value Undefined(std::string message);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value FromList(std::shared_ptr<const List> list);
  static Value FromDict(std::shared_ptr<const Dict> dict);
  static Value FromObject(std::shared_ptr<Object> object);
  static Value FromCallable(std::shared_ptr<const Callable> callable);

  Type type() const { return static_cast<Type>(storage_.index()); }
  bool is_undefined() const { return type() == Type::kUndefined; }
  bool is_none() const { return type() == Type::kNone; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_int() const { return type() == Type::kInt; }
  bool is_float() const { return type() == Type::kFloat; }
  // bool, int or float (Python's numbers.Number; bool is an int subclass).
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  // bool or int: usable as an index.
  bool is_integral() const { return is_bool() || is_int(); }
  bool is_string() const { return type() == Type::kString; }
  bool is_list() const { return type() == Type::kList; }
  bool is_dict() const { return type() == Type::kDict; }
  bool is_object() const { return type() == Type::kObject; }
  bool is_callable() const { return type() == Type::kCallable; }

  bool as_bool() const { return std::get<bool>(storage_); }
  int64_t as_int() const { return std::get<int64_t>(storage_); }
  double as_float() const { return std::get<double>(storage_); }
  // The value of a bool or int as an integer.
  int64_t ToInt() const { return is_bool() ? (as_bool() ? 1 : 0) : as_int(); }
  // The value of a bool, int or float as a double.
  double ToDouble() const;
  const std::string& as_string() const { return *std::get<StringPtr>(storage_); }
  const List& as_list() const { return *std::get<ListPtr>(storage_); }
  const std::shared_ptr<const List>& list_ptr() const { return std::get<ListPtr>(storage_); }
  const Dict& as_dict() const { return *std::get<DictPtr>(storage_); }
  Object& as_object() const { return *std::get<ObjectPtr>(storage_); }
  const Object* object_ptr() const { return std::get<ObjectPtr>(storage_).get(); }
  const Callable& as_callable() const { return *std::get<CallablePtr>(storage_); }
  // The message of the error an Undefined raises when used.
  const std::string& undefined_message() const;
  // Nesting depth: 0 for scalars, 1 + the deepest element for lists and dicts.
  int depth() const;

 private:
  struct UndefinedTag {
    std::shared_ptr<const std::string> message;
  };
  struct NoneTag {};
  using StringPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<const List>;
  using DictPtr = std::shared_ptr<const Dict>;
  using ObjectPtr = std::shared_ptr<Object>;
  using CallablePtr = std::shared_ptr<const Callable>;
  // The alternatives are in Type order.
  using Storage = std::variant<UndefinedTag, NoneTag, bool, int64_t, double, StringPtr, ListPtr,
                               DictPtr, ObjectPtr, CallablePtr>;
  explicit Value(Storage storage) : storage_(std::move(storage)) {}

  Storage storage_;
};

// Which Python type a List stands for. They iterate alike but print, compare and answer len()
// differently.
enum class ListKind : uint8_t {
  kList,
  kTuple,
  kGenerator,  // what select/reject/map/items return: single-use, truthy, no len(), not printable
  kRange,      // range(...): not printable
  kDictKeys,   // d.keys()
  kDictValues,
  kDictItems,  // d.items(): tuples (key, value)
};

struct List {
  ListKind kind = ListKind::kList;
  std::vector<Value> items;
  int depth = 1;
  // A generator yields its items once: the first iteration consumes it, as in Python.
  mutable bool consumed = false;
  // Python's generators run lazily, so an error in select/map/items only surfaces when the
  // generator is iterated: kept here (after `items`, the values produced before it) until then.
  absl::Status deferred_error;
};

// A Python dict with string keys, in insertion order.
class Dict {
 public:
  const Value* Find(std::string_view key) const;
  // Inserts, or replaces the value in place (a replaced key keeps its position).
  void Set(std::string key, Value value);
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  int depth() const { return depth_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  // Key -> position in entries_, kept once the dict is too big for a linear scan.
  absl::flat_hash_map<std::string, size_t> index_;
  int depth_ = 1;
};

// A namespace() (mutable attributes) or a for loop's `loop` variable.
struct Object {
  enum class Kind { kNamespace, kLoop };
  Kind kind = Kind::kNamespace;
  Dict attrs;  // kNamespace
  // kLoop: the items being iterated and the current position.
  std::shared_ptr<const List> loop_items;
  int64_t loop_index0 = 0;
};

// A global function (range, namespace, ...) or a method bound to its receiver (s.split).
struct Callable {
  std::string name;
  Value receiver;  // Undefined for global functions
  bool is_method = false;
};

// Builds a list or dict value; kResourceExhausted if it would nest deeper than kMaxValueDepth.
absl::StatusOr<Value> MakeList(std::vector<Value> items, ListKind kind = ListKind::kList);
absl::StatusOr<Value> MakeDict(Dict dict);
// A generator of `items` that raises `deferred_error` (if not OK) when iterated.
absl::StatusOr<Value> MakeGenerator(std::vector<Value> items, absl::Status deferred_error);

// The Undefined that a failed lookup produces, with Jinja's message: "'dict object' has no
// attribute 'x'" for a string key or attribute, "list object has no element 5" otherwise.
Value UndefinedAttribute(const Value& obj, std::string_view name);
Value UndefinedElement(const Value& obj, const Value& key);
// The error raised when an Undefined is used (kInvalidArgument with its message).
absl::Status UndefinedError(const Value& undefined);

// Python truthiness (bool(x)); an Undefined is false, a generator is true.
bool Truthy(const Value& v);
// type(x).__name__, for error messages.
std::string TypeName(const Value& v);

// repr(x) and str(x). str(Undefined) is "" (what {{ }} prints); repr(Undefined) is "Undefined".
absl::StatusOr<std::string> Repr(const Value& v);
absl::StatusOr<std::string> ToStr(const Value& v);

// Python ==. Numbers compare by value across bool/int/float; a list never equals a tuple;
// namespaces and functions compare by identity.
bool Equals(const Value& a, const Value& b);

enum class Ordering { kLess, kLessEqual, kGreater, kGreaterEqual };
// a < b (and friends) for numbers, strings and same-kind lists; kInvalidArgument otherwise.
absl::StatusOr<bool> Compare(const Value& a, const Value& b, Ordering op);

// iter(x) drained into a vector: a list's items, a dict's keys, a string's code points (as
// strings), nothing for an Undefined. Consumes a generator. kInvalidArgument if not iterable.
absl::StatusOr<std::vector<Value>> Iterate(const Value& v);

// len(x): code points of a string, items of a list or dict, 0 for an Undefined.
absl::StatusOr<int64_t> Length(const Value& v);

// `item in container`: substring, list membership or dict key.
absl::StatusOr<bool> Contains(const Value& container, const Value& item);

// The value a JSON document stands for (objects keep their key order). kInvalidArgument for a
// string that is not valid UTF-8, kFailedPrecondition for an integer beyond int64 or binary
// data, kResourceExhausted when nested deeper than kMaxValueDepth; the message starts with the
// path of the offending element below `what` (e.g. "messages[2].content").
absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json, std::string_view what);

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_VALUE_H_
