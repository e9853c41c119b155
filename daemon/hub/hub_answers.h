// What the hub answers, read: the JSON of the revision and tree endpoints, the headers of a HEAD
// on /resolve/, the `Link` of a tree page and the wait a 429 or 503 asks for. Pure functions of
// the bytes received, apart from the network (HubClient) so that hostile answers can be fuzzed
// (tests/fuzz/hub_answers_fuzz.cc). Errors are kDataLoss with the reason; the caller adds what
// was asked and the request id.
#ifndef DF11_DAEMON_HUB_HUB_ANSWERS_H_
#define DF11_DAEMON_HUB_HUB_ANSWERS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/hub/http.h"

namespace df11::hub {

// A file of a commit, from the tree listing.
struct RepoFile {
  std::string path;
  uint64_t size = 0;
  std::string lfs_sha256;  // empty for a git-stored file
  std::string git_oid;     // the git blob's sha1: for a git-stored file, its etag
  // What the hub cache names the file's blob by: the LFS sha256, else the git blob sha1.
  const std::string& etag() const { return lfs_sha256.empty() ? git_oid : lfs_sha256; }
};

// What a HEAD on /resolve/ says of a file.
struct FileMetadata {
  std::string commit;    // X-Repo-Commit
  std::string etag;      // sha256 (LFS) or git blob sha1, lower-case hex
  uint64_t size = 0;     // X-Linked-Size, else Content-Length
  std::string location;  // where the bytes are: a CDN URL, or the resolve URL itself
};

// The commit of GET /api/models/{repo}/revision/{rev}: its "sha", a full commit id.
absl::StatusOr<std::string> ParseRevisionAnswer(std::string_view body);

// The files of one page of GET /api/models/{repo}/tree/{commit} (a JSON array; entries of other
// types than "file" are skipped). Every path stays inside the repository (IsRepoFilePath).
absl::StatusOr<std::vector<RepoFile>> ParseTreePage(std::string_view body);

// The URL of `Link: <url>; rel="next"`, or empty.
std::string NextLink(std::string_view link);

// W/"abc" → abc, lower case.
std::string NormalizeEtag(std::string_view etag);

// The metadata of a HEAD on `url` answered with `head` (a 2xx, or a 3xx to the CDN): commit,
// etag and size from X-Repo-Commit, X-Linked-Etag / ETag and X-Linked-Size / Content-Length, and
// where the bytes are. kDataLoss when one is missing or malformed (the answer did not come from
// the hub) or the location is not an absolute URL.
absl::StatusOr<FileMetadata> ParseFileMetadata(const HttpResponse& head, const std::string& url);

// The seconds a 429 or 503 asks to wait: RateLimit's t + 1 when r=0, else an integer
// Retry-After; -1 when the answer says nothing.
double RequestedWait(const HttpResponse& answer);

}  // namespace df11::hub

#endif  // DF11_DAEMON_HUB_HUB_ANSWERS_H_
