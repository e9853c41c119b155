// Durations as people write them in flags and configuration files: "250ms", "30s", "5m", "2h", or
// bare seconds.
#ifndef DF11_CODEC_BASE_DURATION_H_
#define DF11_CODEC_BASE_DURATION_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace df11::base {

// Seconds. kInvalidArgument for a negative or non-finite number or another unit.
absl::StatusOr<double> ParseDuration(absl::string_view text);

}  // namespace df11::base

#endif  // DF11_CODEC_BASE_DURATION_H_
