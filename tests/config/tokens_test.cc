// The tokens file: entries read as written; every malformed entry is refused naming its field.
#include "daemon/config/tokens.h"

#include <string>

#include "daemon/config/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace df11::config {
namespace {

using ::testing::HasSubstr;

constexpr char kHash[] = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

std::string File(const std::string& entries) { return "tokens:\n" + entries; }

TEST(TokensTest, EntriesReadAsWritten) {
  absl::StatusOr<TokensFile> file = ParseTokens(File(
      std::string("  - {name: ci, sha256: ") + kHash + ", tenant: team-a, role: user}\n" +
      "  - {name: ops, sha256: 60303AE22B998861BCE3B28F33EEC1BE758A213C86C93C076DBE9F558C11C752,"
      " tenant: ops, role: admin}\n"));
  ASSERT_TRUE(file.ok()) << file.status();
  const std::vector<TokenEntry>* tokens = &file->tokens;
  EXPECT_TRUE(file->quotas.empty());
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].name, "ci");
  EXPECT_EQ((*tokens)[0].tenant, "team-a");
  EXPECT_EQ((*tokens)[0].role, Role::kUser);
  EXPECT_EQ((*tokens)[0].sha256[0], 0x9f);
  EXPECT_EQ((*tokens)[0].sha256[31], 0x08);
  EXPECT_EQ((*tokens)[1].role, Role::kAdmin);
  EXPECT_EQ((*tokens)[1].sha256[0], 0x60);  // upper-case hex too
  absl::StatusOr<TokensFile> by_subject =
      ParseTokens(File("  - {name: batch, subject: \"CN=batch,O=Example\", tenant: b}\n"
                       "  - {name: batch2, subject: \"CN=batch2,O=Example\", tenant: b}\n"));
  ASSERT_TRUE(by_subject.ok()) << by_subject.status();
  EXPECT_EQ(by_subject->tokens[0].subject, "CN=batch,O=Example");
  EXPECT_FALSE(by_subject->tokens[0].has_sha256);
  EXPECT_EQ(RoleName(Role::kAdmin), "admin");
  EXPECT_EQ(RoleName(Role::kPeer), "peer");
  absl::StatusOr<TokensFile> peer = ParseTokens(File(
      "  - {name: node-b, sha256: " + std::string(64, 'a') + ", tenant: cluster, role: peer}\n"));
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->tokens[0].role, Role::kPeer);
  // No entries: nobody may call.
  EXPECT_TRUE(ParseTokens("tokens: []\n")->tokens.empty());
  EXPECT_TRUE(ParseTokens("tokens:\n")->tokens.empty());
  // An admin may act as the shared tenant.
  EXPECT_TRUE(ParseTokens(File(std::string("  - {name: a, sha256: ") + kHash +
                               ", tenant: shared, role: admin}\n"))
                  .ok());
}

TEST(TokensTest, TenantQuotasReadAsWritten) {
  absl::StatusOr<TokensFile> file = ParseTokens(
      "tenants:\n"
      "  team-a: {max_resident_bytes: 2GiB, max_models: 4, max_running_requests: 32,"
      " requests_per_minute: 600}\n"
      "  team-b: {max_models: 1}\n");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->quotas.size(), 2u);
  const TenantQuota& a = file->quotas.at("team-a");
  EXPECT_EQ(a.max_resident_bytes, uint64_t{2} << 30);
  EXPECT_EQ(a.max_models, 4);
  EXPECT_EQ(a.max_running_requests, 32);
  EXPECT_EQ(a.requests_per_minute, 600);
  const TenantQuota& b = file->quotas.at("team-b");
  EXPECT_EQ(b.max_models, 1);
  EXPECT_FALSE(b.max_resident_bytes.has_value());
  EXPECT_FALSE(b.max_running_requests.has_value());
  EXPECT_FALSE(b.requests_per_minute.has_value());
}

TEST(TokensTest, QuotaRefusalsAreMarked) {
  const absl::Status quota = QuotaExceededError("tenant a: max_models is 1");
  EXPECT_EQ(quota.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(quota.message(), "tenant a: max_models is 1");
  EXPECT_TRUE(IsQuotaExceeded(quota));
  EXPECT_FALSE(IsQuotaExceeded(absl::ResourceExhaustedError("the device is full")));
}

TEST(TokensTest, MalformedEntriesAreRefusedNamingTheField) {
  const std::string ok_hash = kHash;
  const struct {
    std::string yaml;
    std::string error;
  } cases[] = {
      {"[]", "mapping"},
      {"tokens: {}", "tokens: must be a list"},
      {"tokenz: []", "tokenz: unknown field (known: tokens, tenants)"},
      {File("  - {name: a, sha256: " + ok_hash + ", tenant: shared}\n"),
       "tokens[0].tenant: \"shared\" owns the catalog's models"},
      {"tenants: [a]", "tenants: must be a mapping by tenant"},
      {"tenants: {Team: {max_models: 1}}", "tenants: \"Team\" is not 1-63"},
      {"tenants: {a: 1}", "tenants.a: must be a mapping"},
      {"tenants: {a: {max_gpus: 1}}", "tenants.a.max_gpus: unknown field"},
      {"tenants: {a: {max_models: 0}}", "tenants.a.max_models: must be positive"},
      {"tenants: {a: {max_models: -3}}", "tenants.a.max_models: must be positive"},
      {"tenants: {a: {requests_per_minute: lots}}",
       "tenants.a.requests_per_minute: \"lots\" is not a whole number"},
      {"tenants: {a: {max_running_requests: [1]}}", "tenants.a.max_running_requests: must be a"},
      {"tenants: {a: {max_resident_bytes: 12 parsecs}}", "tenants.a.max_resident_bytes: "},
      {"tenants: {a: {max_resident_bytes: 0}}", "tenants.a.max_resident_bytes: must be positive"},
      {File("  - just-a-string\n"), "tokens[0].: must be a mapping"},
      {File("  - {sha256: " + ok_hash + ", tenant: a}\n"), "tokens[0].name: is required"},
      {File("  - {name: a, tenant: a}\n"), "tokens[0].sha256: exactly one of sha256"},
      {File("  - {name: a, sha256: " + ok_hash + ", subject: CN=a, tenant: a}\n"),
       "exactly one of sha256"},
      {File("  - {name: a, subject: CN=a, tenant: a}\n  - {name: b, subject: CN=a, tenant: b}\n"),
       "tokens[1].subject: \"CN=a\" is listed twice"},
      {File("  - {name: a, sha256: " + ok_hash + "}\n"), "tokens[0].tenant: is required"},
      {File("  - {name: a, sha256: abc, tenant: a}\n"), "tokens[0].sha256: must be 64 hex"},
      {File("  - {name: a, sha256: " + std::string(63, 'a') + "g, tenant: a}\n"), "must be 64 hex"},
      {File("  - {name: a, sha256: " + ok_hash + ", tenant: Team A}\n"), "tokens[0].tenant"},
      {File("  - {name: a, sha256: " + ok_hash + ", tenant: a, role: root}\n"),
       "\"root\" is not admin, user or peer"},
      {File("  - {name: a, sha256: " + ok_hash + ", tenant: a, token: secret}\n"),
       "tokens[0].token: unknown field"},
      {File("  - {name: a, sha256: " + ok_hash + ", tenant: a, role: [user]}\n"),
       "tokens[0].role: must be a string"},
      {File("  - {name: a, sha256: " + ok_hash +
            ", tenant: a}\n  - {name: a, sha256: " + std::string(64, 'b') + ", tenant: b}\n"),
       "tokens[1].name: \"a\" is listed twice"},
      {File("  - {name: a, sha256: " + ok_hash + ", tenant: a}\n  - {name: b, sha256: " + ok_hash +
            ", tenant: b}\n"),
       "tokens[1].sha256: the same token is listed twice"},
      {"tokens: [", "not a tokens file"},
      {File("  - {[a]: b}\n"), "not a tokens file"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.yaml);
    absl::StatusOr<TokensFile> tokens = ParseTokens(c.yaml);
    ASSERT_FALSE(tokens.ok());
    EXPECT_EQ(tokens.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(tokens.status().message(), HasSubstr(c.error));
  }
  EXPECT_EQ(LoadTokensFile("/nonexistent/tokens.yaml").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TokensTest, LoopbackAddresses) {
  for (const char* a :
       {"127.0.0.1:7411", "127.1.2.3:0", "localhost:80", "[::1]:7411", "unix:/run/df11d.sock"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {"0.0.0.0:7411", "[::]:7411", "10.0.0.5:7411", "127.example.com:7411",
                        "example.com:7411", ":7411"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

TEST(TokensTest, TheConfigNamesTheTokensFileAndWhetherMetricsNeedOne) {
  absl::StatusOr<Config> c = ParseConfig(
      "auth: {tokens_file: tokens.yaml, metrics: token}\ninsecure: true\n", "/etc/df11d");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->auth_tokens_file, "/etc/df11d/tokens.yaml");
  EXPECT_TRUE(c->metrics_need_token);
  EXPECT_TRUE(c->insecure);
  // What --print-config writes reads back the same.
  absl::StatusOr<Config> again = ParseConfig(ConfigToYaml(*c), "/elsewhere");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->auth_tokens_file, c->auth_tokens_file);
  EXPECT_TRUE(again->metrics_need_token);
  EXPECT_TRUE(again->insecure);
  EXPECT_THAT(ParseConfig("auth: {metrics: maybe}\n", "").status().message(),
              HasSubstr("auth.metrics: \"maybe\" is not open or token"));
  EXPECT_THAT(ParseConfig("auth: {token_file: x}\n", "").status().message(),
              HasSubstr("auth.token_file: unknown field"));
  // A control character in any string (here a carriage return) would not read back the same.
  EXPECT_THAT(ParseConfig("preload: [{source: \"models/demo\\r\"}]\n", "").status().message(),
              HasSubstr("preload[0].source: must not contain control characters"));
}

TEST(TokensTest, TheExamplesInConfigsRead) {
  const std::string configs = std::string(DF11_SOURCE_DIR) + "/configs";
  absl::StatusOr<TokensFile> tokens = LoadTokensFile(configs + "/tokens.example.yaml");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->tokens.size(), 3u);
  EXPECT_EQ(tokens->quotas.size(), 2u);
  absl::StatusOr<Config> secure = LoadConfigFile(configs + "/secure.yaml");
  ASSERT_TRUE(secure.ok()) << secure.status();
  EXPECT_EQ(secure->auth_tokens_file, configs + "/tokens.yaml");
  EXPECT_TRUE(secure->user_loads_catalog_only);
  EXPECT_EQ(secure->model_roots, std::vector<std::string>{"/srv/models"});
  EXPECT_EQ(secure->tls_client_ca_file, "/etc/df11d/tls/ca.crt");
}

}  // namespace
}  // namespace df11::config
