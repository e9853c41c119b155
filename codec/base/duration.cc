#include "codec/base/duration.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace df11::base {

absl::StatusOr<double> ParseDuration(absl::string_view text) {
  const absl::string_view t = absl::StripAsciiWhitespace(text);
  size_t split = t.size();
  while (split > 0 && absl::ascii_isalpha(t[split - 1])) --split;
  const absl::string_view unit = t.substr(split);
  double value;
  if (!absl::SimpleAtod(t.substr(0, split), &value) || !std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a duration such as 30s, 5m or 250ms"));
  }
  if (unit.empty() || unit == "s") return value;
  if (unit == "ms") return value / 1000;
  if (unit == "m") return value * 60;
  if (unit == "h") return value * 3600;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\": unknown unit \"", unit, "\" (ms, s, m, h)"));
}

}  // namespace df11::base
