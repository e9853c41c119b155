#include "daemon/server/auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>


#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codec/base/read_file.h"
#include "daemon/server/log.h"

namespace df11::server {
namespace {

std::array<uint8_t, 32> Sha256(absl::string_view text) {
  std::array<uint8_t, 32> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  return digest;
}

absl::StatusOr<std::string> ReadTokensFile(const std::string& path) {
  return base::ReadFile(path, base::kMaxSettingsFileBytes);
}

}  // namespace

std::string Sha256Hex(absl::string_view text) {
  const std::array<uint8_t, 32> digest = Sha256(text);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::Create(
    const std::string& tokens_file) {
  const absl::StatusOr<std::string> text = ReadTokensFile(tokens_file);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("auth.tokens_file: ", text.status().message()));
  }
  absl::StatusOr<config::TokensFile> tokens = config::ParseTokens(*text);
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("auth.tokens_file ", tokens_file, ": ", tokens.status().message()));
  }
  std::unique_ptr<Authenticator> auth(new Authenticator(tokens_file));
  {
    absl::MutexLock lock(&auth->mu_);
    auth->SetFileLocked(*std::move(tokens));
    auth->text_ = *text;
  }
  auth->watcher_ = std::thread([a = auth.get()] {
    for (;;) {
      {
        absl::MutexLock lock(&a->mu_);
        if (a->mu_.AwaitWithTimeout(absl::Condition(&a->stopping_), absl::Seconds(2))) return;
      }
      a->Reload();
    }
  });
  return auth;
}

Authenticator::~Authenticator() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  watcher_.join();
}

void Authenticator::Reload() {
  absl::MutexLock reload(&reload_mu_);
  const absl::StatusOr<std::string> text = ReadTokensFile(path_);
  {
    absl::MutexLock lock(&mu_);
    if (text.ok() && *text == text_) return;
  }
  if (!text.ok()) {
    Log(absl::StrCat("auth.tokens_file: ", text.status().message(),
                     "; keeping the previous tokens"));
    return;
  }
  absl::StatusOr<config::TokensFile> tokens = config::ParseTokens(*text);
  absl::MutexLock lock(&mu_);
  text_ = *text;  // a bad file is reported once, not every 2 s
  if (!tokens.ok()) {
    Log(absl::StrCat("auth.tokens_file ", path_,
                     ": keeping the previous tokens: ", tokens.status().message()));
    return;
  }
  SetFileLocked(*std::move(tokens));
  Log(absl::StrCat("auth.tokens_file ", path_, ": ", file_.tokens.size(), " tokens, ",
                   file_.quotas.size(), " tenants with quotas"));
}

absl::StatusOr<Caller> Authenticator::Authenticate(std::optional<absl::string_view> authorization,
                                                   absl::string_view subject) const {
  if (!authorization) {
    if (!subject.empty()) {
      absl::ReaderMutexLock lock(&mu_);
      for (const config::TokenEntry& entry : file_.tokens) {
        if (entry.subject == subject) return CallerLocked(entry);
      }
    }
    return absl::UnauthenticatedError("no authorization header: send \"Bearer TOKEN\"");
  }
  // RFC 6750: the scheme is case-insensitive, then one space, then the token (no whitespace).
  constexpr absl::string_view kScheme = "bearer ";
  const absl::string_view value = *authorization;
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    return absl::UnauthenticatedError("malformed authorization header: expected \"Bearer TOKEN\"");
  }
  const absl::string_view token = value.substr(kScheme.size());
  for (char c : token) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return absl::UnauthenticatedError(
          "malformed authorization header: expected \"Bearer TOKEN\"");
    }
  }
  const std::array<uint8_t, 32> digest = Sha256(token);
  absl::ReaderMutexLock lock(&mu_);
  // Every entry is compared, whatever matches, so the time taken says nothing about the tokens.
  const config::TokenEntry* found = nullptr;
  for (const config::TokenEntry& entry : file_.tokens) {
    const bool match =
        CRYPTO_memcmp(entry.sha256.data(), digest.data(), digest.size()) == 0 && entry.has_sha256;
    if (match) found = &entry;
  }
  if (found == nullptr) return absl::UnauthenticatedError("unknown token");
  return CallerLocked(*found);
}

namespace {

std::string Credential(const config::TokenEntry& entry) {
  if (!entry.has_sha256) return absl::StrCat("subject:", entry.subject);
  return absl::StrCat("sha256:", absl::string_view(reinterpret_cast<const char*>(entry.sha256.data()),
                                                   entry.sha256.size()));
}

// What StillValid looks up: the credential with the tenant and the role it gives.
std::string ValidKey(absl::string_view credential, absl::string_view tenant, config::Role role) {
  return absl::StrCat(credential, absl::string_view("\0", 1), tenant, absl::string_view("\0", 1),
                      static_cast<int>(role));
}

}  // namespace

void Authenticator::SetFileLocked(config::TokensFile file) {
  file_ = std::move(file);
  valid_.clear();
  for (const config::TokenEntry& entry : file_.tokens) {
    valid_.insert(ValidKey(Credential(entry), entry.tenant, entry.role));
  }
}

bool Authenticator::StillValid(const Caller& caller) const {
  const std::string key = ValidKey(caller.credential, caller.tenant, caller.role);
  absl::ReaderMutexLock lock(&mu_);
  return valid_.contains(key);
}

Caller Authenticator::CallerLocked(const config::TokenEntry& entry) const {
  Caller caller{.token_name = entry.name,
                .tenant = entry.tenant,
                .role = entry.role,
                .quota = {},
                .credential = Credential(entry)};
  if (auto it = file_.quotas.find(entry.tenant); it != file_.quotas.end())
    caller.quota = it->second;
  return caller;
}

absl::Status RefusePeer(const Caller& caller) {
  if (!caller.peer()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("token ", caller.token_name,
                   " has the role peer: it may only read blobs (df11.v1.ShardService)"));
}

}  // namespace df11::server
