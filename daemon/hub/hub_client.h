// The Hugging Face hub's HTTP protocol, as the official `huggingface_hub` library speaks it:
// resolving a revision to a commit, listing a commit's files,
// a file's metadata (HEAD on /resolve/, relative redirects followed by hand) and its bytes (GET,
// resumed with Range, verified against its etag while streaming). Requests are retried with
// backoff on network errors, 408, 429 (honouring RateLimit / Retry-After) and 5xx. The token goes
// only to the endpoint's own origin.
//
// Errors, mapped once (HubError): RepoNotFound / RevisionNotFound / EntryNotFound → kNotFound
// naming what is missing; a gated repo → kUnauthenticated (no or bad token) or kPermissionDenied
// (not approved); network down, 5xx or 429 after the retries → kUnavailable; a size or hash
// mismatch, or an answer that is not the hub's → kDataLoss. Messages keep X-Error-Message and the
// request's trace id.
//
// One HubClient per thread (it keeps one connection).
#ifndef DF11_DAEMON_HUB_HUB_CLIENT_H_
#define DF11_DAEMON_HUB_HUB_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/hub/http.h"
#include "daemon/hub/hub_answers.h"
#include "daemon/hub/settings.h"

namespace df11::hub {

// `status` carrying the hub's X-Error-Code (RepoNotFound, EntryNotFound, GatedRepo, ...).
absl::Status WithHubErrorCode(absl::Status status, const std::string& code);
// The hub's X-Error-Code behind an error of HubClient ("EntryNotFound", "GatedRepo", ...), or
// empty.
std::string HubErrorCode(const absl::Status& status);

class HubClient {
 public:
  // `cancel` (may be null) stops waits and transfers: they end with kCancelled.
  HubClient(const HubSettings& settings, const std::atomic<bool>* cancel);

  // GET /api/models/{repo}/revision/{rev} → the commit (sha).
  absl::StatusOr<std::string> ResolveCommit(const std::string& repo_id,
                                            const std::string& revision);
  // GET /api/models/{repo}/tree/{commit}?recursive=true, every page; files only. kDataLoss for a
  // path that would leave the repository.
  absl::StatusOr<std::vector<RepoFile>> ListFiles(const std::string& repo_id,
                                                  const std::string& commit);
  // HEAD /{repo}/resolve/{revision}/{path}.
  absl::StatusOr<FileMetadata> FetchMetadata(const std::string& repo_id,
                                             const std::string& revision, const std::string& path);
  // Downloads the file `metadata` describes into `partial`, appending to what it already holds
  // (a resumed download; a server that ignores Range restarts it). Calls `progress` with the
  // bytes held so far. The file's length must be metadata.size and its hash the etag; otherwise
  // kDataLoss and `partial` is removed. kResourceExhausted when the file is larger than
  // settings.max_file_bytes, or when its file system is full (naming the file, its size, the bytes
  // written and kept in `partial` for a later resume, and the free space).
  absl::Status Download(const std::string& repo_id, const std::string& path,
                        const FileMetadata& metadata, const std::string& partial,
                        const std::function<void(uint64_t bytes)>& progress);

  const HubSettings& settings() const { return settings_; }
  std::string ResolveUrl(const std::string& repo_id, const std::string& revision,
                         const std::string& path) const;

 private:
  // The standard headers; the token only when `url` is on the endpoint's origin.
  std::vector<std::string> Headers(const std::string& url, const std::string& trace_id) const;
  // GET of a hub API URL (JSON), with retries.
  HttpResponse ApiGet(const std::string& url, std::string* trace_id);
  // Sends with retries (not for transfers, which resume instead).
  HttpResponse SendWithRetries(HttpRequest request, std::string* trace_id);
  // Sleeps before retry `attempt` (0-based), as long as the response asks; false if cancelled.
  bool Backoff(int attempt, const HttpResponse& response);
  absl::Status Error(const HttpResponse& response, const std::string& what,
                     const std::string& trace_id, int attempts) const;
  absl::Status Classify(const HttpResponse& response, const std::string& what,
                        const std::string& trace_id, int attempts) const;

  HubSettings settings_;
  const std::atomic<bool>* cancel_;
  HttpSession http_;
};

}  // namespace df11::hub

#endif  // DF11_DAEMON_HUB_HUB_CLIENT_H_
