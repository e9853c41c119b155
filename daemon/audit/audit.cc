#include "daemon/audit/audit.h"

#include <cstdio>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace df11::audit {

void Record(const Event& e) {
  nlohmann::ordered_json line = {
      {"audit", e.event},
      {"time", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone())}};
  for (const auto& [key, value] :
       {std::pair{"tenant", &e.tenant}, std::pair{"token", &e.token}, std::pair{"peer", &e.peer},
        std::pair{"source", &e.source}, std::pair{"model", &e.model}}) {
    if (!value->empty()) line[key] = *value;
  }
  line["outcome"] = absl::StatusCodeToString(e.outcome.code());
  const std::string message = e.message.empty() ? std::string(e.outcome.message()) : e.message;
  if (!message.empty()) line["message"] = message;
  // Invalid UTF-8 from a client (a source, a model name) is replaced, never a broken line.
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  std::fputs(text.c_str(), stderr);  // one call per line, so lines from threads do not mix
}

}  // namespace df11::audit
