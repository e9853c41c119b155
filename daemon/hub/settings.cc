#include "daemon/hub/settings.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "codec/base/read_file.h"
#include "daemon/hub/cache.h"

namespace df11::hub {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// As huggingface_hub's _clean_token: no line breaks, no surrounding blanks.
std::string CleanToken(const std::string& token) {
  return std::string(
      absl::StripAsciiWhitespace(absl::StrReplaceAll(token, {{"\r", ""}, {"\n", ""}})));
}

std::string ReadTokenFile(const std::string& path) {
  const absl::StatusOr<std::string> text = base::ReadFile(path, base::kMaxTokenFileBytes);
  return text.ok() ? CleanToken(*text) : "";
}

std::string HfHome() {
  if (std::string v = Env("HF_HOME"); !v.empty()) return v;
  if (std::string v = Env("XDG_CACHE_HOME"); !v.empty())
    return (fs::path(v) / "huggingface").string();
  return (fs::path(Env("HOME")) / ".cache" / "huggingface").string();
}

double EnvSeconds(const char* name, double fallback) {
  double v;
  return absl::SimpleAtod(Env(name), &v) && v > 0 ? v : fallback;
}

}  // namespace

bool IsTrueValue(const std::string& value) {
  const std::string v = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(value));
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

HubSettings ResolveHubSettings(const HubOverrides& overrides) {
  HubSettings s;
  s.endpoint = !overrides.endpoint.empty() ? overrides.endpoint : Env("HF_ENDPOINT");
  if (s.endpoint.empty()) s.endpoint = "https://huggingface.co";
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
  s.cache_dir = HubCacheDir(overrides.cache_dir);

  if (!overrides.token_file.empty()) {
    s.token = ReadTokenFile(overrides.token_file);
    s.token_source = overrides.token_file;
  } else if (std::string t = CleanToken(Env("HF_TOKEN")); !t.empty()) {
    s.token = t;
    s.token_source = "HF_TOKEN";
  } else if (std::string t = CleanToken(Env("HUGGING_FACE_HUB_TOKEN")); !t.empty()) {
    s.token = t;
    s.token_source = "HUGGING_FACE_HUB_TOKEN";
  } else {
    std::string path = Env("HF_TOKEN_PATH");
    if (path.empty()) path = (fs::path(HfHome()) / "token").string();
    s.token = ReadTokenFile(path);
    if (!s.token.empty()) s.token_source = path;
  }

  s.offline = overrides.offline || IsTrueValue(Env("HF_HUB_OFFLINE")) ||
              IsTrueValue(Env("TRANSFORMERS_OFFLINE"));
  s.etag_timeout_seconds = EnvSeconds("HF_HUB_ETAG_TIMEOUT", s.etag_timeout_seconds);
  s.download_timeout_seconds = EnvSeconds("HF_HUB_DOWNLOAD_TIMEOUT", s.download_timeout_seconds);
  if (overrides.max_connections > 0) s.max_connections = overrides.max_connections;
  if (overrides.max_download_bytes > 0) s.max_download_bytes = overrides.max_download_bytes;
  return s;
}

}  // namespace df11::hub
