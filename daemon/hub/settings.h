// How df11d talks to the Hugging Face hub: endpoint, cache, token, offline mode and limits, taken
// from the daemon config where it sets them and otherwise from the environment variables the
// official `huggingface_hub` library reads (HF_ENDPOINT, HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE,
// HF_TOKEN, HF_TOKEN_PATH, HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT), so that both share a
// cache and a login.
//
//   HubSettings s = ResolveHubSettings({.endpoint = config.hub_endpoint, ...});
#ifndef DF11_DAEMON_HUB_SETTINGS_H_
#define DF11_DAEMON_HUB_SETTINGS_H_

#include <cstdint>
#include <string>

namespace df11::hub {

struct HubSettings {
  std::string endpoint;              // no trailing '/'
  std::string cache_dir;             // the hub cache (models--org--name/...)
  std::string token;                 // empty: none
  std::string token_source;          // where the token came from ("HF_TOKEN", a file), for messages
  bool offline = false;              // the cache only, no network
  double etag_timeout_seconds = 10;  // HEAD and API calls
  double download_timeout_seconds = 10;  // a transfer that stalls this long fails (and resumes)
  int max_retries = 5;  // on 408/429/5xx and network errors, sleeping 1, 2, 4, 8, 8 s
  double retry_base_seconds = 1;
  double max_retry_seconds = 8;
  int max_connections = 8;                          // files downloaded at once
  uint64_t max_file_bytes = 50'000'000'000;         // as huggingface_hub's plain HTTP limit
  uint64_t max_download_bytes = 2'000'000'000'000;  // per model
};

// What the daemon config says; empty strings and unset values defer to the environment.
struct HubOverrides {
  std::string endpoint;
  std::string cache_dir;
  std::string token_file;
  bool offline = false;             // true forces offline; false leaves it to HF_HUB_OFFLINE
  int max_connections = 0;          // 0: default
  uint64_t max_download_bytes = 0;  // 0: default
};

// Endpoint: overrides, else $HF_ENDPOINT, else https://huggingface.co. Cache: HubCacheDir.
// Token: the override's token file, else $HF_TOKEN, else $HUGGING_FACE_HUB_TOKEN, else the file
// $HF_TOKEN_PATH, else $HF_HOME/token (else ~/.cache/huggingface/token); cleaned of line breaks and
// surrounding blanks. Offline: the override, or $HF_HUB_OFFLINE / $TRANSFORMERS_OFFLINE true (1,
// ON, YES, TRUE in any case).
HubSettings ResolveHubSettings(const HubOverrides& overrides);

// True for 1, ON, YES, TRUE in any case.
bool IsTrueValue(const std::string& value);

}  // namespace df11::hub

#endif  // DF11_DAEMON_HUB_SETTINGS_H_
