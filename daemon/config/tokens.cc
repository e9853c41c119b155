#include "daemon/config/tokens.h"

#include <yaml-cpp/yaml.h>

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codec/base/read_file.h"
#include "codec/base/status_macros.h"
#include "daemon/config/config.h"

namespace df11::config {
namespace {

absl::Status EntryError(size_t i, absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tokens[", i, "].", field, ": ", what));
}

bool ParseHex(absl::string_view hex, std::array<uint8_t, 32>& out) {
  if (hex.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    uint8_t byte = 0;
    for (char c : hex.substr(2 * i, 2)) {
      const char l = absl::ascii_tolower(c);
      if (!absl::ascii_isxdigit(l)) return false;
      byte = static_cast<uint8_t>(byte * 16 + (absl::ascii_isdigit(l) ? l - '0' : l - 'a' + 10));
    }
    out[i] = byte;
  }
  return true;
}

// Tenant names appear in metric labels and logs: lower-case letters, digits, '-' and '_'.
bool ValidTenant(absl::string_view t) {
  if (t.empty() || t.size() > 63) return false;
  for (char c : t) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-' && c != '_') return false;
  }
  return true;
}

// A quota: a positive whole number (a size such as 24GiB for bytes).
absl::StatusOr<int64_t> QuotaValue(const std::string& tenant, const std::string& field,
                                   const YAML::Node& value) {
  const std::string where = absl::StrCat("tenants.", tenant, ".", field, ": ");
  if (!value.IsScalar()) return absl::InvalidArgumentError(where + "must be a number");
  int64_t n = 0;
  if (field == "max_resident_bytes") {
    absl::StatusOr<uint64_t> bytes = ParseBytes(value.Scalar());
    if (!bytes.ok())
      return absl::InvalidArgumentError(where + std::string(bytes.status().message()));
    if (*bytes > static_cast<uint64_t>(INT64_MAX))
      return absl::InvalidArgumentError(where + "too large");
    n = static_cast<int64_t>(*bytes);
  } else if (!absl::SimpleAtoi(value.Scalar(), &n)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "\"", value.Scalar(), "\" is not a whole number"));
  }
  if (n <= 0)
    return absl::InvalidArgumentError(where + "must be positive (leave it out: no limit)");
  return n;
}

absl::StatusOr<std::map<std::string, TenantQuota>> ParseQuotas(const YAML::Node& tenants) {
  std::map<std::string, TenantQuota> quotas;
  if (!tenants.IsDefined() || tenants.IsNull()) return quotas;
  if (!tenants.IsMap()) return absl::InvalidArgumentError("tenants: must be a mapping by tenant");
  for (const auto& t : tenants) {
    const std::string tenant = t.first.as<std::string>();
    if (!ValidTenant(tenant)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tenants: \"", tenant, "\" is not 1-63 of a-z, 0-9, '-' and '_'"));
    }
    if (!t.second.IsMap()) {
      return absl::InvalidArgumentError(absl::StrCat("tenants.", tenant, ": must be a mapping"));
    }
    TenantQuota& quota = quotas[tenant];
    for (const auto& kv : t.second) {
      const std::string field = kv.first.as<std::string>();
      std::optional<int64_t>* target = field == "max_models" ? &quota.max_models
                                       : field == "max_running_requests"
                                           ? &quota.max_running_requests
                                       : field == "requests_per_minute" ? &quota.requests_per_minute
                                                                        : nullptr;
      if (target == nullptr && field != "max_resident_bytes") {
        return absl::InvalidArgumentError(
            absl::StrCat("tenants.", tenant, ".", field,
                         ": unknown field (known: max_resident_bytes, max_models, "
                         "max_running_requests, requests_per_minute)"));
      }
      absl::StatusOr<int64_t> value = QuotaValue(tenant, field, kv.second);
      if (!value.ok()) return value.status();
      if (target != nullptr) {
        *target = *value;
      } else {
        quota.max_resident_bytes = static_cast<uint64_t>(*value);
      }
    }
  }
  return quotas;
}

absl::StatusOr<TokensFile> ParseTokensNode(const YAML::Node& root) {
  if (!root.IsMap()) return absl::InvalidArgumentError("must be a mapping with a tokens: list");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (key != "tokens" && key != "tenants") {
      return absl::InvalidArgumentError(
          absl::StrCat(key, ": unknown field (known: tokens, tenants)"));
    }
  }
  TokensFile file;
  absl::StatusOr<std::map<std::string, TenantQuota>> quotas = ParseQuotas(root["tenants"]);
  if (!quotas.ok()) return quotas.status();
  file.quotas = *std::move(quotas);
  const YAML::Node list = root["tokens"];
  if (!list.IsDefined() || list.IsNull()) return file;
  if (!list.IsSequence()) return absl::InvalidArgumentError("tokens: must be a list");
  std::set<std::string> names;
  std::set<std::array<uint8_t, 32>> hashes;
  std::set<std::string> subjects;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node e = list[i];
    if (!e.IsMap()) return EntryError(i, "", "must be a mapping");
    TokenEntry entry;
    for (const auto& kv : e) {
      const std::string key = kv.first.as<std::string>();
      if (!kv.second.IsScalar()) return EntryError(i, key, "must be a string");
      const std::string value = kv.second.Scalar();
      if (key == "name") {
        entry.name = value;
      } else if (key == "sha256") {
        if (!ParseHex(value, entry.sha256)) {
          return EntryError(i, key, "must be 64 hex digits (df11 token hash prints them)");
        }
        entry.has_sha256 = true;
      } else if (key == "subject") {
        if (value.empty()) return EntryError(i, key, "must not be empty");
        entry.subject = value;
      } else if (key == "tenant") {
        if (!ValidTenant(value)) {
          return EntryError(i, key,
                            absl::StrCat("\"", value, "\" is not 1-63 of a-z, 0-9, '-' and '_'"));
        }
        entry.tenant = value;
      } else if (key == "role") {
        if (value == "admin") {
          entry.role = Role::kAdmin;
        } else if (value == "peer") {
          entry.role = Role::kPeer;
        } else if (value != "user") {
          return EntryError(i, key, absl::StrCat("\"", value, "\" is not admin, user or peer"));
        }
      } else {
        return EntryError(i, key, "unknown field (known: name, sha256, subject, tenant, role)");
      }
    }
    if (entry.name.empty()) return EntryError(i, "name", "is required");
    if (entry.has_sha256 == !entry.subject.empty()) {
      return EntryError(i, "sha256", "exactly one of sha256 (a token) and subject (a certificate)");
    }
    if (entry.tenant.empty()) return EntryError(i, "tenant", "is required");
    if (entry.tenant == kSharedTenant && entry.role != Role::kAdmin) {
      return EntryError(i, "tenant",
                        "\"shared\" owns the catalog's models: only an admin may act as it");
    }
    if (!names.insert(entry.name).second) {
      return EntryError(i, "name", absl::StrCat("\"", entry.name, "\" is listed twice"));
    }
    if (entry.has_sha256 && !hashes.insert(entry.sha256).second) {
      return EntryError(i, "sha256", "the same token is listed twice");
    }
    if (!entry.subject.empty() && !subjects.insert(entry.subject).second) {
      return EntryError(i, "subject", absl::StrCat("\"", entry.subject, "\" is listed twice"));
    }
    file.tokens.push_back(std::move(entry));
  }
  return file;
}

constexpr char kQuotaPayload[] = "type.df11.dev/quota";

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kPeer:
      return "peer";
    case Role::kUser:
      break;
  }
  return "user";
}

absl::StatusOr<TokensFile> ParseTokens(absl::string_view yaml) {
  try {
    return ParseTokensNode(YAML::Load(std::string(yaml)));
  } catch (const YAML::Exception& e) {  // not YAML, or a key that is not a string
    return absl::InvalidArgumentError(absl::StrCat("not a tokens file: ", e.what()));
  }
}

absl::StatusOr<TokensFile> LoadTokensFile(const std::string& path) {
  DF11_ASSIGN_OR_RETURN(const std::string text, base::ReadFile(path, base::kMaxSettingsFileBytes));
  absl::StatusOr<TokensFile> tokens = ParseTokens(text);
  if (!tokens.ok()) {
    return absl::Status(tokens.status().code(),
                        absl::StrCat(path, ": ", tokens.status().message()));
  }
  return tokens;
}

absl::Status QuotaExceededError(absl::string_view message) {
  absl::Status status = absl::ResourceExhaustedError(message);
  status.SetPayload(kQuotaPayload, absl::Cord("1"));
  return status;
}

bool IsQuotaExceeded(const absl::Status& status) {
  return status.GetPayload(kQuotaPayload).has_value();
}

}  // namespace df11::config
