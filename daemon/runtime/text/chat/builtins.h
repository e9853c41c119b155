// The filters, tests, methods and global functions a chat template may use, with Jinja's
// (jinja2/filters.py, jinja2/tests.py) and Python's semantics, and transformers' additions
// (tojson without HTML escaping, raise_exception, strftime_now, loop controls).
//
// Filters: abs, capitalize, count, d, default, first, float, int, items, join, last, length,
//   list, lower, map (a filter name, or attribute=), reject, rejectattr, replace, reverse,
//   select, selectattr, string, title, tojson (indent, separators, sort_keys, ensure_ascii),
//   trim, upper. select, reject, selectattr, rejectattr, map and items return generators, which
//   (as in Python) raise their errors only when iterated.
// Tests: defined, undefined, none, boolean, true, false, integer, float, number, string,
//   mapping, sequence, iterable, callable, odd, even, divisibleby, lower, upper, in, eq, equalto,
//   ==, ne, !=, lt, <, lessthan, le, <=, gt, >, greaterthan, ge, >=, and sameas with none, true or
//   false.
// Methods: str.startswith, endswith, split, strip, lstrip, rstrip, upper, lower, replace, title,
//   capitalize, join; dict.get, items, keys, values; loop.cycle.
// Globals: raise_exception (handled by the interpreter), namespace, range (at most 100000 items,
//   like Jinja's sandbox), strftime_now (local clock), dict.
//
// Attribute and item access follow the sandboxed environment transformers uses: `x.name` is a
// Python attribute first (so `d.items` is the dict method) and a key second; `x['name']` the
// reverse; mutating methods (list.append, dict.update, ...) and `__dunder__` names are
// "unsafe" Undefined values that raise when used. A Python attribute that exists but is not
// implemented here (str.format, list.index, ...) is kFailedPrecondition when called.
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_BUILTINS_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_BUILTINS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/runtime/text/chat/limits.h"
#include "daemon/runtime/text/chat/value.h"

namespace df11::runtime::chat {

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Binds `args` to the named parameters of `function` as Python would: positional arguments
// first, then keywords by name. One slot per parameter, nullopt where none was given.
// kInvalidArgument for too many positional arguments, an unknown keyword or a parameter given
// twice.
absl::StatusOr<std::vector<std::optional<Value>>> BindArgs(std::string_view function,
                                                           const Args& args,
                                                           std::vector<std::string_view> params);

bool IsSupportedFilter(std::string_view name);
bool IsSupportedTest(std::string_view name);

// value | name(args). Errors as value.h describes; kResourceExhausted from `budget`.
absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& value, const Args& args,
                                  Budget& budget);
// value is name(args). kFailedPrecondition for a test name outside the supported list (select
// and reject take test names at run time).
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& value, const Args& args);

// obj.name and obj[key], with the sandbox's rules above. kInvalidArgument when `obj` is
// Undefined (Jinja raises there); a missing attribute or key is an Undefined value.
absl::StatusOr<Value> GetAttribute(const Value& obj, std::string_view name);
absl::StatusOr<Value> GetItem(const Value& obj, const Value& key);
// obj[start:stop:step] for strings and lists; absent bounds are None. Slicing something that
// cannot be sliced (or with non-integer bounds) is kInvalidArgument, as Python's TypeError, or
// an Undefined when `folded` (jinja2 evaluated the slice at compile time through getitem).
absl::StatusOr<Value> GetSlice(const Value& obj, const Value& start, const Value& stop,
                               const Value& step, bool folded);

// The value of a global name that is not a variable (a function), or nullopt.
std::optional<Value> LookupGlobal(std::string_view name);

// Calls a global function or a bound method (not raise_exception).
absl::StatusOr<Value> CallFunction(const Callable& function, const Args& args, Budget& budget);

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_BUILTINS_H_
