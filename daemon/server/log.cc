#include "daemon/server/log.h"

#include <cstdio>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/audit/audit.h"

namespace df11::server {

void Log(const std::string& message) {
  const std::string line =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()) + " df11d: " +
      audit::EscapeForLog(message) + "\n";
  std::fputs(line.c_str(), stderr);  // one call per line, so lines from threads do not mix
}

}  // namespace df11::server
