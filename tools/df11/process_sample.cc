#include "tools/df11/process_sample.h"

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace df11::tool {
namespace {

// Bytes from a /proc/PID/status value such as "  1234 kB"; 0 when it does not parse.
int64_t BytesFromKib(const std::string& value) {
  const std::vector<std::string> words = absl::StrSplit(value, ' ', absl::SkipWhitespace());
  int64_t kib = 0;
  return !words.empty() && absl::SimpleAtoi(words[0], &kib) ? kib * 1024 : 0;
}

}  // namespace

ProcessSample SampleProcess(int pid) {
  ProcessSample s;
  if (pid <= 0) return s;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) {
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(8)), &s.threads);
    }
    if (line.rfind("VmRSS:", 0) == 0) s.rss_bytes = BytesFromKib(line.substr(6));
    if (line.rfind("RssAnon:", 0) == 0) s.rss_anon_bytes = BytesFromKib(line.substr(8));
  }
  // /proc/PID/stat: fields 14 and 15 (utime, stime) in clock ticks, after the ")" of the name.
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 > text.size()) return s;
  const std::vector<std::string> fields = absl::StrSplit(text.substr(close + 2), ' ');
  int64_t user = 0, system = 0;
  if (fields.size() > 13 && absl::SimpleAtoi(fields[11], &user) &&
      absl::SimpleAtoi(fields[12], &system)) {
    s.cpu_seconds = static_cast<double>(user + system) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return s;
}

nlohmann::json ToJson(const ProcessSample& s) {
  return {{"threads", s.threads}, {"rss_bytes", s.rss_bytes}};
}

}  // namespace df11::tool
