#include "daemon/runtime/text/chat/json_dump.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "daemon/runtime/text/chat/py_text.h"
#include "daemon/runtime/text/chat/str_cat.h"

namespace df11::runtime::chat {
namespace {

absl::Status TooLong(const JsonDumpOptions& options) {
  return absl::ResourceExhaustedError(
      Cat("tojson output exceeds the limit of ", options.max_bytes, " bytes"));
}

absl::Status NewLine(const JsonDumpOptions& options, int level, std::string& out) {
  out.push_back('\n');
  for (int i = 0; i < level; ++i) {
    out.append(*options.indent);
    if (out.size() > options.max_bytes) return TooLong(options);
  }
  return absl::OkStatus();
}

absl::Status Dump(const Value& value, const JsonDumpOptions& options, int level, std::string& out) {
  if (out.size() > options.max_bytes) return TooLong(options);
  switch (value.type()) {
    case Value::Type::kNone:
      out.append("null");
      return absl::OkStatus();
    case Value::Type::kBool:
      out.append(value.as_bool() ? "true" : "false");
      return absl::OkStatus();
    case Value::Type::kInt:
      absl::StrAppend(&out, value.as_int());
      return absl::OkStatus();
    case Value::Type::kFloat: {
      const double d = value.as_float();
      if (std::isnan(d)) {
        out.append("NaN");
      } else if (std::isinf(d)) {
        out.append(d > 0 ? "Infinity" : "-Infinity");
      } else {
        out.append(PyFloatRepr(d));
      }
      return absl::OkStatus();
    }
    case Value::Type::kString:
      AppendJsonString(value.as_string(), options.ensure_ascii, out);
      return absl::OkStatus();
    case Value::Type::kList: {
      const List& list = value.as_list();
      if (list.kind != ListKind::kList && list.kind != ListKind::kTuple) break;
      if (list.items.empty()) {
        out.append("[]");
        return absl::OkStatus();
      }
      out.push_back('[');
      for (size_t i = 0; i < list.items.size(); ++i) {
        if (i > 0) out.append(options.item_separator);
        if (options.indent.has_value()) {
          if (absl::Status s = NewLine(options, level + 1, out); !s.ok()) return s;
        }
        if (absl::Status s = Dump(list.items[i], options, level + 1, out); !s.ok()) return s;
      }
      if (options.indent.has_value()) {
        if (absl::Status s = NewLine(options, level, out); !s.ok()) return s;
      }
      out.push_back(']');
      return absl::OkStatus();
    }
    case Value::Type::kDict: {
      const Dict& dict = value.as_dict();
      if (dict.size() == 0) {
        out.append("{}");
        return absl::OkStatus();
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      entries.reserve(dict.size());
      for (const auto& entry : dict.entries()) entries.push_back(&entry);
      if (options.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out.push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out.append(options.item_separator);
        if (options.indent.has_value()) {
          if (absl::Status s = NewLine(options, level + 1, out); !s.ok()) return s;
        }
        AppendJsonString(entries[i]->first, options.ensure_ascii, out);
        out.append(options.key_separator);
        if (absl::Status s = Dump(entries[i]->second, options, level + 1, out); !s.ok()) return s;
      }
      if (options.indent.has_value()) {
        if (absl::Status s = NewLine(options, level, out); !s.ok()) return s;
      }
      out.push_back('}');
      return absl::OkStatus();
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(
      Cat("Object of type ", TypeName(value), " is not JSON serializable"));
}

}  // namespace

absl::Status DumpJson(const Value& value, const JsonDumpOptions& options, std::string& out) {
  if (absl::Status s = Dump(value, options, 0, out); !s.ok()) return s;
  if (out.size() > options.max_bytes) return TooLong(options);
  return absl::OkStatus();
}

}  // namespace df11::runtime::chat
