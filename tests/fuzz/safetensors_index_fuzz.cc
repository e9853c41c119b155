// libFuzzer target for ParseSafetensorsIndex, the model.safetensors.index.json of a sharded
// checkpoint (a downloaded file). Any input must either fail with kDataLoss or give a weight map
// whose shard names are plain file names, which cannot leave the checkpoint's directory.
// Violations trap.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "codec/safetensors.h"

namespace {

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::map<std::string, std::string>> map =
      df11::codec::ParseSafetensorsIndex(text, "fuzz-input");
  if (!map.ok()) {
    Require(map.status().code() == absl::StatusCode::kDataLoss);
    return 0;
  }
  for (const auto& [tensor, file] : *map) {
    Require(!file.empty() && file != "." && file != "..");
    Require(file.find('/') == std::string::npos && file.find('\\') == std::string::npos &&
            file.find('\0') == std::string::npos);
  }
  return 0;
}
