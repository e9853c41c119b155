#include "tools/df11/cli.h"

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace df11::tool {

int Fail(const std::string& command, const absl::Status& status) {
  std::fprintf(stderr, "df11 %s: %s\n", command.c_str(), status.ToString().c_str());
  return kExitError;
}

int UsageError(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "df11 %s: %s\nRun 'df11 %s --help' for usage.\n", command.c_str(),
               message.c_str(), command.c_str());
  return kExitUsage;
}

absl::StatusOr<std::vector<int64_t>> IntList(const std::string& text, int64_t lo, int64_t hi,
                                             const std::string& flag) {
  std::vector<int64_t> out;
  for (absl::string_view s : absl::StrSplit(text, ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(s, &v) || v < lo || v > hi) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " takes integers from ", lo, " to ", hi, ", comma-separated"));
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace df11::tool
