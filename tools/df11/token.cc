// df11 token: API tokens for a df11d with auth.tokens_file. `new` makes a random token; `hash`
// turns a token (on stdin, never on the command line, where `ps` would show it) into the entry
// the tokens file lists, which stores only the token's SHA-256.
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "daemon/config/tokens.h"
#include "tools/df11/cli.h"
#include "tools/df11/commands.h"

namespace df11::tool {
namespace {

constexpr char kHelp[] = R"(Usage: df11 token new
       df11 token hash --name NAME --tenant TENANT [--role user|admin|peer] < TOKEN_FILE

API tokens for a df11d whose configuration names auth.tokens_file.
  new    prints a new random token (256 bits, hex, prefixed df11_) on stdout
  hash   reads a token from stdin and prints its entry for the tokens file: name (for logs),
         the token's SHA-256 (the file never holds the token), tenant and role

  df11 token new > team-a.token
  df11 token hash --name ci --tenant team-a < team-a.token >> tokens.yaml   # under "tokens:"
  df11ctl --token-file team-a.token list

Exit codes: 0 success, 1 failure, 2 bad command line.
)";

int New() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    return Fail("token new", absl::InternalError("the random number generator failed"));
  }
  std::printf(
      "df11_%s\n",
      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(bytes), 32)).c_str());
  return kExitOk;
}

int Hash(const Args& args) {
  const std::optional<std::string> name = args.Get("name");
  const std::optional<std::string> tenant = args.Get("tenant");
  if (!name || !tenant) return UsageError("token hash", "--name and --tenant are required");
  const std::string role = args.Get("role").value_or("user");
  const std::string token(absl::StripAsciiWhitespace(
      std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>())));
  if (token.empty()) return UsageError("token hash", "no token on stdin");
  for (char c : token) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return UsageError("token hash", "a token has no spaces or control characters");
    }
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  const std::string entry = absl::StrCat(
      "  - {name: \"", *name, "\", sha256: ",
      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(digest), sizeof digest)),
      ", tenant: \"", *tenant, "\", role: \"", role, "\"}");
  // The entry must read back as df11d reads it: names, tenant and role are checked there.
  absl::StatusOr<config::TokensFile> parsed =
      config::ParseTokens(absl::StrCat("tokens:\n", entry, "\n"));
  if (!parsed.ok()) return UsageError("token hash", std::string(parsed.status().message()));
  std::printf("%s\n", entry.c_str());
  return kExitOk;
}

}  // namespace

int RunToken(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {"name", "tenant", "role"}, {"help"});
  if (!args.ok()) return UsageError("token", std::string(args.status().message()));
  if (args->Has("help") || args->positional().empty()) {
    std::fputs(kHelp, args->Has("help") ? stdout : stderr);
    return args->Has("help") ? kExitOk : kExitUsage;
  }
  const std::string& verb = args->positional()[0];
  if (args->positional().size() != 1) return UsageError("token", "expected new or hash");
  if (verb == "new") return New();
  if (verb == "hash") return Hash(*args);
  return UsageError("token", absl::StrCat("unknown '", verb, "': expected new or hash"));
}

}  // namespace df11::tool
