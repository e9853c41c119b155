// The tokens file named by auth.tokens_file: who may call df11d, and each tenant's quotas. Only
// SHA-256 hashes of the tokens are stored (`df11 token hash` prints an entry); the file is YAML:
//
//   tokens:
//     - {name: ci-pipeline, sha256: 9f86d0...0f00a08, tenant: team-a, role: user}
//     - {name: ops, sha256: 60303a...62c1f2b, tenant: ops, role: admin}
//     - {name: batch, subject: "CN=batch,O=Example", tenant: team-b, role: user}   # mutual TLS
//     - {name: nodes, sha256: 5994471...0b0fd2e, tenant: cluster, role: peer}
//   tenants:            # optional; a tenant not listed has no quotas
//     team-a: {max_resident_bytes: 24GiB, max_models: 4, max_running_requests: 32,
//              requests_per_minute: 600}
//
// Roles: `user` and `admin` call ModelHost and the HTTP API (an admin sees every tenant); `peer`,
// another node of the cluster, may only read blobs (ShardService), which an admin may too.
// Unknown fields, a hash that is not 64 hex digits, a repeated name or hash, a role other than
// admin, user or peer, a user or peer of the tenant `shared` and a quota that is not a positive
// number are errors naming the entry.
#ifndef DF11_DAEMON_CONFIG_TOKENS_H_
#define DF11_DAEMON_CONFIG_TOKENS_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace df11::config {

enum class Role { kUser, kAdmin, kPeer };

// A token (by its hash) or, with mutual TLS, a client certificate (by its subject): one of the two.
struct TokenEntry {
  std::string name;  // names the token in logs; never the token itself
  bool has_sha256 = false;
  std::array<uint8_t, 32> sha256{};
  std::string subject;  // RFC 2253, e.g. "CN=team-a-ci,O=Example"
  std::string tenant;
  Role role = Role::kUser;
};

absl::string_view RoleName(Role role);  // "user", "admin", "peer"

// The owner of the models that belong to no one tenant: the catalog's, preloads, and admin loads
// marked shared. Every tenant sees and uses them.
inline constexpr char kSharedTenant[] = "shared";

// A tenant's limits; unset: no limit.
struct TenantQuota {
  std::optional<uint64_t> max_resident_bytes;   // weights of its models on the device
  std::optional<int64_t> max_models;            // its models loading, resident or failed
  std::optional<int64_t> max_running_requests;  // its Generate requests queued or running
  std::optional<int64_t> requests_per_minute;   // Generate requests, as a token bucket
};

struct TokensFile {
  std::vector<TokenEntry> tokens;
  std::map<std::string, TenantQuota> quotas;  // by tenant
};

// kInvalidArgument naming the field for anything malformed.
absl::StatusOr<TokensFile> ParseTokens(absl::string_view yaml);
// kNotFound when the file cannot be read; errors are prefixed with the path.
absl::StatusOr<TokensFile> LoadTokensFile(const std::string& path);

// A quota's refusal: kResourceExhausted with `message`, marked so that the audit log and the
// HTTP front end can tell it from a full device.
absl::Status QuotaExceededError(absl::string_view message);
bool IsQuotaExceeded(const absl::Status& status);

}  // namespace df11::config

#endif  // DF11_DAEMON_CONFIG_TOKENS_H_
