// Attribute, item and slice access, methods and global functions (builtins.h).
#include <sys/time.h>

#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "codec/base/status_macros.h"
#include "daemon/runtime/text/chat/builtins.h"
#include "daemon/runtime/text/chat/py_text.h"
#include "daemon/runtime/text/chat/str_cat.h"

namespace df11::runtime::chat {
namespace {

// jinja2's sandbox limit on range().
constexpr int64_t kMaxRange = 100000;

// The public attributes of Python's str, list/tuple and dict: a name in these lists resolves to
// the method (never to a dict key of the same name), as in Python.
constexpr std::string_view kStrAttributes[] = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill"};
constexpr std::string_view kListAttributes[] = {"append", "clear",   "copy",   "count",
                                                "extend", "index",   "insert", "pop",
                                                "remove", "reverse", "sort"};
constexpr std::string_view kTupleAttributes[] = {"count", "index"};
constexpr std::string_view kDictAttributes[] = {"clear",      "copy",   "fromkeys", "get",
                                                "items",      "keys",   "pop",      "popitem",
                                                "setdefault", "update", "values"};
// Methods that mutate, which jinja2's ImmutableSandboxedEnvironment refuses.
constexpr std::string_view kMutatingListMethods[] = {"append", "clear",  "extend",  "insert",
                                                     "pop",    "remove", "reverse", "sort"};
constexpr std::string_view kMutatingDictMethods[] = {"clear", "pop", "popitem", "setdefault",
                                                     "update"};
// Globals jinja2 defines that this interpreter does not implement.
constexpr std::string_view kUnsupportedGlobals[] = {"lipsum", "cycler", "joiner"};

template <size_t N>
bool Contains(const std::string_view (&names)[N], std::string_view name) {
  for (std::string_view n : names) {
    if (n == name) return true;
  }
  return false;
}

Value Method(const Value& receiver, std::string_view name) {
  auto callable = std::make_shared<Callable>();
  callable->name = std::string(name);
  callable->receiver = receiver;
  callable->is_method = true;
  return Value::FromCallable(std::move(callable));
}

Value UnsafeUndefined(const Value& obj, std::string_view name) {
  return Value::Undefined(Cat("access to attribute ", PyStrRepr(name), " of ",
                              PyStrRepr(TypeName(obj)), " object is unsafe."));
}

// A Python attribute of `obj` named `name`, if it has one: a bound method, or an unsafe
// Undefined for methods the sandbox refuses.
std::optional<Value> PythonAttribute(const Value& obj, std::string_view name) {
  if (name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__") {
    return UnsafeUndefined(obj, name);  // __class__ and friends
  }
  if (obj.is_string() && Contains(kStrAttributes, name)) return Method(obj, name);
  if (obj.is_list()) {
    const ListKind kind = obj.as_list().kind;
    if (kind == ListKind::kList && Contains(kListAttributes, name)) {
      if (Contains(kMutatingListMethods, name)) return UnsafeUndefined(obj, name);
      return Method(obj, name);
    }
    if (kind == ListKind::kTuple && Contains(kTupleAttributes, name)) return Method(obj, name);
  }
  if (obj.is_dict() && Contains(kDictAttributes, name)) {
    if (Contains(kMutatingDictMethods, name)) return UnsafeUndefined(obj, name);
    return Method(obj, name);
  }
  if (obj.is_object()) {
    const Object& object = obj.as_object();
    if (object.kind == Object::Kind::kNamespace) {
      if (const Value* v = object.attrs.Find(name); v != nullptr) return *v;
      return std::nullopt;
    }
    const int64_t index0 = object.loop_index0;
    const auto length = static_cast<int64_t>(object.loop_items->items.size());
    if (name == "index0") return Value::Int(index0);
    if (name == "index") return Value::Int(index0 + 1);
    if (name == "revindex0") return Value::Int(length - index0 - 1);
    if (name == "revindex") return Value::Int(length - index0);
    if (name == "first") return Value::Bool(index0 == 0);
    if (name == "last") return Value::Bool(index0 == length - 1);
    if (name == "length") return Value::Int(length);
    if (name == "depth") return Value::Int(1);
    if (name == "depth0") return Value::Int(0);
    if (name == "previtem") {
      if (index0 == 0) return Value::Undefined("there is no previous item");
      return object.loop_items->items[index0 - 1];
    }
    if (name == "nextitem") {
      if (index0 + 1 >= length) return Value::Undefined("there is no next item");
      return object.loop_items->items[index0 + 1];
    }
    if (name == "cycle" || name == "changed") return Method(obj, name);
  }
  return std::nullopt;
}

// Python's index normalization: a negative index counts from the end. nullopt if out of range.
std::optional<size_t> NormalizeIndex(int64_t index, size_t size) {
  const auto n = static_cast<int64_t>(size);
  if (index < 0) index += n;
  if (index < 0 || index >= n) return std::nullopt;
  return static_cast<size_t>(index);
}

// Positional-only arguments, between `min` and `max` of them (Python's TypeError otherwise).
absl::Status CheckPositional(std::string_view function, const Args& args, size_t min, size_t max) {
  if (!args.keyword.empty()) {
    return absl::InvalidArgumentError(Cat(function, "() takes no keyword arguments"));
  }
  if (args.positional.size() < min || args.positional.size() > max) {
    return absl::InvalidArgumentError(Cat(function, "() takes ", min == max ? "exactly" : "from ",
                                          min, min == max ? "" : Cat(" to ", max), " arguments (",
                                          args.positional.size(), " given)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> IndexArgument(std::string_view function, const Value& v) {
  if (!v.is_integral()) {
    return absl::InvalidArgumentError(
        Cat("'", TypeName(v), "' object cannot be interpreted as an integer (in ", function, ")"));
  }
  return v.ToInt();
}

absl::StatusOr<Value> StringValue(std::string s, Budget& budget) {
  DF11_RETURN_IF_ERROR(budget.Built(s.size()));
  return Value::String(std::move(s));
}

absl::StatusOr<Value> CallStringMethod(const std::string& s, std::string_view name,
                                       const Args& args, Budget& budget) {
  const std::string function = Cat("str.", name);
  if (name == "startswith" || name == "endswith") {
    DF11_RETURN_IF_ERROR(CheckPositional(function, args, 1, 1));
    const Value& affix = args.positional[0];
    std::vector<const std::string*> options;
    if (affix.is_string()) {
      options.push_back(&affix.as_string());
    } else if (affix.is_list() && affix.as_list().kind == ListKind::kTuple) {
      for (const Value& item : affix.as_list().items) {
        if (!item.is_string()) {
          return absl::InvalidArgumentError(
              Cat("tuple for ", name, " must only contain str, not ", TypeName(item)));
        }
        options.push_back(&item.as_string());
      }
    } else {
      return absl::InvalidArgumentError(
          Cat(name, " first arg must be str or a tuple of str, not ", TypeName(affix)));
    }
    for (const std::string* option : options) {
      const bool hit = name == "startswith"
                           ? s.compare(0, option->size(), *option) == 0
                           : s.size() >= option->size() &&
                                 s.compare(s.size() - option->size(), option->size(), *option) == 0;
      if (hit) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (name == "split") {
    DF11_ASSIGN_OR_RETURN(auto bound, BindArgs(function, args, {"sep", "maxsplit"}));
    const std::string* sep = nullptr;
    if (bound[0].has_value() && !bound[0]->is_none()) {
      if (!bound[0]->is_string()) {
        return absl::InvalidArgumentError(Cat("must be str or None, not ", TypeName(*bound[0])));
      }
      sep = &bound[0]->as_string();
      if (sep->empty()) return absl::InvalidArgumentError("empty separator");
    }
    int64_t maxsplit = -1;
    if (bound[1].has_value()) {
      DF11_ASSIGN_OR_RETURN(maxsplit, IndexArgument(function, *bound[1]));
    }
    std::vector<Value> parts;
    for (std::string& part : PySplit(s, sep, maxsplit)) {
      parts.push_back(Value::String(std::move(part)));
    }
    DF11_RETURN_IF_ERROR(budget.Built(s.size()));
    return MakeList(std::move(parts));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    DF11_RETURN_IF_ERROR(CheckPositional(function, args, 0, 1));
    const std::string* chars = nullptr;
    if (!args.positional.empty() && !args.positional[0].is_none()) {
      if (!args.positional[0].is_string()) {
        return absl::InvalidArgumentError(Cat(name, " arg must be None or str"));
      }
      chars = &args.positional[0].as_string();
    }
    return StringValue(PyStrip(s, chars, name != "rstrip", name != "lstrip"), budget);
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    DF11_RETURN_IF_ERROR(CheckPositional(function, args, 0, 0));
    if (name == "upper") return StringValue(PyUpper(s), budget);
    if (name == "lower") return StringValue(PyLower(s), budget);
    if (name == "title") return StringValue(PyTitle(s), budget);
    return StringValue(PyCapitalize(s), budget);
  }
  if (name == "replace") {
    DF11_RETURN_IF_ERROR(CheckPositional(function, args, 2, 3));
    for (size_t i = 0; i < 2; ++i) {
      if (!args.positional[i].is_string()) {
        return absl::InvalidArgumentError(
            Cat("replace() argument ", i + 1, " must be str, not ", TypeName(args.positional[i])));
      }
    }
    int64_t count = -1;
    if (args.positional.size() == 3) {
      DF11_ASSIGN_OR_RETURN(count, IndexArgument(function, args.positional[2]));
    }
    const std::string& old = args.positional[0].as_string();
    const std::string& repl = args.positional[1].as_string();
    // Size the result before building it.
    size_t hits = old.empty() ? static_cast<size_t>(CodePointCount(s)) + 1 : 0;
    for (size_t at = 0; !old.empty() && (at = s.find(old, at)) != std::string::npos;
         at += old.size()) {
      ++hits;
    }
    if (count >= 0 && static_cast<size_t>(count) < hits) hits = static_cast<size_t>(count);
    if (repl.size() > old.size()) {
      DF11_RETURN_IF_ERROR(budget.CheckStringSize(s.size() + hits * (repl.size() - old.size())));
    }
    return StringValue(PyReplace(s, old, repl, count), budget);
  }
  if (name == "join") {
    DF11_RETURN_IF_ERROR(CheckPositional(function, args, 1, 1));
    DF11_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(args.positional[0]));
    DF11_RETURN_IF_ERROR(budget.Step(static_cast<int64_t>(items.size())));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return absl::InvalidArgumentError(
            Cat("sequence item ", i, ": expected str instance, ", TypeName(items[i]), " found"));
      }
      if (i > 0) out.append(s);
      out.append(items[i].as_string());
      DF11_RETURN_IF_ERROR(budget.CheckStringSize(out.size()));
    }
    return StringValue(std::move(out), budget);
  }
  return absl::FailedPreconditionError(Cat("unsupported method ", function, "()"));
}

absl::StatusOr<Value> CallDictMethod(const Value& receiver, std::string_view name, const Args& args,
                                     Budget& budget) {
  const Dict& dict = receiver.as_dict();
  const std::string function = Cat("dict.", name);
  if (name == "get") {
    DF11_RETURN_IF_ERROR(CheckPositional(function, args, 1, 2));
    const Value& key = args.positional[0];
    if (key.is_list() || key.is_dict()) {
      return absl::InvalidArgumentError(Cat("unhashable type: '", TypeName(key), "'"));
    }
    if (key.is_string()) {
      if (const Value* v = dict.Find(key.as_string()); v != nullptr) return *v;
    }
    return args.positional.size() == 2 ? args.positional[1] : Value::None();
  }
  if (name == "items" || name == "keys" || name == "values") {
    DF11_RETURN_IF_ERROR(CheckPositional(function, args, 0, 0));
    DF11_RETURN_IF_ERROR(budget.Step(static_cast<int64_t>(dict.size())));
    std::vector<Value> items;
    items.reserve(dict.size());
    for (const auto& [key, value] : dict.entries()) {
      if (name == "keys") {
        items.push_back(Value::String(key));
      } else if (name == "values") {
        items.push_back(value);
      } else {
        DF11_ASSIGN_OR_RETURN(Value pair, MakeList({Value::String(key), value}, ListKind::kTuple));
        items.push_back(std::move(pair));
      }
    }
    return MakeList(std::move(items), name == "keys"     ? ListKind::kDictKeys
                                      : name == "values" ? ListKind::kDictValues
                                                         : ListKind::kDictItems);
  }
  return absl::FailedPreconditionError(Cat("unsupported method ", function, "()"));
}

absl::StatusOr<Value> CallRange(const Args& args, Budget& budget) {
  DF11_RETURN_IF_ERROR(CheckPositional("range", args, 1, 3));
  int64_t bounds[3] = {0, 0, 1};
  for (size_t i = 0; i < args.positional.size(); ++i) {
    DF11_ASSIGN_OR_RETURN(int64_t v, IndexArgument("range", args.positional[i]));
    bounds[args.positional.size() == 1 ? 1 : i] = v;
  }
  const int64_t start = bounds[0], stop = bounds[1], step = bounds[2];
  if (step == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
  // len(range(start, stop, step)), computed without overflow.
  __int128 length = 0;
  const auto wide_start = static_cast<__int128>(start);
  const auto wide_stop = static_cast<__int128>(stop);
  const auto wide_step = static_cast<__int128>(step);
  if (step > 0 && start < stop) {
    length = (wide_stop - wide_start - 1) / wide_step + 1;
  } else if (step < 0 && start > stop) {
    length = (wide_start - wide_stop - 1) / -wide_step + 1;
  }
  if (length > kMaxRange) {
    return absl::InvalidArgumentError(
        "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  DF11_RETURN_IF_ERROR(budget.Step(static_cast<int64_t>(length)));
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(length));
  for (int64_t i = 0; i < static_cast<int64_t>(length); ++i) {
    items.push_back(Value::Int(start + i * step));
  }
  return MakeList(std::move(items), ListKind::kRange);
}

// namespace(...) and dict(...): one optional mapping, then keyword arguments.
absl::StatusOr<Dict> MappingArguments(std::string_view function, const Args& args) {
  if (args.positional.size() > 1) {
    return absl::InvalidArgumentError(
        Cat(function, " expected at most 1 argument, got ", args.positional.size()));
  }
  Dict dict;
  if (!args.positional.empty()) {
    const Value& mapping = args.positional[0];
    if (!mapping.is_dict()) {
      return absl::FailedPreconditionError(Cat(function, "() with a positional ", TypeName(mapping),
                                               " is unsupported (pass a dict)"));
    }
    for (const auto& [key, value] : mapping.as_dict().entries()) dict.Set(key, value);
  }
  for (const auto& [key, value] : args.keyword) dict.Set(key, value);
  return dict;
}

absl::StatusOr<Value> CallNamespace(const Args& args) {
  DF11_ASSIGN_OR_RETURN(Dict attrs, MappingArguments("namespace", args));
  for (const auto& entry : attrs.entries()) {
    if (!entry.first.empty() && entry.first[0] == '_') {
      // transformers' TemplateNamespace refuses these (a sandbox escape route).
      return absl::InvalidArgumentError(
          Cat("Chat templates cannot store underscore-prefixed attributes on a namespace, but got ",
              PyStrRepr(entry.first), ". Please rename the attribute."));
    }
  }
  auto object = std::make_shared<Object>();
  object->kind = Object::Kind::kNamespace;
  object->attrs = std::move(attrs);
  return Value::FromObject(std::move(object));
}

// datetime.now().strftime(format): the C library's strftime on local time, after the
// directives Python's datetime handles itself (%f microseconds; %z and %Z are empty for the
// naive local time).
absl::StatusOr<Value> CallStrftimeNow(const Args& args, Budget& budget) {
  DF11_RETURN_IF_ERROR(CheckPositional("strftime_now", args, 1, 1));
  if (!args.positional[0].is_string()) {
    return absl::InvalidArgumentError(
        Cat("strftime() argument 1 must be str, not ", TypeName(args.positional[0])));
  }
  const std::string& format = args.positional[0].as_string();
  if (format.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("embedded null character");
  }
  timeval now;
  gettimeofday(&now, nullptr);
  std::string expanded;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      const char directive = format[i + 1];
      if (directive == 'f') {
        char micros[8];
        std::snprintf(micros, sizeof(micros), "%06ld", static_cast<long>(now.tv_usec));
        expanded.append(micros);
        ++i;
        continue;
      }
      if (directive == 'z' || directive == 'Z') {
        ++i;
        continue;
      }
      expanded.push_back('%');
      expanded.push_back(directive);
      ++i;
      continue;
    }
    expanded.push_back(format[i]);
  }
  tm local;
  const time_t seconds = now.tv_sec;
  localtime_r(&seconds, &local);
  const size_t max_size = budget.limits().max_output_bytes;
  for (size_t size = 256; size <= max_size; size *= 4) {
    std::string out(size, '\0');
    const size_t n = std::strftime(out.data(), out.size(), expanded.c_str(), &local);
    if (n > 0 || expanded.empty() || size > 256 * expanded.size()) {
      out.resize(n);
      return StringValue(std::move(out), budget);
    }
  }
  return budget.CheckStringSize(max_size + 1);
}

// obj[start:stop:step] for a string or sequence (CPython's PySlice_AdjustIndices).
// `value_error` tells a ValueError (step 0) from the TypeErrors.
absl::StatusOr<Value> SliceSequence(const Value& obj, const Value& start, const Value& stop,
                                    const Value& step, bool& value_error) {
  value_error = false;
  const bool is_string = obj.is_string();
  const bool is_sequence = obj.is_list() && (obj.as_list().kind == ListKind::kList ||
                                             obj.as_list().kind == ListKind::kTuple ||
                                             obj.as_list().kind == ListKind::kRange);
  if (obj.is_dict()) return absl::InvalidArgumentError("unhashable type: 'slice'");
  if (!is_string && !is_sequence) {
    return absl::InvalidArgumentError(Cat("'", TypeName(obj), "' object is not subscriptable"));
  }
  int64_t bounds[3] = {0, 0, 0};
  const Value* parts[3] = {&start, &stop, &step};
  for (int i = 0; i < 3; ++i) {
    if (parts[i]->is_none()) continue;
    if (!parts[i]->is_integral()) {
      return absl::InvalidArgumentError(
          "slice indices must be integers or None or have an __index__ method");
    }
    bounds[i] = parts[i]->ToInt();
  }
  const int64_t step_value = step.is_none() ? 1 : bounds[2];
  if (step_value == 0) {
    value_error = true;
    return absl::InvalidArgumentError("slice step cannot be zero");
  }
  std::u32string text;
  size_t size = 0;
  if (is_string) {
    text = DecodeUtf8(obj.as_string());
    size = text.size();
  } else {
    size = obj.as_list().items.size();
  }
  // CPython's PySlice_AdjustIndices.
  const auto n = static_cast<int64_t>(size);
  auto adjust = [&](const Value& v, int64_t value, int64_t if_none) {
    if (v.is_none()) return if_none;
    if (value < 0) {
      value += n;
      if (value < 0) value = step_value < 0 ? -1 : 0;
    } else if (value >= n) {
      value = step_value < 0 ? n - 1 : n;
    }
    return value;
  };
  const int64_t first = adjust(start, bounds[0], step_value < 0 ? n - 1 : 0);
  const int64_t last = adjust(stop, bounds[1], step_value < 0 ? -1 : n);
  std::vector<size_t> picked;
  for (int64_t i = first; step_value > 0 ? i < last : i > last; i += step_value) {
    picked.push_back(static_cast<size_t>(i));
  }
  if (is_string) {
    std::string out;
    for (size_t i : picked) AppendUtf8(text[i], out);
    return Value::String(std::move(out));
  }
  std::vector<Value> items;
  items.reserve(picked.size());
  for (size_t i : picked) items.push_back(obj.as_list().items[i]);
  return MakeList(std::move(items), obj.as_list().kind);
}

}  // namespace

absl::StatusOr<Value> GetAttribute(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (std::optional<Value> attr = PythonAttribute(obj, name); attr.has_value()) return *attr;
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().Find(name); v != nullptr) return *v;
  }
  return UndefinedAttribute(obj, name);
}

absl::StatusOr<Value> GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (key.is_integral()) {
    if (obj.is_string()) {
      const std::u32string text = DecodeUtf8(obj.as_string());
      if (std::optional<size_t> i = NormalizeIndex(key.ToInt(), text.size()); i.has_value()) {
        std::string out;
        AppendUtf8(text[*i], out);
        return Value::String(std::move(out));
      }
      return UndefinedElement(obj, key);
    }
    if (obj.is_list()) {
      const List& list = obj.as_list();
      if (list.kind == ListKind::kList || list.kind == ListKind::kTuple ||
          list.kind == ListKind::kRange) {
        if (std::optional<size_t> i = NormalizeIndex(key.ToInt(), list.items.size());
            i.has_value()) {
          return list.items[*i];
        }
      }
      return UndefinedElement(obj, key);
    }
  }
  if (obj.is_dict()) {
    if (key.is_string()) {
      if (const Value* v = obj.as_dict().Find(key.as_string()); v != nullptr) return *v;
    }
  }
  // obj[key] failed: a string key falls back to the attribute.
  if (key.is_string()) {
    if (std::optional<Value> attr = PythonAttribute(obj, key.as_string()); attr.has_value()) {
      return *attr;
    }
  }
  return UndefinedElement(obj, key);
}

absl::StatusOr<Value> GetSlice(const Value& obj, const Value& start, const Value& stop,
                               const Value& step, bool folded) {
  // Jinja compiles slices to a plain Python subscript (no sandbox getitem), so failures raise;
  // but one its optimizer folded went through getitem, which makes a TypeError an Undefined.
  if (obj.is_undefined()) return UndefinedError(obj);
  bool value_error = false;
  absl::StatusOr<Value> sliced = SliceSequence(obj, start, stop, step, value_error);
  if (folded && !sliced.ok() && !value_error) {
    return Value::Undefined(Cat(TypeName(obj), " object has no element slice(...)"));
  }
  return sliced;
}

std::optional<Value> LookupGlobal(std::string_view name) {
  static constexpr std::string_view kGlobals[] = {"raise_exception", "namespace", "range",
                                                  "strftime_now", "dict"};
  if (!Contains(kGlobals, name) && !Contains(kUnsupportedGlobals, name)) return std::nullopt;
  auto callable = std::make_shared<Callable>();
  callable->name = std::string(name);
  return Value::FromCallable(std::move(callable));
}

absl::StatusOr<Value> CallFunction(const Callable& function, const Args& args, Budget& budget) {
  DF11_RETURN_IF_ERROR(budget.Step(1 + static_cast<int64_t>(args.positional.size())));
  if (!function.is_method) {
    if (function.name == "range") return CallRange(args, budget);
    if (function.name == "namespace") return CallNamespace(args);
    if (function.name == "dict") {
      DF11_ASSIGN_OR_RETURN(Dict dict, MappingArguments("dict", args));
      return MakeDict(std::move(dict));
    }
    if (function.name == "strftime_now") return CallStrftimeNow(args, budget);
    return absl::FailedPreconditionError(Cat("unsupported global function '", function.name, "'"));
  }
  const Value& receiver = function.receiver;
  if (receiver.is_string()) {
    return CallStringMethod(receiver.as_string(), function.name, args, budget);
  }
  if (receiver.is_dict()) return CallDictMethod(receiver, function.name, args, budget);
  if (receiver.is_object() && function.name == "cycle") {
    if (!args.keyword.empty()) {
      return absl::InvalidArgumentError("cycle() takes no keyword arguments");
    }
    if (args.positional.empty()) return absl::InvalidArgumentError("no items for cycling given");
    const int64_t index0 = receiver.as_object().loop_index0;
    return args.positional[static_cast<size_t>(index0) % args.positional.size()];
  }
  return absl::FailedPreconditionError(
      Cat("unsupported method ", TypeName(receiver), ".", function.name, "()"));
}

}  // namespace df11::runtime::chat
