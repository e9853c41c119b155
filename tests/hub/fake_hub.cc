#include "tests/hub/fake_hub.h"

#include <fcntl.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace df11::testing {
namespace {

using Json = nlohmann::ordered_json;

// The most one content-provider call writes: big enough for loopback speed, small enough to
// cut and pace bodies precisely.
constexpr size_t kChunkBytes = size_t{1} << 20;
// Worker threads per server; an idle keep-alive connection holds one, so ~16 parallel
// downloads plus their HEADs fit.
constexpr size_t kThreads = 32;
constexpr char kLastModified[] = "2026-01-01T00:00:00.000Z";
constexpr char kOctetStream[] = "application/octet-stream";
constexpr char kJson[] = "application/json; charset=utf-8";
constexpr char kText[] = "text/plain; charset=utf-8";

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "FakeHub: %s\n", message.c_str());
  std::abort();
}

std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

// Hex digest of the concatenated parts.
std::string Digest(const EVP_MD* md, std::initializer_list<absl::string_view> parts) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, md, nullptr) == 1;
  for (absl::string_view part : parts) {
    ok = ok && EVP_DigestUpdate(ctx, part.data(), part.size()) == 1;
  }
  ok = ok && EVP_DigestFinal_ex(ctx, out, &len) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) Die("OpenSSL digest failed");
  return Hex(out, len);
}

// Git's object id: sha1 over "<type> <size>\0" and the content.
std::string GitOid(absl::string_view type, absl::string_view content) {
  std::string header = absl::StrCat(type, " ", content.size());
  header.push_back('\0');
  return Digest(EVP_sha1(), {header, content});
}

std::string HexToBytes(absl::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    int byte = 0;
    if (!absl::SimpleHexAtoi(hex.substr(i, 2), &byte)) Die("bad hex digest");
    out.push_back(static_cast<char>(byte));
  }
  return out;
}

std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

std::string FileKey(absl::string_view repo_id, absl::string_view path) {
  return absl::StrCat(repo_id, "\n", path);
}

// %XX escapes decoded; everything else kept as sent.
std::string Decode(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    int byte = 0;
    if (s[i] == '%' && i + 2 < s.size() && absl::ascii_isxdigit(s[i + 1]) &&
        absl::ascii_isxdigit(s[i + 2]) && absl::SimpleHexAtoi(s.substr(i + 1, 2), &byte)) {
      out.push_back(static_cast<char>(byte));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Escapes all but RFC 3986 unreserved characters, as the client does.
std::string Encode(absl::string_view s) {
  std::string out;
  for (char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      unsigned char byte = static_cast<unsigned char>(c);
      out += absl::StrCat("%", absl::AsciiStrToUpper(Hex(&byte, 1)));
    }
  }
  return out;
}

// Errors carry X-Error-Code / X-Error-Message because HEAD answers have no body.
void SetError(httplib::Response& res, bool api, int status, absl::string_view code,
              const std::string& message) {
  res.status = status;
  if (!code.empty()) res.set_header("X-Error-Code", std::string(code));
  res.set_header("X-Error-Message", message);
  if (api) {
    res.set_content(Json{{"error", message}}.dump(), kJson);
  } else {
    res.set_content(message, kText);
  }
}

enum class RangeKind { kWhole, kPartial, kUnsatisfiable };

// One "bytes=a-b", "bytes=a-" or "bytes=-n" against `size` bytes (RFC 9110 §14). Other units,
// several ranges or bad syntax are ignored, which the RFC allows: the whole body is sent.
RangeKind ParseRange(absl::string_view header, uint64_t size, uint64_t* begin, uint64_t* length) {
  if (!absl::ConsumePrefix(&header, "bytes=")) return RangeKind::kWhole;
  header = absl::StripAsciiWhitespace(header);
  size_t dash = header.find('-');
  if (dash == absl::string_view::npos || header.find(',') != absl::string_view::npos) {
    return RangeKind::kWhole;
  }
  absl::string_view first = header.substr(0, dash);
  absl::string_view last = header.substr(dash + 1);
  uint64_t a = 0;
  uint64_t b = 0;
  if (first.empty()) {  // the last `b` bytes
    if (!absl::SimpleAtoi(last, &b)) return RangeKind::kWhole;
    if (b == 0 || size == 0) return RangeKind::kUnsatisfiable;
    *length = std::min(b, size);
    *begin = size - *length;
    return RangeKind::kPartial;
  }
  if (!absl::SimpleAtoi(first, &a)) return RangeKind::kWhole;
  if (last.empty()) {
    b = UINT64_MAX;
  } else if (!absl::SimpleAtoi(last, &b) || b < a) {
    return RangeKind::kWhole;
  }
  if (a >= size) return RangeKind::kUnsatisfiable;
  *begin = a;
  *length = std::min(b, size - 1) - a + 1;
  return RangeKind::kPartial;
}

bool IsTrue(const std::string& value) { return value == "true" || value == "True" || value == "1"; }

}  // namespace

// A file's bytes: an owned string, or a read-only mapping of a disk file.
class FakeHub::Bytes {
 public:
  explicit Bytes(std::string s)
      : owned_(std::move(s)), data_(owned_.data()), size_(owned_.size()) {}
  Bytes(const char* mapped, size_t size) : data_(mapped), size_(size), mapped_(true) {}
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  ~Bytes() {
    if (mapped_) munmap(const_cast<char*>(data_), size_);
  }

  static std::shared_ptr<const Bytes> Map(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Die("cannot open " + path);
    struct stat st;
    if (fstat(fd, &st) != 0) Die("cannot stat " + path);
    const size_t size = static_cast<size_t>(st.st_size);
    if (size == 0) {  // mmap rejects an empty length
      close(fd);
      return std::make_shared<const Bytes>(std::string());
    }
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) Die("cannot map " + path);
    madvise(p, size, MADV_SEQUENTIAL);
    return std::make_shared<const Bytes>(static_cast<const char*>(p), size);
  }

  absl::string_view view() const { return {data_, size_}; }

 private:
  std::string owned_;
  const char* data_;
  size_t size_;
  bool mapped_ = false;
};

struct FakeHub::Entry {
  bool lfs = false;
  std::shared_ptr<const Bytes> bytes;
  std::string git_oid;      // sha1 of the git blob: the content, or for LFS the pointer file
  std::string sha256;       // LFS only
  size_t pointer_size = 0;  // LFS only
  size_t size() const { return bytes->view().size(); }
};

struct FakeHub::Commit {
  std::string id;
  std::map<std::string, Entry> files;           // by path
  std::map<std::string, std::string> dir_oids;  // directory path -> git tree id

  // Git's tree id of `dir` ("" for the root), recording every subdirectory's id on the way.
  std::string HashTree(const std::string& dir) {
    const std::string prefix = dir.empty() ? "" : dir + "/";
    std::map<std::string, std::string> records;  // git orders a directory as "name/"
    for (auto it = files.lower_bound(prefix);
         it != files.end() && absl::StartsWith(it->first, prefix); ++it) {
      absl::string_view rest = absl::string_view(it->first).substr(prefix.size());
      size_t slash = rest.find('/');
      std::string name(rest.substr(0, slash));
      std::string mode = "100644";
      std::string oid = it->second.git_oid;
      if (slash != absl::string_view::npos) {
        if (records.count(name + "/")) continue;
        mode = "40000";
        oid = HashTree(prefix + name);
        dir_oids[prefix + name] = oid;
        name += "/";
      }
      std::string record = absl::StrCat(mode, " ", absl::StripSuffix(name, "/"));
      record.push_back('\0');
      records[name] = record + HexToBytes(oid);
    }
    std::string body;
    for (const auto& [name, record] : records) body += record;
    return GitOid("tree", body);
  }
};

struct FakeHub::Resolved {
  std::string repo_id;
  std::string rev;
  bool gated = false;
  std::shared_ptr<const Commit> commit;
};

std::shared_ptr<const FakeHub::Commit> FakeHub::Repo::Find(const std::string& rev) const {
  std::string id = rev;
  if (auto it = branches.find(rev); it != branches.end()) {
    id = it->second;
  } else if (auto it = refs.find(rev); it != refs.end()) {
    id = it->second;
  } else if (absl::StartsWith(rev, "refs/heads/") && branches.count(rev.substr(11))) {
    id = branches.at(rev.substr(11));
  } else if (absl::StartsWith(rev, "refs/tags/") && refs.count(rev.substr(10))) {
    id = refs.at(rev.substr(10));
  }
  auto it = commits.find(id);
  return it == commits.end() ? nullptr : it->second;
}

FakeHub::FakeHub()
    : hub_(std::make_unique<httplib::Server>()), cdn_(std::make_unique<httplib::Server>()) {
  hub_->Get(R"([\s\S]*)",
            [this](const httplib::Request& req, httplib::Response& res) { HandleHub(req, res); });
  cdn_->Get(R"([\s\S]*)",
            [this](const httplib::Request& req, httplib::Response& res) { HandleCdn(req, res); });
  StartServer(*hub_, "hub", &hub_port_, &hub_thread_);
  StartServer(*cdn_, "cdn", &cdn_port_, &cdn_thread_);
}

FakeHub::~FakeHub() {
  hub_->stop();
  cdn_->stop();
  hub_thread_.join();
  cdn_thread_.join();
}

void FakeHub::StartServer(httplib::Server& server, const std::string& name, int* port,
                          std::thread* thread) {
  server.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
  server.set_keep_alive_max_count(1000);
  // httplib's stop() waits for idle keep-alive connections to time out; keep that short.
  server.set_keep_alive_timeout(2);
  // Headers and body go out in separate writes; Nagle would hold the body for the client's
  // delayed ACK (40 ms a response).
  server.set_tcp_nodelay(true);
  int listen_fd = -1;
  server.set_socket_options([&listen_fd](socket_t fd) { listen_fd = fd; });
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return PreRoute(req, res) ? httplib::Server::HandlerResponse::Handled
                              : httplib::Server::HandlerResponse::Unhandled;
  });
  // Called once the status is final and before anything is sent, so a client that has its
  // answer always finds the request in requests().
  server.set_post_routing_handler([this, name](const httplib::Request& req,
                                               httplib::Response& res) { Record(name, req, res); });
  *port = server.bind_to_any_port("127.0.0.1");
  server.set_socket_options(nullptr);
  if (*port <= 0 || listen_fd < 0) Die("cannot bind 127.0.0.1");
  // httplib listens with a backlog of 5: a burst of parallel connects would wait for SYN retries.
  ::listen(listen_fd, 128);
  *thread = std::thread([&server] { server.listen_after_bind(); });
  // stop() does nothing until the accept loop runs.
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

std::string FakeHub::endpoint() const { return absl::StrCat("http://127.0.0.1:", hub_port_); }

std::string FakeHub::cdn_endpoint() const { return absl::StrCat("http://127.0.0.1:", cdn_port_); }

std::string FakeHub::AddCommit(const std::string& repo_id, const std::string& branch,
                               std::vector<FakeFile> files) {
  // Hashing (possibly GBs) happens before taking the lock.
  auto commit = std::make_shared<Commit>();
  for (FakeFile& f : files) {
    if (f.path.empty() || f.path.front() == '/' || f.path.back() == '/' ||
        absl::StrContains(f.path, "//")) {
      Die("bad file path '" + f.path + "'");
    }
    Entry e;
    e.lfs = f.lfs;
    e.bytes = f.disk_path.empty() ? std::make_shared<const Bytes>(std::move(f.content))
                                  : Bytes::Map(f.disk_path);
    absl::string_view content = e.bytes->view();
    if (f.lfs) {
      // Git holds the LFS pointer, so the tree's oid is the pointer's blob id.
      e.sha256 = Digest(EVP_sha256(), {content});
      std::string pointer =
          absl::StrCat("version https://git-lfs.github.com/spec/v1\noid sha256:", e.sha256,
                       "\nsize ", content.size(), "\n");
      e.pointer_size = pointer.size();
      e.git_oid = GitOid("blob", pointer);
    } else {
      e.git_oid = GitOid("blob", content);
    }
    if (!commit->files.emplace(f.path, std::move(e)).second) Die("duplicate path " + f.path);
  }
  const std::string root = commit->HashTree("");

  absl::MutexLock lock(&mu_);
  commit->id = Digest(EVP_sha1(),
                      {repo_id, "\n", branch, "\n", std::to_string(++commit_counter_), "\n", root});
  Repo& repo = repos_[repo_id];
  repo.commits[commit->id] = commit;
  repo.branches[branch] = commit->id;
  for (const auto& [path, e] : commit->files) {
    if (e.lfs) blobs_.emplace(e.sha256, std::make_pair(FileKey(repo_id, path), e.bytes));
  }
  return commit->id;
}

void FakeHub::AddTag(const std::string& repo_id, const std::string& ref,
                     const std::string& commit) {
  absl::MutexLock lock(&mu_);
  auto it = repos_.find(repo_id);
  if (it == repos_.end()) Die("AddTag: unknown repo " + repo_id);
  std::shared_ptr<const Commit> c = it->second.Find(commit);
  if (c == nullptr) Die("AddTag: unknown commit " + commit);
  it->second.refs[ref] = c->id;
}

void FakeHub::SetGated(const std::string& repo_id, const std::string& token) {
  absl::MutexLock lock(&mu_);
  gated_[repo_id] = token;
}

void FakeHub::RenameRepo(const std::string& old_id, const std::string& new_id) {
  absl::MutexLock lock(&mu_);
  auto it = repos_.find(old_id);
  if (it != repos_.end()) {
    if (!repos_.count(new_id)) repos_[new_id] = std::move(it->second);
    repos_.erase(it);
  }
  renames_[old_id] = new_id;
}

void FakeHub::FailNext(int count, int status, int retry_after_seconds) {
  absl::MutexLock lock(&mu_);
  fail_count_ = count;
  fail_status_ = status;
  fail_retry_after_ = retry_after_seconds;
}

void FakeHub::CutNext(int count, int64_t after_bytes) {
  absl::MutexLock lock(&mu_);
  cut_count_ = count;
  cut_after_ = after_bytes;
}

void FakeHub::IgnoreRangeNext(int count) {
  absl::MutexLock lock(&mu_);
  ignore_range_count_ = count;
}

void FakeHub::ServeCorrupt(const std::string& repo_id, const std::string& path, std::string bytes) {
  absl::MutexLock lock(&mu_);
  corrupt_[FileKey(repo_id, path)] = std::make_shared<const std::string>(std::move(bytes));
}

void FakeHub::SetThrottle(int64_t bytes_per_second) { throttle_ = bytes_per_second; }

void FakeHub::SetLatency(int milliseconds) { latency_ms_ = milliseconds; }

void FakeHub::SetTreePageSize(int n) { tree_page_size_ = std::max(n, 1); }

std::vector<FakeHub::Request> FakeHub::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

void FakeHub::ClearRequests() {
  absl::MutexLock lock(&mu_);
  requests_.clear();
}

int64_t FakeHub::body_bytes_sent(const std::string& repo_id, const std::string& path) const {
  absl::MutexLock lock(&mu_);
  auto it = body_bytes_.find(FileKey(repo_id, path));
  return it == body_bytes_.end() ? 0 : it->second;
}

void FakeHub::CountBodyBytes(const std::string& key, int64_t n) {
  absl::MutexLock lock(&mu_);
  body_bytes_[key] += n;
}

bool FakeHub::PreRoute(const httplib::Request& req, httplib::Response& res) {
  // httplib parses Range itself and would slice every body it sends (JSON, errors) and offset
  // our content providers; the file handlers apply Range themselves. The Request object is not
  // const where httplib owns it.
  const_cast<httplib::Request&>(req).ranges.clear();
  if (int ms = latency_ms_.load(); ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
  int status = 0;
  int retry_after = -1;
  {
    absl::MutexLock lock(&mu_);
    if (fail_count_ <= 0) return false;
    --fail_count_;
    status = fail_status_;
    retry_after = fail_retry_after_;
  }
  res.status = status;
  if (retry_after >= 0) {
    res.set_header("Retry-After", std::to_string(retry_after));
    if (status == 429) {
      res.set_header("RateLimit", absl::StrCat("\"api\";r=0;t=", retry_after));
      res.set_header("RateLimit-Policy", "\"fixed window\";\"api\";q=500;w=300");
    }
  }
  res.set_content(absl::StrCat("fake hub: injected status ", status), kText);
  return true;
}

void FakeHub::Record(const std::string& server, const httplib::Request& req,
                     const httplib::Response& res) {
  Request r{server,
            req.method,
            req.target,
            req.get_header_value("Range"),
            req.get_header_value("Authorization"),
            res.status};
  absl::MutexLock lock(&mu_);
  requests_.push_back(std::move(r));
}

void FakeHub::HandleHub(const httplib::Request& req, httplib::Response& res) {
  // Routes on the raw target: httplib's req.path is already decoded, and a revision such as
  // refs%2Fpr%2F1 must stay one segment.
  const std::string raw_path = req.target.substr(0, req.target.find('?'));
  const std::vector<std::string> seg = absl::StrSplit(raw_path, '/');  // seg[0] == ""
  auto join_from = [&](size_t i) {
    return absl::StrJoin(seg.begin() + static_cast<ptrdiff_t>(std::min(i, seg.size())), seg.end(),
                         "/");
  };
  Resolved r;
  if (seg.size() >= 5 && seg[1] == "api" && seg[2] == "models") {
    const std::string repo_id = absl::StrCat(Decode(seg[3]), "/", Decode(seg[4]));
    const std::string raw_rest = seg.size() > 5 ? "/" + join_from(5) : "";
    if (seg.size() == 5 || (seg.size() >= 7 && seg[5] == "revision")) {
      // The revision may arrive encoded or not: everything after "revision/" is the revision.
      const std::string rev = seg.size() == 5 ? "main" : Decode(join_from(6));
      if (Resolve(req, res, /*api=*/true, repo_id, rev, raw_rest, &r)) HandleRevision(req, res, r);
      return;
    }
    if (seg.size() >= 7 && seg[5] == "tree") {
      const std::string raw_dir = join_from(7);
      const std::string dir(absl::StripSuffix(Decode(raw_dir), "/"));
      if (Resolve(req, res, /*api=*/true, repo_id, Decode(seg[6]), raw_rest, &r)) {
        HandleTree(req, res, r, seg[6], raw_dir, dir);
      }
      return;
    }
  } else if (seg.size() >= 6 && seg[3] == "resolve") {
    const std::string repo_id = absl::StrCat(Decode(seg[1]), "/", Decode(seg[2]));
    std::vector<std::string> parts;
    for (size_t i = 5; i < seg.size(); ++i) parts.push_back(Decode(seg[i]));
    if (Resolve(req, res, /*api=*/false, repo_id, Decode(seg[4]), "/" + join_from(3), &r)) {
      HandleResolve(req, res, r, absl::StrJoin(parts, "/"));
    }
    return;
  }
  SetError(res, /*api=*/false, 404, "", "Not Found");
}

bool FakeHub::Resolve(const httplib::Request& req, httplib::Response& res, bool api,
                      const std::string& repo_id, const std::string& rev,
                      const std::string& raw_rest, Resolved* out) {
  absl::MutexLock lock(&mu_);
  auto repo = repos_.find(repo_id);
  if (repo == repos_.end()) {
    if (auto it = renames_.find(repo_id); it != renames_.end()) {
      // Relative, as the Hub does for renamed repos; clients follow it on the same host.
      const size_t q = req.target.find('?');
      std::string location = absl::StrCat(api ? "/api/models/" : "/", it->second, raw_rest,
                                          q == std::string::npos ? "" : req.target.substr(q));
      res.status = 307;
      res.set_header("Location", location);
      res.set_content("Temporary Redirect. Redirecting to " + location, kText);
      return false;
    }
    SetError(res, api, 404, "RepoNotFound", "Repository not found");
    return false;
  }
  if (auto it = gated_.find(repo_id); it != gated_.end()) {
    const std::string auth = req.get_header_value("Authorization");
    if (auth.empty()) {
      SetError(res, api, 401, "GatedRepo",
               absl::StrCat("Access to model ", repo_id,
                            " is restricted. You must have access to it and be authenticated to "
                            "access it. Please log in."));
      return false;
    }
    if (auth != "Bearer " + it->second) {
      SetError(res, api, 403, "GatedRepo",
               absl::StrCat("Access to model ", repo_id,
                            " is restricted and you are not in the authorized list. Visit "
                            "https://huggingface.co/",
                            repo_id, " to ask for access."));
      return false;
    }
    out->gated = true;
  }
  out->commit = repo->second.Find(rev);
  if (out->commit == nullptr) {
    SetError(res, api, 404, "RevisionNotFound", "Invalid rev id: " + rev);
    return false;
  }
  out->repo_id = repo_id;
  out->rev = rev;
  return true;
}

void FakeHub::HandleRevision(const httplib::Request& req, httplib::Response& res,
                             const Resolved& r) {
  const bool blobs = IsTrue(req.get_param_value("blobs"));
  Json siblings = Json::array();
  for (const auto& [path, e] : r.commit->files) {
    Json s{{"rfilename", path}};
    if (blobs) {  // blobs=true adds sizes and ids, as model_info(files_metadata=True) asks
      s["blobId"] = e.git_oid;
      s["size"] = e.size();
      if (e.lfs)
        s["lfs"] = {{"sha256", e.sha256}, {"size", e.size()}, {"pointerSize", e.pointer_size}};
    }
    siblings.push_back(std::move(s));
  }
  Json info{{"_id", r.commit->id.substr(0, 24)},
            {"id", r.repo_id},
            {"modelId", r.repo_id},
            {"author", r.repo_id.substr(0, r.repo_id.find('/'))},
            {"sha", r.commit->id},
            {"lastModified", kLastModified},
            {"private", false},
            {"disabled", false},
            {"gated", r.gated ? Json("manual") : Json(false)},
            {"tags", Json::array()},
            {"siblings", std::move(siblings)}};
  res.status = 200;
  res.set_content(info.dump(), kJson);
}

void FakeHub::HandleTree(const httplib::Request& req, httplib::Response& res, const Resolved& r,
                         const std::string& raw_rev, const std::string& raw_dir,
                         const std::string& dir) {
  const Commit& c = *r.commit;
  if (!dir.empty() && !c.dir_oids.count(dir)) {
    SetError(res, /*api=*/true, 404, "EntryNotFound",
             absl::StrCat(dir, " does not exist on \"", r.rev, "\""));
    return;
  }
  const bool recursive = IsTrue(req.get_param_value("recursive"));
  const std::string prefix = dir.empty() ? "" : dir + "/";
  auto listed = [&](const std::string& path) {
    return absl::StartsWith(path, prefix) &&
           (recursive || path.find('/', prefix.size()) == std::string::npos);
  };
  std::map<std::string, Json> entries;  // by path: a directory comes before its contents
  for (const auto& [path, oid] : c.dir_oids) {
    if (listed(path)) {
      entries[path] = Json{{"type", "directory"}, {"oid", oid}, {"size", 0}, {"path", path}};
    }
  }
  for (const auto& [path, e] : c.files) {
    if (!listed(path)) continue;
    Json j{{"type", "file"}, {"oid", e.git_oid}, {"size", e.size()}, {"path", path}};
    if (e.lfs) j["lfs"] = {{"oid", e.sha256}, {"size", e.size()}, {"pointerSize", e.pointer_size}};
    entries[path] = std::move(j);
  }

  size_t start = 0;
  const std::string cursor = req.get_param_value("cursor");
  if (!cursor.empty() && (!absl::SimpleAtoi(cursor, &start) || start > entries.size())) {
    SetError(res, /*api=*/true, 400, "", "Invalid cursor");
    return;
  }
  const size_t end = std::min(entries.size(), start + static_cast<size_t>(tree_page_size_.load()));
  Json page = Json::array();
  auto it = entries.begin();
  std::advance(it, start);
  for (size_t i = start; i < end; ++i, ++it) page.push_back(std::move(it->second));
  if (end < entries.size()) {
    // Absolute, like the Hub's; the cursor is opaque to clients.
    const std::string expand = req.has_param("expand") ? req.get_param_value("expand") : "false";
    res.set_header("Link", absl::StrCat("<", endpoint(), "/api/models/", r.repo_id, "/tree/",
                                        raw_rev, raw_dir.empty() ? "" : "/" + raw_dir,
                                        "?recursive=", recursive ? "true" : "false",
                                        "&expand=", expand, "&cursor=", end, ">; rel=\"next\""));
  }
  res.status = 200;
  res.set_content(page.dump(), kJson);
}

void FakeHub::HandleResolve(const httplib::Request& req, httplib::Response& res, const Resolved& r,
                            const std::string& path) {
  res.set_header("X-Repo-Commit", r.commit->id);
  auto it = r.commit->files.find(path);
  if (it == r.commit->files.end()) {
    SetError(res, /*api=*/false, 404, "EntryNotFound", "Entry not found");
    return;
  }
  const Entry& e = it->second;
  if (e.lfs) {
    // Presigned-looking URL on another origin; repo and file let the CDN attribute the bytes.
    const auto expires = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count() +
                         3600;
    const std::string location =
        absl::StrCat(cdn_endpoint(), "/blobs/", e.sha256, "?repo=", Encode(r.repo_id),
                     "&file=", Encode(path), "&expires=", expires);
    res.status = 302;
    res.set_header("Location", location);
    res.set_header("X-Linked-Etag", Quote(e.sha256));
    res.set_header("X-Linked-Size", std::to_string(e.size()));
    res.set_header("ETag", Quote(e.sha256));
    res.set_content("Found. Redirecting to " + location, kText);
    return;
  }
  res.set_header("ETag", Quote(e.git_oid));
  ServeBody(req, res, FileKey(r.repo_id, path), e.bytes);
}

void FakeHub::HandleCdn(const httplib::Request& req, httplib::Response& res) {
  if (req.has_header("Authorization")) {
    res.status = 403;
    res.set_content("Authorization header not allowed on presigned URL", kText);
    return;
  }
  absl::string_view raw_path = absl::string_view(req.target).substr(0, req.target.find('?'));
  if (!absl::ConsumePrefix(&raw_path, "/blobs/")) {
    SetError(res, /*api=*/false, 404, "", "Not Found");
    return;
  }
  std::string key;
  std::shared_ptr<const Bytes> bytes;
  {
    absl::MutexLock lock(&mu_);
    auto it = blobs_.find(std::string(raw_path));
    if (it == blobs_.end()) {
      SetError(res, /*api=*/false, 404, "", "Not Found");
      return;
    }
    key = it->second.first;
    bytes = it->second.second;
  }
  if (req.has_param("repo") && req.has_param("file")) {
    key = FileKey(req.get_param_value("repo"), req.get_param_value("file"));
  }
  res.set_header("ETag", Quote(raw_path));
  ServeBody(req, res, key, std::move(bytes));
}

void FakeHub::ServeBody(const httplib::Request& req, httplib::Response& res, const std::string& key,
                        std::shared_ptr<const Bytes> bytes) {
  const bool head = req.method == "HEAD";
  const std::string range = req.get_header_value("Range");
  std::shared_ptr<const std::string> corrupt;
  int64_t cut_after = -1;
  bool ignore_range = false;
  if (!head) {
    absl::MutexLock lock(&mu_);
    if (auto it = corrupt_.find(key); it != corrupt_.end()) corrupt = it->second;
    if (!range.empty() && ignore_range_count_ > 0) {
      --ignore_range_count_;
      ignore_range = true;
    }
  }
  const absl::string_view body = corrupt != nullptr ? absl::string_view(*corrupt) : bytes->view();
  uint64_t begin = 0;
  uint64_t length = body.size();
  res.status = 200;
  res.set_header("Accept-Ranges", "bytes");
  if (!range.empty() && !ignore_range) {
    switch (ParseRange(range, body.size(), &begin, &length)) {
      case RangeKind::kWhole:
        break;
      case RangeKind::kPartial:
        res.status = 206;
        res.set_header("Content-Range",
                       absl::StrCat("bytes ", begin, "-", begin + length - 1, "/", body.size()));
        break;
      case RangeKind::kUnsatisfiable:
        res.status = 416;
        res.set_header("Content-Range", absl::StrCat("bytes */", body.size()));
        res.set_content("Requested Range Not Satisfiable", kText);
        return;
    }
  }
  // httplib asserts a provider length > 0; an empty body goes out as Content-Length: 0.
  if (length == 0) return;
  if (head) {  // httplib sends the provider's length as Content-Length and never calls it
    res.set_content_provider(length, kOctetStream,
                             [](size_t, size_t, httplib::DataSink&) { return false; });
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (cut_count_ > 0) {
      --cut_count_;
      cut_after = cut_after_;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  // httplib calls the provider with offsets in [0, length), as ranges were cleared in PreRoute.
  res.set_content_provider(
      length, kOctetStream,
      [this, key, bytes, corrupt, data = body.data() + begin, cut_after, start](
          size_t offset, size_t remaining, httplib::DataSink& sink) {
        size_t n = std::min(remaining, kChunkBytes);
        if (cut_after >= 0) {
          if (offset >= static_cast<uint64_t>(cut_after)) return false;  // closes the connection
          n = std::min<uint64_t>(n, cut_after - offset);
        }
        if (const int64_t rate = throttle_.load(); rate > 0) {
          // ~16 writes a second, each sent when the bytes up to its end are due.
          n = std::min<uint64_t>(n, std::max<int64_t>(rate / 16, 1));
          std::this_thread::sleep_until(
              start + std::chrono::duration<double>(static_cast<double>(offset + n) / rate));
        }
        // Counted before the write, so a client holding the bytes always sees them counted.
        CountBodyBytes(key, static_cast<int64_t>(n));
        if (!sink.write(data + offset, n)) {
          CountBodyBytes(key, -static_cast<int64_t>(n));
          return false;
        }
        return true;
      });
}

}  // namespace df11::testing
