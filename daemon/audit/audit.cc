#include "daemon/audit/audit.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace df11::audit {
namespace {

absl::Mutex sink_mu;
FILE* sink ABSL_GUARDED_BY(sink_mu) = nullptr;  // null: stderr

}  // namespace

std::string Encode(const Event& e) {
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
  // Invalid UTF-8 from a client (a source, a model name) is replaced, never a broken line; control
  // characters are escaped by the encoder (\n, \u001b, ...).
  return line.dump(-1, ' ', /*ensure_ascii=*/false,
                   nlohmann::ordered_json::error_handler_t::replace) +
         "\n";
}

void Record(const Event& event) {
  const std::string text = Encode(event);
  absl::MutexLock lock(&sink_mu);
  FILE* out = sink != nullptr ? sink : stderr;
  std::fputs(text.c_str(), out);  // one call per line, so lines from threads do not mix
  std::fflush(out);
}

absl::Status UseFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  FILE* file = fd >= 0 ? ::fdopen(fd, "a") : nullptr;
  if (file == nullptr) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("auth.audit_file ", path, ": cannot open it for appending: ",
                     std::strerror(error)));
  }
  absl::MutexLock lock(&sink_mu);
  if (sink != nullptr) std::fclose(sink);
  sink = file;
  return absl::OkStatus();
}

std::string EscapeForLog(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const auto next = [&](size_t k) {
      return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0;
    };
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
      out += absl::StrFormat("\\x%02x", c);
    } else if (c == 0xc2 && next(1) == 0x85) {
      out += "\\u0085";  // NEL
      i += 1;
    } else if (c == 0xe2 && next(1) == 0x80 && (next(2) == 0xa8 || next(2) == 0xa9)) {
      out += next(2) == 0xa8 ? "\\u2028" : "\\u2029";  // line and paragraph separators
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace df11::audit
