// libFuzzer target for the files an operator (or whoever can write them) hands df11d: its
// configuration and the tokens file of auth.tokens_file. The first byte picks which; the rest is
// the file. Properties, each a trap when broken:
// - parsing returns OK or kInvalidArgument, never reads out of bounds (ASan) or runs into
//   undefined behaviour (UBSan), and never throws;
// - a configuration that parses is written by ConfigToYaml into YAML that parses back to the same
//   YAML (what --print-config shows is what df11d runs with);
// - a tokens file that parses has, for every entry, a name, a tenant of [a-z0-9_-]{1,63} and a
//   distinct hash.
//
//   cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
//     -DDF11_FUZZ=ON -DDF11_CUDA=OFF && ninja -C build-fuzz config_fuzz
//   mkdir -p /tmp/new && build-fuzz/tests/fuzz/config_fuzz -max_total_time=120 \
//     /tmp/new tests/fuzz/corpus/config
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "daemon/config/config.h"
#include "daemon/config/tokens.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    absl::StatusOr<df11::config::Config> config = df11::config::ParseConfig(text, "/base");
    if (!config.ok()) {
      if (config.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
      return 0;
    }
    const std::string yaml = df11::config::ConfigToYaml(*config);
    absl::StatusOr<df11::config::Config> again = df11::config::ParseConfig(yaml, "/base");
    if (!again.ok() || df11::config::ConfigToYaml(*again) != yaml) std::abort();
    return 0;
  }
  absl::StatusOr<df11::config::TokensFile> tokens = df11::config::ParseTokens(text);
  if (!tokens.ok()) {
    if (tokens.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  std::set<std::array<uint8_t, 32>> hashes;
  for (const df11::config::TokenEntry& t : tokens->tokens) {
    if (t.name.empty() || t.tenant.empty() || t.tenant.size() > 63) std::abort();
    for (char c : t.tenant) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) std::abort();
    }
    if (t.has_sha256 && !hashes.insert(t.sha256).second) std::abort();
    if (t.tenant == df11::config::kSharedTenant && t.role != df11::config::Role::kAdmin)
      std::abort();
  }
  for (const auto& [tenant, q] : tokens->quotas) {
    for (const std::optional<int64_t>& v :
         {q.max_models, q.max_running_requests, q.requests_per_minute}) {
      if (v && *v <= 0) std::abort();
    }
    if (q.max_resident_bytes && *q.max_resident_bytes == 0) std::abort();
  }
  return 0;
}
