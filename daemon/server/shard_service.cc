#include "daemon/server/shard_service.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/hub/cache.h"
#include "daemon/hub/cache_writer.h"
#include "daemon/hub/content_hash.h"
#include "daemon/hub/file_io.h"
#include "daemon/server/grpc_caller.h"
#include "daemon/server/log.h"
#include "daemon/server/status_conversion.h"

namespace df11::server {
namespace {

namespace fs = std::filesystem;

// Most etags one StatBlobs may ask about (a model has tens to hundreds of files).
constexpr int kMaxEtags = 10000;

// OK for a repository id `org/name` (no revision).
absl::Status CheckRepo(const std::string& repo_id) {
  absl::StatusOr<hub::ModelSource> source = hub::ParseModelSource(repo_id, /*allow_local=*/false);
  if (!source.ok() || absl::StrContains(repo_id, '@')) {
    return absl::InvalidArgumentError(
        absl::StrCat("repo_id: \"", repo_id.substr(0, 200), "\" is not a repository id org/name"));
  }
  return absl::OkStatus();
}

absl::Status CheckEtag(const std::string& etag) {
  if (hub::IsEtag(etag)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("etag: \"", etag.substr(0, 80), "\" is not 40 or 64 lower-case hex digits"));
}

}  // namespace

ShardService::ShardService(Node& node)
    : node_(node), stall_watchdog_(timer_, absl::Seconds(node.config().stream_stall_seconds)) {}

grpc::Status ShardService::Authorize(const grpc::ServerContext& context) const {
  absl::StatusOr<Caller> caller = GrpcCaller(node_, context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (caller->admin() || caller->peer()) return grpc::Status::OK;
  return ToGrpcStatus(absl::PermissionDeniedError(
      absl::StrCat("token ", caller->token_name,
                   " may not read blobs: ShardService needs the role peer or admin")));
}

absl::StatusOr<ShardService::FileIdentity> ShardService::ServableBlob(
    const std::string& path) const {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return absl::NotFoundError("this node does not hold it complete");
  }
  return ServableBlob(path, st);
}

absl::StatusOr<ShardService::FileIdentity> ShardService::ServableBlob(const std::string& path,
                                                                      const struct stat& st) const {
  // Blobs are files of their own: never a link (a symlink, or a hard link to a file that is not
  // the cache's), whose target the daemon might read but no peer should.
  if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
    return absl::NotFoundError("this node does not hold it complete");
  }
  const FileIdentity id{
      .device = st.st_dev,
      .inode = st.st_ino,
      .size = st.st_size,
      .modified_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  absl::MutexLock lock(&mu_);
  if (auto it = corrupt_.find(path); it != corrupt_.end() && it->second == id) {
    return absl::NotFoundError("it does not match its etag on this node");
  }
  return id;
}

grpc::Status ShardService::StatBlobs(grpc::ServerContext* context,
                                     const df11::v1::StatBlobsRequest* request,
                                     df11::v1::StatBlobsResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = CheckRepo(request->repo_id()); !s.ok()) return ToGrpcStatus(s);
  if (request->etags_size() > kMaxEtags) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("etags: ", request->etags_size(), " asked, at most ", kMaxEtags)));
  }
  const hub::RepoCache cache(node_.hub_settings().cache_dir, request->repo_id());
  for (const std::string& etag : request->etags()) {
    if (absl::Status s = CheckEtag(etag); !s.ok()) return ToGrpcStatus(s);
    df11::v1::BlobStat* stat = response->add_blobs();
    stat->set_etag(etag);
    absl::StatusOr<FileIdentity> blob = ServableBlob(cache.BlobPath(etag));
    stat->set_complete(blob.ok());
    if (blob.ok()) stat->set_size(static_cast<uint64_t>(blob->size));
  }
  return grpc::Status::OK;
}

grpc::Status ShardService::ReadBlob(grpc::ServerContext* context,
                                    const df11::v1::ReadBlobRequest* request,
                                    grpc::ServerWriter<df11::v1::BlobChunk>* writer) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = CheckRepo(request->repo_id()); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = CheckEtag(request->etag()); !s.ok()) return ToGrpcStatus(s);
  const std::string what = absl::StrCat("blob ", request->etag(), " of ", request->repo_id());
  const std::string path =
      hub::RepoCache(node_.hub_settings().cache_dir, request->repo_id()).BlobPath(request->etag());
  absl::StatusOr<FileIdentity> blob = ServableBlob(path);
  if (!blob.ok()) {
    return ToGrpcStatus(absl::NotFoundError(absl::StrCat(what, ": ", blob.status().message())));
  }
  const auto size = static_cast<uint64_t>(blob->size);
  if (request->offset() > size) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("offset: ", request->offset(), " is past the ", size, " bytes of ", what)));
  }
  const int64_t max_readers = node_.config().peer_max_readers;
  if (readers_.fetch_add(1) >= max_readers) {
    --readers_;
    return ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
        "this node already serves ", max_readers, " blob streams (peers.max_readers)")));
  }
  const std::unique_ptr<std::atomic<int64_t>, void (*)(std::atomic<int64_t>*)> reader(
      &readers_, [](std::atomic<int64_t>* r) { --*r; });
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ToGrpcStatus(absl::NotFoundError(absl::StrCat(what, ": cannot open it")));
  const std::unique_ptr<const int, void (*)(const int*)> closer(&fd,
                                                                [](const int* f) { ::close(*f); });
  // What is read is the file opened, whatever the path names by now.
  struct stat st;
  if (::fstat(fd, &st) != 0) return ToGrpcStatus(absl::NotFoundError(what));
  blob = ServableBlob(path, st);
  if (!blob.ok() || static_cast<uint64_t>(blob->size) != size) {
    return ToGrpcStatus(absl::NotFoundError(absl::StrCat(what, ": it changed while opened")));
  }

  // A blob is hashed whole, the bytes before `offset` too, until it has matched its etag once as
  // this file (FileIdentity): a corrupt blob is found whichever part a peer asks for, and a blob
  // served to a fleet is hashed once, not once per peer.
  bool verified;
  {
    absl::MutexLock lock(&mu_);
    auto it = verified_.find(path);
    verified = it != verified_.end() && it->second == *blob;
  }
  hub::ContentHash hash(request->etag(), size);
  const size_t chunk_bytes = static_cast<size_t>(node_.config().peer_chunk_bytes);
  std::string buffer(chunk_bytes, '\0');
  auto corrupt = [&](const std::string& why) {
    {
      absl::MutexLock lock(&mu_);
      corrupt_[path] = *blob;
      verified_.erase(path);
    }
    Log(absl::StrCat(what, " ", why, ": no longer served to peers until the file changes"));
    return ToGrpcStatus(absl::DataLossError(absl::StrCat(what, " ", why, " on this node")));
  };
  for (uint64_t pos = 0; !verified && pos < request->offset();) {
    if (context->IsCancelled()) return grpc::Status::CANCELLED;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_bytes, request->offset() - pos));
    if (!hub::PreadAll(fd, buffer.data(), n, pos)) return corrupt("is shorter than it was");
    hash.Update(buffer.data(), n);
    pos += n;
  }
  df11::v1::BlobChunk chunk;
  chunk.set_blob_size(size);
  if (request->offset() == size) {  // nothing left: one empty chunk still tells the size
    chunk.set_offset(size);
    if (!stall_watchdog_.Write(context, writer, chunk)) return grpc::Status::CANCELLED;
  }
  for (uint64_t pos = request->offset(); pos < size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_bytes, size - pos));
    std::string& data = *chunk.mutable_data();
    data.resize(n);
    if (!hub::PreadAll(fd, data.data(), n, pos)) return corrupt("is shorter than it was");
    if (!verified) hash.Update(data.data(), n);
    chunk.set_offset(pos);
    if (!stall_watchdog_.Write(context, writer, chunk)) return grpc::Status::CANCELLED;
    pos += n;
  }
  if (verified) return grpc::Status::OK;
  if (const std::string digest = hash.HexDigest(); digest != request->etag()) {
    return corrupt(absl::StrCat("does not match its etag (its hash is ", digest, ")"));
  }
  absl::MutexLock lock(&mu_);
  verified_[path] = *blob;
  return grpc::Status::OK;
}

grpc::Status ShardService::ResolveSnapshot(grpc::ServerContext* context,
                                           const df11::v1::ResolveSnapshotRequest* request,
                                           df11::v1::SnapshotListing* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = CheckRepo(request->repo_id()); !s.ok()) return ToGrpcStatus(s);
  const std::string what = absl::StrCat(request->repo_id(), "@", request->revision());
  absl::StatusOr<hub::ModelSource> source = hub::ParseModelSource(what, /*allow_local=*/false);
  if (request->revision().empty() || !source.ok()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("revision: \"", request->revision().substr(0, 200), "\" is not a revision")));
  }
  const hub::RepoCache cache(node_.hub_settings().cache_dir, request->repo_id());
  std::string commit = request->revision();
  if (!hub::IsCommit(commit)) {
    std::ifstream ref(fs::path(cache.folder()) / "refs" / request->revision());
    std::getline(ref, commit);
    commit = std::string(absl::StripAsciiWhitespace(commit));
  }
  const std::string directory = cache.SnapshotDir(commit);
  std::error_code ec;
  if (!hub::IsCommit(commit) || !fs::is_directory(directory, ec)) {
    return ToGrpcStatus(
        absl::NotFoundError(absl::StrCat(what, " is not in this node's hub cache")));
  }
  // Files linked to complete blobs only: what a peer can then read with ReadBlob.
  std::vector<df11::v1::SnapshotFile> files;
  for (fs::recursive_directory_iterator it(directory, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!it->is_symlink(ec)) continue;
    const std::string etag = fs::read_symlink(it->path(), ec).filename().string();
    if (ec || !hub::IsEtag(etag)) continue;
    absl::StatusOr<FileIdentity> blob = ServableBlob(cache.BlobPath(etag));
    if (!blob.ok()) continue;
    df11::v1::SnapshotFile& f = files.emplace_back();
    // Lexically: fs::relative would follow the link to the blob.
    f.set_path(it->path().lexically_relative(directory).generic_string());
    f.set_size(static_cast<uint64_t>(blob->size));
    f.set_etag(etag);
  }
  if (files.empty()) {
    return ToGrpcStatus(absl::NotFoundError(
        absl::StrCat(what, " (commit ", commit, ") has no complete file in this node's cache")));
  }
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.path() < b.path(); });
  response->set_commit(commit);
  for (df11::v1::SnapshotFile& f : files) *response->add_files() = std::move(f);
  return grpc::Status::OK;
}

}  // namespace df11::server
