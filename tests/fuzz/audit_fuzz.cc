// libFuzzer target for the audit log's encoder and the log lines' escaping (daemon/audit). The
// input is up to seven fields separated by NUL bytes (event, tenant, token, peer, source, model,
// message), as a client could send them.
//
// Every record must be one line: a JSON object ending in its only '\n', whose fields read back
// as given (where the input is valid UTF-8); every escaped log text must hold no line break of
// any kind (\n, \r, other control characters, NEL, U+2028, U+2029). Violations trap.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/audit/audit.h"
#include "nlohmann/json.hpp"

namespace {

void Require(bool ok) {
  if (!ok) __builtin_trap();
}

bool ValidUtf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();  // throws on invalid UTF-8
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> fields;
  for (size_t start = 0; fields.size() < 7;) {
    const size_t end = input.find('\0', start);
    fields.emplace_back(input.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  fields.resize(7);
  const std::string line = df11::audit::Encode({.event = fields[0],
                                                .tenant = fields[1],
                                                .token = fields[2],
                                                .peer = fields[3],
                                                .source = fields[4],
                                                .model = fields[5],
                                                .outcome = absl::UnknownError(fields[6])});
  Require(!line.empty() && line.find('\n') == line.size() - 1);
  Require(line.find('\r') == std::string::npos);
  const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  Require(record.is_object());
  for (const auto& [key, value] : {std::pair{"audit", &fields[0]}, std::pair{"model", &fields[5]}}) {
    if (value->empty() || !ValidUtf8(*value)) continue;
    Require(record.value(key, "") == *value);
  }

  for (const std::string& field : fields) {
    const std::string escaped = df11::audit::EscapeForLog(field);
    for (size_t i = 0; i < escaped.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(escaped[i]);
      Require(c == '\t' || (c >= 0x20 && c != 0x7f));
      if (c == 0xc2 && i + 1 < escaped.size()) {
        Require(static_cast<unsigned char>(escaped[i + 1]) != 0x85);
      }
      if (c == 0xe2 && i + 2 < escaped.size() && static_cast<unsigned char>(escaped[i + 1]) == 0x80) {
        const unsigned char last = static_cast<unsigned char>(escaped[i + 2]);
        Require(last != 0xa8 && last != 0xa9);
      }
    }
  }
  return 0;
}
