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
  absl::StatusOr<std::vector<TokenEntry>> tokens = ParseTokens(File(
      std::string("  - {name: ci, sha256: ") + kHash + ", tenant: team-a, role: user}\n" +
      "  - {name: ops, sha256: 60303AE22B998861BCE3B28F33EEC1BE758A213C86C93C076DBE9F558C11C752,"
      " tenant: ops, role: admin}\n"));
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].name, "ci");
  EXPECT_EQ((*tokens)[0].tenant, "team-a");
  EXPECT_EQ((*tokens)[0].role, Role::kUser);
  EXPECT_EQ((*tokens)[0].sha256[0], 0x9f);
  EXPECT_EQ((*tokens)[0].sha256[31], 0x08);
  EXPECT_EQ((*tokens)[1].role, Role::kAdmin);
  EXPECT_EQ((*tokens)[1].sha256[0], 0x60);  // upper-case hex too
  absl::StatusOr<std::vector<TokenEntry>> by_subject =
      ParseTokens(File("  - {name: batch, subject: \"CN=batch,O=Example\", tenant: b}\n"));
  ASSERT_TRUE(by_subject.ok()) << by_subject.status();
  EXPECT_EQ((*by_subject)[0].subject, "CN=batch,O=Example");
  EXPECT_FALSE((*by_subject)[0].has_sha256);
  EXPECT_EQ(RoleName(Role::kAdmin), "admin");
  // No entries: nobody may call.
  EXPECT_TRUE(ParseTokens("tokens: []\n")->empty());
  EXPECT_TRUE(ParseTokens("tokens:\n")->empty());
}

TEST(TokensTest, MalformedEntriesAreRefusedNamingTheField) {
  const std::string ok_hash = kHash;
  const struct {
    std::string yaml;
    std::string error;
  } cases[] = {
      {"[]", "mapping"},
      {"tokens: {}", "tokens: must be a list"},
      {"tokenz: []", "tokenz: unknown field"},
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
       "\"root\" is not admin or user"},
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
    absl::StatusOr<std::vector<TokenEntry>> tokens = ParseTokens(c.yaml);
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
  absl::StatusOr<std::vector<TokenEntry>> tokens = LoadTokensFile(configs + "/tokens.example.yaml");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 3u);
  absl::StatusOr<Config> secure = LoadConfigFile(configs + "/secure.yaml");
  ASSERT_TRUE(secure.ok()) << secure.status();
  EXPECT_EQ(secure->auth_tokens_file, configs + "/tokens.yaml");
  EXPECT_TRUE(secure->user_loads_catalog_only);
  EXPECT_EQ(secure->model_roots, std::vector<std::string>{"/srv/models"});
  EXPECT_EQ(secure->tls_client_ca_file, "/etc/df11d/tls/ca.crt");
}

}  // namespace
}  // namespace df11::config
