// Internal to df11_tokenizer: typed access to tokenizer.json fields with errors that name the
// field ("tokenizer.json: model.merges[3]: ..."). Not a public API.
#ifndef DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_JSON_FIELDS_H_
#define DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_JSON_FIELDS_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace df11::runtime::tokenizer_internal {

using Json = nlohmann::json;

inline absl::Status Malformed(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", path, ": ", what));
}

inline absl::Status Unsupported(const std::string& path, const std::string& what,
                                const std::string& supported) {
  return absl::FailedPreconditionError(absl::StrCat(
      "tokenizer.json: ", path, ": ", what, " is not supported (supported: ", supported, ")"));
}

// obj[key], or nullptr when the key is absent or null. `obj` must be an object.
inline const Json* FindField(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

inline absl::StatusOr<bool> OptionalBool(const Json& obj, const char* key, const std::string& path,
                                         bool default_value) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return default_value;
  if (!v->is_boolean()) return Malformed(absl::StrCat(path, ".", key), "expected a boolean");
  return v->get<bool>();
}

inline absl::StatusOr<std::optional<std::string>> OptionalString(const Json& obj, const char* key,
                                                                 const std::string& path) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return Malformed(absl::StrCat(path, ".", key), "expected a string");
  return std::optional<std::string>(v->get<std::string>());
}

inline absl::StatusOr<std::string> RequiredString(const Json& obj, const char* key,
                                                  const std::string& path) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return Malformed(absl::StrCat(path, ".", key), "missing");
  if (!v->is_string()) return Malformed(absl::StrCat(path, ".", key), "expected a string");
  return v->get<std::string>();
}

// A token id: an integer in [0, 2^31 - 1].
inline absl::StatusOr<int32_t> ParseId(const Json& v, const std::string& path) {
  if (!v.is_number_integer()) return Malformed(path, "expected a non-negative integer id");
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
      return Malformed(path, "id does not fit in int32");
    }
    return static_cast<int32_t>(v.get<uint64_t>());
  }
  const int64_t id = v.get<int64_t>();
  if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
    return Malformed(path, "expected a non-negative integer id");
  }
  return static_cast<int32_t>(id);
}

// A "Replace" component (a normalizer or a decoder step): its String pattern and its content.
// kFailedPrecondition naming `supported` for a Regex or an empty pattern (tokenizers would turn
// "" into a regex that matches between every two characters).
struct StringReplace {
  std::string pattern, content;
};
inline absl::StatusOr<StringReplace> ParseStringReplace(const Json& v, const std::string& path,
                                                        const std::string& supported) {
  const Json* pattern = FindField(v, "pattern");
  if (pattern == nullptr || !pattern->is_object() || pattern->size() != 1) {
    return Malformed(absl::StrCat(path, ".pattern"),
                     "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (pattern->contains("Regex")) {
    return Unsupported(absl::StrCat(path, ".pattern"), "a Regex pattern", supported);
  }
  StringReplace r;
  DF11_ASSIGN_OR_RETURN(r.pattern,
                        RequiredString(*pattern, "String", absl::StrCat(path, ".pattern")));
  if (r.pattern.empty()) {
    return Unsupported(absl::StrCat(path, ".pattern"), "an empty pattern", supported);
  }
  DF11_ASSIGN_OR_RETURN(r.content, RequiredString(v, "content", path));
  return r;
}

// The "type" string of a component object at `path`.
inline absl::StatusOr<std::string> ComponentType(const Json& v, const std::string& path) {
  if (!v.is_object()) return Malformed(path, "expected an object or null");
  return RequiredString(v, "type", path);
}

}  // namespace df11::runtime::tokenizer_internal

#endif  // DF11_DAEMON_RUNTIME_TEXT_TOKENIZER_JSON_FIELDS_H_
