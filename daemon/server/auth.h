// Who is calling df11d. With auth.tokens_file set, every gRPC call of df11.v1.ModelHost and every
// HTTP request under /v1/ (and /metrics when auth.metrics is token) carries
// `authorization: Bearer TOKEN`; the token's SHA-256 is compared, in constant time, with every
// entry of the tokens file, which is read again when it changes. grpc.health.v1 stays open.
//
//   DF11_ASSIGN_OR_RETURN(auto auth, Authenticator::Create("/etc/df11d/tokens.yaml"));
//   absl::StatusOr<Caller> caller = auth->Authenticate(header);  // UNAUTHENTICATED when not
#ifndef DF11_DAEMON_SERVER_AUTH_H_
#define DF11_DAEMON_SERVER_AUTH_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/config/tokens.h"

namespace df11::server {

// The token a call came with: its name (for logs), tenant, role, and the tenant's quotas as the
// tokens file said when the call arrived.
struct Caller {
  std::string token_name;
  std::string tenant;
  config::Role role = config::Role::kUser;
  config::TenantQuota quota;
  // What matched in the tokens file (the token's hash, or the certificate's subject); "" without
  // auth. A call in flight ends when its credential leaves the file (Authenticator::StillValid).
  std::string credential;

  bool admin() const { return role == config::Role::kAdmin; }
  // Another node of the cluster: it may only read blobs (ShardService).
  bool peer() const { return role == config::Role::kPeer; }
  // Whether this caller may see and use a model of `owner`: its own tenant's and the shared
  // ones, or any when an admin.
  bool Sees(const std::string& owner) const {
    return admin() || owner == tenant || owner == config::kSharedTenant;
  }
};

// PERMISSION_DENIED for a peer, which may call nothing but ShardService; OK for the others.
absl::Status RefusePeer(const Caller& caller);

class Authenticator {
 public:
  // Reads `tokens_file` (an error stops the start) and watches it: a change takes effect within
  // 2 s; a file that turns invalid or unreadable keeps the previous tokens, and says so in the log.
  static absl::StatusOr<std::unique_ptr<Authenticator>> Create(const std::string& tokens_file);
  Authenticator(const Authenticator&) = delete;
  Authenticator& operator=(const Authenticator&) = delete;
  ~Authenticator();

  // `authorization`: the header's value, nullopt when the call has none; `subject`: the verified
  // client certificate's subject under mutual TLS, else empty. A header decides when there is
  // one; without one, an entry with that subject does. UNAUTHENTICATED for a missing, malformed
  // or unknown token; the message says which, and nothing else.
  absl::StatusOr<Caller> Authenticate(std::optional<absl::string_view> authorization,
                                      absl::string_view subject = "") const;

  // Whether the tokens file still lists `caller`'s credential, with its tenant and role: false
  // once the token was revoked (or moved), which ends the caller's calls in flight.
  bool StillValid(const Caller& caller) const ABSL_LOCKS_EXCLUDED(mu_);

  // Reads the file again if its text changed (the watcher does this every 2 s).
  void Reload();

 private:
  explicit Authenticator(std::string path) : path_(std::move(path)) {}
  Caller CallerLocked(const config::TokenEntry& entry) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void SetFileLocked(config::TokensFile file) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex reload_mu_;  // one Reload at a time, so an older read never replaces a newer one
  mutable absl::Mutex mu_;
  config::TokensFile file_ ABSL_GUARDED_BY(mu_);
  // Every entry's ValidKey (auth.cc): StillValid, asked twice a second by each call in flight,
  // looks one up instead of going through the file.
  absl::flat_hash_set<std::string> valid_ ABSL_GUARDED_BY(mu_);
  std::string text_ ABSL_GUARDED_BY(mu_);  // the file's text when last read
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watcher_;
};

// SHA-256 of `text`, as the tokens file stores it (64 lower-case hex digits).
std::string Sha256Hex(absl::string_view text);

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_AUTH_H_
