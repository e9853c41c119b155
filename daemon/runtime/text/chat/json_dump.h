// Python's json.dumps over chat-template values: what transformers' `tojson` filter returns
// (json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...)). Unlike Jinja's
// own tojson it does not escape HTML characters.
//
//   JsonDumpOptions options;              // separators (", ", ": "), no indent
//   DF11_RETURN_IF_ERROR(DumpJson(value, options, out));
#ifndef DF11_DAEMON_RUNTIME_TEXT_CHAT_JSON_DUMP_H_
#define DF11_DAEMON_RUNTIME_TEXT_CHAT_JSON_DUMP_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "daemon/runtime/text/chat/value.h"

namespace df11::runtime::chat {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  // json.dumps' indent: nullopt for one line, otherwise the text of one level ("    " for
  // indent=4; an int n <= 0 gives "", which still puts every item on its own line).
  std::optional<std::string> indent;
  // Python's defaults: (", ", ": ") without indent, (",", ": ") with one.
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  // kResourceExhausted once `out` grows beyond this (an indent string can be long).
  size_t max_bytes = SIZE_MAX;
};

// Appends the JSON text of `value` to `out`: None -> null, bools, ints, floats as Python repr
// (NaN, Infinity, -Infinity for the non-finite ones), strings, lists and tuples as arrays, dicts
// as objects in insertion order (or sorted by key). kInvalidArgument, as Python's TypeError
// "Object of type X is not JSON serializable", for anything else (Undefined, a generator, a
// namespace, ...).
absl::Status DumpJson(const Value& value, const JsonDumpOptions& options, std::string& out);

}  // namespace df11::runtime::chat

#endif  // DF11_DAEMON_RUNTIME_TEXT_CHAT_JSON_DUMP_H_
