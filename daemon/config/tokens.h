// The tokens file named by auth.tokens_file: who may call df11d. Only SHA-256 hashes of the tokens
// are stored (`df11 token hash` prints an entry); the file is YAML:
//
//   tokens:
//     - {name: ci-pipeline, sha256: 9f86d0...0f00a08, tenant: team-a, role: user}
//     - {name: ops, sha256: 60303a...62c1f2b, tenant: ops, role: admin}
//     - {name: batch, subject: "CN=batch,O=Example", tenant: team-b, role: user}   # mutual TLS
//
// Unknown fields, a hash that is not 64 hex digits, a repeated name or hash, and a role other than
// admin or user are errors naming the entry.
#ifndef DF11_DAEMON_CONFIG_TOKENS_H_
#define DF11_DAEMON_CONFIG_TOKENS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace df11::config {

enum class Role { kUser, kAdmin };

// A token (by its hash) or, with mutual TLS, a client certificate (by its subject): one of the two.
struct TokenEntry {
  std::string name;  // names the token in logs; never the token itself
  bool has_sha256 = false;
  std::array<uint8_t, 32> sha256{};
  std::string subject;  // RFC 2253, e.g. "CN=team-a-ci,O=Example"
  std::string tenant;
  Role role = Role::kUser;
};

absl::string_view RoleName(Role role);  // "user", "admin"

// kInvalidArgument naming the field for anything malformed.
absl::StatusOr<std::vector<TokenEntry>> ParseTokens(absl::string_view yaml);
// kNotFound when the file cannot be read; errors are prefixed with the path.
absl::StatusOr<std::vector<TokenEntry>> LoadTokensFile(const std::string& path);

}  // namespace df11::config

#endif  // DF11_DAEMON_CONFIG_TOKENS_H_
