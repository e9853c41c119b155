// A fake Hugging Face Hub for tests: a hub server and a CDN server on 127.0.0.1, each on its own
// ephemeral port, speaking the hub's HTTP protocol as huggingface_hub uses it (hub_client.h):
//   GET  /api/models/{org}/{name}[/revision/{rev}]    repo info: id, sha, siblings, gated, ...
//   GET  /api/models/{org}/{name}/tree/{rev}[/{dir}]  ?recursive=true&expand=false; pages of
//        SetTreePageSize() entries, the next one named by an absolute `Link: <...>; rel="next"`
//   HEAD|GET /{org}/{name}/resolve/{rev}/{path}       git file: 200 + ETag (blob sha1); LFS file:
//        302 to {cdn}/blobs/{sha256}?repo=..&file=..&expires=.. + X-Linked-Etag/-Size
//   HEAD|GET {cdn}/blobs/{sha256}                     403 for any Authorization header
// A revision is one percent-encoded segment (refs%2Fpr%2F1); path segments are decoded. File
// bodies honour one Range (206 + Content-Range, 416 past the end, the whole body for several
// ranges). Errors carry X-Error-Code: RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo.
//
//   FakeHub hub;
//   FakeFile weights;
//   weights.path = "model.safetensors";
//   weights.content = bytes;  // or weights.disk_path = "/tmp/big.safetensors"
//   weights.lfs = true;
//   std::string commit = hub.AddCommit("org/model", "main", {weights});
//   hub.FailNext(1, 503);  // the client's next request gets a 503
//   // point the client at hub.endpoint(), then check hub.requests()
//
// Every method is thread-safe. Files are immutable once added; file bodies are streamed from the
// FakeFile content or a read-only mapping of disk_path, so multi-GB files are not copied.
// httplib itself answers a Range header it cannot parse (such as bytes=5-3) with 416, before
// latency and faults apply; requests() still records it.
#ifndef DF11_TESTS_HUB_FAKE_HUB_H_
#define DF11_TESTS_HUB_FAKE_HUB_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace df11::testing {

struct FakeFile {
  std::string path;       // "config.json", "sub/dir/x.safetensors"
  std::string content;    // the bytes, or empty with disk_path set
  std::string disk_path;  // when not empty, serve this file's bytes (mapped read-only)
  bool lfs = false;       // LFS file: etag = sha256 hex, resolve answers 302 to the CDN
};

class FakeHub {
 public:
  struct Request {
    std::string server;  // "hub" or "cdn"
    std::string method;
    std::string path;  // as sent, with the query
    std::string range;
    std::string authorization;
    int status = 0;  // the status line sent (a cut body still reads 200/206)
  };

  // Starts both servers; aborts if a port cannot be bound.
  FakeHub();
  // Stops both servers and waits for in-flight responses (an idle keep-alive connection held by
  // a client delays this by up to the 2 s keep-alive timeout).
  ~FakeHub();
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;

  std::string endpoint() const;      // "http://127.0.0.1:PORT", the hub
  std::string cdn_endpoint() const;  // "http://127.0.0.1:PORT2"

  // Adds a commit to `repo_id` ("org/name") on `branch` (created or moved) holding exactly
  // `files` (a full tree, not a diff) and returns its 40-hex id. Hashes every file here (sha256
  // for LFS; the git blob sha1 otherwise). Aborts if a disk_path cannot be read.
  std::string AddCommit(const std::string& repo_id, const std::string& branch,
                        std::vector<FakeFile> files);
  // Points `ref` ("refs/pr/1", "v1") at `commit` (a commit id or a branch of the repo). Aborts
  // if the repo or the commit is unknown.
  void AddTag(const std::string& repo_id, const std::string& ref, const std::string& commit);
  // Requests without "Authorization: Bearer <token>" get 401, with another token 403, both with
  // X-Error-Code: GatedRepo. May be called before the repo exists.
  void SetGated(const std::string& repo_id, const std::string& token);
  // Moves the repo to `new_id` (unless a repo already lives there); requests to `old_id` then
  // answer 307 with a relative Location naming `new_id`, as long as no repo is added at `old_id`.
  void RenameRepo(const std::string& old_id, const std::string& new_id);

  // Faults, each consumed by the next matching requests; setting one again replaces the count.
  // The next `count` requests (hub or CDN) answer `status` with Retry-After when
  // retry_after_seconds >= 0; a 429 then also carries `RateLimit: "api";r=0;t=<seconds>`.
  void FailNext(int count, int status, int retry_after_seconds = -1);
  // The next `count` file-body GETs (hub or CDN) announce the full Content-Length, send
  // `after_bytes` bytes of the body and close the connection.
  void CutNext(int count, int64_t after_bytes);
  // The next `count` file-body GETs carrying Range answer 200 with the whole body.
  void IgnoreRangeNext(int count);
  // GETs of that file's body (hub or CDN) serve `bytes`, of any length; HEAD, etags, sizes and
  // the tree still describe the real content.
  void ServeCorrupt(const std::string& repo_id, const std::string& path, std::string bytes);
  // 0 = unlimited; paces every file body (hub and CDN), per connection.
  void SetThrottle(int64_t bytes_per_second);
  // Delay before every response.
  void SetLatency(int milliseconds);
  // Entries per tree page; default 2, so paging is always exercised.
  void SetTreePageSize(int n);

  // Every request so far, recorded once its status is final and before its response goes out,
  // so a client holding a response always finds its request here.
  std::vector<Request> requests() const;
  void ClearRequests();
  // File-body bytes sent for that file (hub + CDN), counting cut bodies.
  int64_t body_bytes_sent(const std::string& repo_id, const std::string& path) const;

 private:
  class Bytes;  // a file's content: owned, or a read-only mapping
  struct Entry;
  struct Commit;
  struct Resolved;
  struct Repo {
    std::map<std::string, std::string> branches;  // name -> commit id
    std::map<std::string, std::string> refs;      // tags, refs/pr/N, ... -> commit id
    std::map<std::string, std::shared_ptr<const Commit>> commits;
    // A branch, a ref, "refs/heads/<branch>", "refs/tags/<tag>" or a commit id; null if none.
    std::shared_ptr<const Commit> Find(const std::string& rev) const;
  };

  void StartServer(httplib::Server& server, const std::string& name, int* port,
                   std::thread* thread);
  bool PreRoute(const httplib::Request& req, httplib::Response& res);
  void Record(const std::string& server, const httplib::Request& req, const httplib::Response& res);
  void HandleHub(const httplib::Request& req, httplib::Response& res);
  void HandleCdn(const httplib::Request& req, httplib::Response& res);
  void HandleRevision(const httplib::Request& req, httplib::Response& res, const Resolved& r);
  void HandleTree(const httplib::Request& req, httplib::Response& res, const Resolved& r,
                  const std::string& raw_rev, const std::string& raw_dir, const std::string& dir);
  void HandleResolve(const httplib::Request& req, httplib::Response& res, const Resolved& r,
                     const std::string& path);
  // Looks up repo and revision; answers renames, unknown repos or revisions and gating itself
  // (returning false). `raw_rest` is the raw path after the repo id, for redirects.
  bool Resolve(const httplib::Request& req, httplib::Response& res, bool api,
               const std::string& repo_id, const std::string& rev, const std::string& raw_rest,
               Resolved* out);
  // Serves a file body (GET) or its headers (HEAD) with Range, faults and throttling applied.
  // `key` names the file for ServeCorrupt and body_bytes_sent.
  void ServeBody(const httplib::Request& req, httplib::Response& res, const std::string& key,
                 std::shared_ptr<const Bytes> bytes);
  void CountBodyBytes(const std::string& key, int64_t n);

  std::unique_ptr<httplib::Server> hub_;
  std::unique_ptr<httplib::Server> cdn_;
  std::thread hub_thread_;
  std::thread cdn_thread_;
  int hub_port_ = 0;
  int cdn_port_ = 0;

  std::atomic<int64_t> throttle_{0};
  std::atomic<int> latency_ms_{0};
  std::atomic<int> tree_page_size_{2};

  mutable absl::Mutex mu_;
  std::map<std::string, Repo> repos_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> renames_ ABSL_GUARDED_BY(mu_);  // old id -> new id
  std::map<std::string, std::string> gated_ ABSL_GUARDED_BY(mu_);    // repo id -> token
  // sha256 -> (FileKey, bytes) of the first file added with that content; the CDN attributes a
  // request without our repo/file query to it.
  std::map<std::string, std::pair<std::string, std::shared_ptr<const Bytes>>> blobs_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<const std::string>> corrupt_  // FileKey -> served bytes
      ABSL_GUARDED_BY(mu_);
  int64_t commit_counter_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_count_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_status_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_retry_after_ ABSL_GUARDED_BY(mu_) = -1;
  int cut_count_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t cut_after_ ABSL_GUARDED_BY(mu_) = 0;
  int ignore_range_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Request> requests_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> body_bytes_ ABSL_GUARDED_BY(mu_);  // FileKey() -> bytes
};

}  // namespace df11::testing

#endif  // DF11_TESTS_HUB_FAKE_HUB_H_
