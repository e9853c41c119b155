#include "daemon/hub/snapshot_download.h"

#include <fnmatch.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codec/base/first_error.h"
#include "codec/base/read_file.h"
#include "codec/base/status_macros.h"
#include "daemon/hub/cache_writer.h"
#include "daemon/hub/hub_client.h"

namespace df11::hub {
namespace {

namespace fs = std::filesystem;

// Bytes free to this process on the file system that holds `path`, or of its nearest existing
// parent (a cache directory not made yet); nullopt when none can be asked.
std::optional<uint64_t> FreeBytes(const std::string& path) {
  for (fs::path p = path; !p.empty(); p = p.parent_path()) {
    struct statvfs stats;
    if (::statvfs(p.c_str(), &stats) == 0) {
      return static_cast<uint64_t>(stats.f_bavail) * stats.f_frsize;
    }
    if (p == p.parent_path()) break;
  }
  return std::nullopt;
}

bool IsCachedFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);  // follows the snapshot's symlink to its blob
}

// The commit refs/{revision} names in `cache`, or "" when there is none.
std::string RefCommit(const RepoCache& cache, const std::string& revision) {
  const absl::StatusOr<std::string> ref =
      base::ReadFile(fs::path(cache.folder()) / "refs" / revision, base::kMaxTokenFileBytes);
  if (!ref.ok()) return "";
  const std::string commit(absl::StripAsciiWhitespace(*ref));
  return IsCommit(commit) ? commit : "";
}

// The files complete in snapshot `directory` that match `include`.
std::vector<SnapshotFile> CachedFiles(const std::string& directory,
                                      const std::vector<std::string>& include) {
  std::vector<SnapshotFile> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(directory, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!IsCachedFile(it->path().string())) continue;
    // Lexically: fs::relative would follow the link to its blob.
    const std::string path = it->path().lexically_relative(directory).generic_string();
    if (!MatchesAny(path, include)) continue;
    std::error_code size_error;
    files.push_back(
        {.path = path, .size = fs::file_size(it->path(), size_error), .cached = true, .etag = ""});
  }
  return files;
}

// The files of `listing` at `commit` that match `include`, each marked cached or not.
Snapshot FromListing(const std::string& cache_dir, const ModelSource& source,
                     const std::string& commit, const std::vector<RepoFile>& listing,
                     const std::vector<std::string>& include) {
  const RepoCache cache(cache_dir, source.repo_id);
  Snapshot s{.repo_id = source.repo_id,
             .revision = source.revision,
             .commit = commit,
             .directory = cache.SnapshotDir(commit),
             .files = {},
             .offline_reason = "",
             .resolved_by = ""};
  for (const RepoFile& f : listing) {
    if (!MatchesAny(f.path, include)) continue;
    s.files.push_back({.path = f.path,
                       .size = f.size,
                       .cached = IsCachedFile(cache.SnapshotPath(commit, f.path)),
                       .etag = IsEtag(f.etag()) ? f.etag() : ""});
  }
  return s;
}

}  // namespace

uint64_t Snapshot::bytes_to_download() const {
  uint64_t total = 0;
  for (const SnapshotFile& f : files) total += f.cached ? 0 : f.size;
  return total;
}

bool MatchesAny(const std::string& path, const std::vector<std::string>& globs) {
  if (globs.empty()) return true;
  for (std::string glob : globs) {
    if (absl::EndsWith(glob, "/")) glob += "*";
    if (::fnmatch(glob.c_str(), path.c_str(), 0) == 0) return true;
  }
  return false;
}

SnapshotDownloader::SnapshotDownloader(HubSettings settings, std::shared_ptr<PeerSource> peers)
    : settings_(std::move(settings)),
      peers_(peers == nullptr ? nullptr : std::make_unique<PeerFetcher>(std::move(peers), &stop_)) {
}

absl::StatusOr<Snapshot> SnapshotDownloader::ResolveFromCache(
    const ModelSource& source, const std::vector<std::string>& include, const std::string& reason) {
  const RepoCache cache(settings_.cache_dir, source.repo_id);
  Snapshot s{.repo_id = source.repo_id,
             .revision = source.revision,
             .commit = source.revision,
             .directory = "",
             .files = {},
             .offline_reason = reason,
             .resolved_by = ""};
  const std::string what = absl::StrCat(source.repo_id, "@", source.revision);
  if (!IsCommit(source.revision)) {
    s.commit = RefCommit(cache, source.revision);
    if (s.commit.empty()) {
      return absl::UnavailableError(
          absl::StrCat(what, " is not in the hub cache ", settings_.cache_dir, " and ", reason));
    }
  }
  s.directory = cache.SnapshotDir(s.commit);
  s.files = CachedFiles(s.directory, include);
  if (s.files.empty()) {
    return absl::UnavailableError(absl::StrCat(what, " (commit ", s.commit,
                                               ") has no matching files in the hub cache ",
                                               settings_.cache_dir, " and ", reason));
  }
  return s;
}

absl::StatusOr<Snapshot> SnapshotDownloader::Resolve(const ModelSource& source,
                                                     const std::vector<std::string>& include) {
  if (settings_.offline) {
    return ResolveFromCache(source, include, "offline mode is on (HF_HUB_OFFLINE or hub.offline)");
  }
  // As huggingface_hub: with a copy in the cache, an unreachable hub is not retried; the
  // cache answers at once.
  HubSettings first_try = settings_;
  const RepoCache repo_cache(settings_.cache_dir, source.repo_id);
  std::error_code ec;
  const bool cached =
      IsCommit(source.revision)
          ? fs::is_directory(repo_cache.SnapshotDir(source.revision), ec)
          : fs::is_regular_file(fs::path(repo_cache.folder()) / "refs" / source.revision, ec);
  if (cached) {
    first_try.max_retries = 0;
  } else if (peers_ != nullptr) {
    // A peer can answer for an unreachable hub: one retry, not a minute of backoff, before it.
    first_try.max_retries = std::min(first_try.max_retries, 1);
  }
  // The commit and its files, as the hub lists them.
  auto ask_hub = [&](const HubSettings& settings)
      -> std::pair<absl::StatusOr<std::string>, absl::StatusOr<std::vector<RepoFile>>> {
    HubClient client(settings, &stop_);
    absl::StatusOr<std::string> commit =
        IsCommit(source.revision) ? absl::StatusOr<std::string>(source.revision)
                                  : client.ResolveCommit(source.repo_id, source.revision);
    absl::StatusOr<std::vector<RepoFile>> listing =
        commit.ok() ? client.ListFiles(source.repo_id, *commit) : commit.status();
    return {std::move(commit), std::move(listing)};
  };
  auto [commit, listing] = ask_hub(first_try);
  absl::Status peer_refusal;  // why the peers' snapshot could not be taken
  if (absl::IsUnavailable(listing.status())) {
    // As huggingface_hub: an unreachable hub falls back to the cache; "not found" and auth
    // errors do not, so that they are seen. Peers that hold the revision come first: together
    // they may hold files this node's cache lacks.
    if (std::optional<Snapshot> from_peer = ResolveFromPeers(source, include)) {
      peer_refusal = Admit(*from_peer, include);
      if (peer_refusal.ok()) return *std::move(from_peer);
    }
    if (first_try.max_retries < settings_.max_retries && !cached) {
      // No peer holds it: the hub's retries after all (a 429's wait included).
      std::tie(commit, listing) = ask_hub(settings_);
    }
  }
  if (!listing.ok()) {
    if (!absl::IsUnavailable(listing.status())) return listing.status();
    absl::StatusOr<Snapshot> cached =
        ResolveFromCache(source, include, std::string(listing.status().message()));
    if (!cached.ok() && !peer_refusal.ok()) return peer_refusal;
    return cached;
  }
  Snapshot s = FromListing(settings_.cache_dir, source, *commit, *listing, include);
  DF11_RETURN_IF_ERROR(Admit(s, include));
  return s;
}

std::optional<Snapshot> SnapshotDownloader::ResolveFromPeers(
    const ModelSource& source, const std::vector<std::string>& include) {
  if (peers_ == nullptr) return std::nullopt;
  const RepoCache cache(settings_.cache_dir, source.repo_id);
  const std::string local =
      IsCommit(source.revision) ? source.revision : RefCommit(cache, source.revision);
  absl::StatusOr<PeerSnapshot> listing = peers_->Resolve(source.repo_id, source.revision, local);
  // A revision this node has a ref for, and no peer holds that commit: the cache's, as before
  // peers (the hub moves the ref when it is back).
  if (!listing.ok() || (!local.empty() && listing->commit != local)) return std::nullopt;
  Snapshot s = FromListing(settings_.cache_dir, source, listing->commit, listing->files, include);
  s.resolved_by = listing->peer;
  if (listing->commit == local) {
    // What this node holds of the snapshot and no peer listed.
    for (SnapshotFile& f : CachedFiles(s.directory, include)) {
      const bool listed = std::any_of(s.files.begin(), s.files.end(),
                                      [&](const SnapshotFile& l) { return l.path == f.path; });
      if (!listed) s.files.push_back(std::move(f));
    }
  }
  return s;
}

absl::Status SnapshotDownloader::Admit(const Snapshot& s,
                                       const std::vector<std::string>& include) const {
  const RepoCache cache(settings_.cache_dir, s.repo_id);
  const std::string what = absl::StrCat(s.repo_id, "@", s.revision);
  if (s.files.empty()) {
    return absl::NotFoundError(absl::StrCat(what, " (commit ", s.commit, ") has no files matching ",
                                            absl::StrJoin(include, " ")));
  }
  if (s.bytes_to_download() > settings_.max_download_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": ", s.bytes_to_download(), " bytes to download is more than the limit of ",
        settings_.max_download_bytes, " (hub.max_download_size)"));
  }
  // Bytes the cache's file system must take: files not cached, less what an earlier download
  // left (resumed) or a complete blob another revision shares.
  uint64_t bytes_to_write = 0;
  std::set<std::string> counted_blobs;  // a blob that several paths share is written once
  std::error_code ec;
  for (const SnapshotFile& f : s.files) {
    if (f.cached) continue;
    uint64_t held = 0;
    if (IsEtag(f.etag)) {
      if (!counted_blobs.insert(f.etag).second) continue;
      if (IsCachedFile(cache.BlobPath(f.etag))) {
        held = f.size;
      } else if (const uint64_t partial = fs::file_size(cache.IncompletePath(f.etag), ec); !ec) {
        held = std::min(partial, f.size);
      }
    }
    bytes_to_write += f.size - held;
  }
  // Refused before a byte is written (the ref included), rather than failing when the disk fills
  // mid-download.
  if (const std::optional<uint64_t> free_bytes = FreeBytes(settings_.cache_dir);
      free_bytes && bytes_to_write > *free_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": ", bytes_to_write, " bytes to download, but the file system of the hub cache ",
        settings_.cache_dir, " has ", *free_bytes, " bytes free"));
  }
  DF11_RETURN_IF_ERROR(cache.WriteRef(s.revision, s.commit));
  return cache.EnsureCacheDirTag();
}

absl::Status SnapshotDownloader::FetchFile(const Snapshot& snapshot, const SnapshotFile& file,
                                           const FetchCallbacks& callbacks, HubClient& client) {
  const RepoCache cache(settings_.cache_dir, snapshot.repo_id);
  const std::string target = cache.SnapshotPath(snapshot.commit, file.path);
  auto ready = [&](uint64_t size) {
    if (callbacks.progress) callbacks.progress(file.path, size, size);
    if (callbacks.file_ready) callbacks.file_ready(file.path);
    return absl::OkStatus();
  };
  std::error_code ec;
  if (IsCachedFile(target)) return ready(fs::file_size(target, ec));
  if (cache.IsMarkedMissing(snapshot.commit, file.path)) {
    // A commit never changes, so a file found absent at it stays absent: no need to ask again.
    return WithHubErrorCode(
        absl::NotFoundError(absl::StrCat(
            snapshot.repo_id, "@", snapshot.commit, ": ", file.path,
            " does not exist at that commit (remembered in the hub cache's .no_exist)")),
        "EntryNotFound");
  }
  if (!snapshot.offline_reason.empty()) {
    return absl::UnavailableError(absl::StrCat(snapshot.repo_id, "@", snapshot.revision, ": ",
                                               file.path, " is not in the hub cache and ",
                                               snapshot.offline_reason));
  }
  // The hub's metadata, asked when the listing gave no etag or when the hub must send the bytes.
  std::optional<FileMetadata> metadata;
  auto fetch_metadata = [&]() -> absl::Status {
    absl::StatusOr<FileMetadata> answer =
        client.FetchMetadata(snapshot.repo_id, snapshot.commit, file.path);
    if (!answer.ok()) {
      if (HubErrorCode(answer.status()) == "EntryNotFound") {
        // EntryNotFound at a known commit: remembered as huggingface_hub does.
        (void)cache.MarkMissing(snapshot.commit, file.path);
      }
      return answer.status();
    }
    if (!file.etag.empty() && (answer->etag != file.etag || answer->size != file.size)) {
      return absl::DataLossError(absl::StrCat(
          snapshot.repo_id, "@", snapshot.commit, ": ", file.path, " is listed with etag ",
          file.etag, " and ", file.size, " bytes, but the hub serves etag ", answer->etag, " and ",
          answer->size, " bytes"));
    }
    metadata = *std::move(answer);
    return absl::OkStatus();
  };
  if (file.etag.empty()) DF11_RETURN_IF_ERROR(fetch_metadata());
  const std::string etag = file.etag.empty() ? metadata->etag : file.etag;
  const uint64_t size = file.etag.empty() ? metadata->size : file.size;
  if (size > settings_.max_file_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(snapshot.repo_id, "@", snapshot.commit, ": ", file.path, ": ", size,
                     " bytes is more than the limit of ", settings_.max_file_bytes, " per file"));
  }
  const std::string blob = cache.BlobPath(etag);
  if (!IsCachedFile(blob)) {
    // One writer per blob across threads and processes; a second one finds the blob done.
    DF11_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(cache.LockPath(etag), &stop_));
    if (!IsCachedFile(blob)) {
      const std::string partial = cache.IncompletePath(etag);
      fs::create_directories(fs::path(partial).parent_path(), ec);
      if (ec) {
        return absl::InternalError(absl::StrCat("hub cache: cannot create ",
                                                fs::path(partial).parent_path().string(), ": ",
                                                ec.message()));
      }
      absl::StatusOr<std::string> peer = absl::NotFoundError("no peers");
      if (peers_ != nullptr) {
        peer = peers_->Fetch(snapshot.repo_id, etag, size, partial,
                             {.started =
                                  [&](const std::string& address) {
                                    if (callbacks.source)
                                      callbacks.source(file.path, "peer " + address);
                                  },
                              .progress =
                                  [&](uint64_t bytes) {
                                    if (callbacks.progress)
                                      callbacks.progress(file.path, bytes, size);
                                  },
                              .received =
                                  [&](uint64_t bytes) {
                                    if (callbacks.received) callbacks.received("peer", bytes);
                                  }});
        if (stop_) return absl::CancelledError("download cancelled");
        // This node's own cache failing (a full disk) would fail the hub's bytes too.
        if (IsLocalCacheError(peer.status())) return peer.status();
      }
      if (!peer.ok()) {
        // The hub, resuming after what the peers left.
        if (!metadata) DF11_RETURN_IF_ERROR(fetch_metadata());
        absl::Status status =
            DownloadFromHub(snapshot, file, *metadata, partial, callbacks, client);
        if (absl::IsDataLoss(status) && peers_ != nullptr) {
          // A peer's bytes that the hub's did not complete to the etag: the file is gone, so
          // the whole of it from the hub, once.
          status = DownloadFromHub(snapshot, file, *metadata, partial, callbacks, client);
        }
        DF11_RETURN_IF_ERROR(status);
      }
      fs::rename(partial, blob, ec);
      if (ec) {
        return absl::InternalError(
            absl::StrCat("hub cache: cannot rename ", partial, " to ", blob, ": ", ec.message()));
      }
    }
  }
  DF11_RETURN_IF_ERROR(cache.LinkSnapshot(snapshot.commit, file.path, etag));
  return ready(size);
}

absl::Status SnapshotDownloader::DownloadFromHub(const Snapshot& snapshot, const SnapshotFile& file,
                                                 const FileMetadata& metadata,
                                                 const std::string& partial,
                                                 const FetchCallbacks& callbacks,
                                                 HubClient& client) {
  if (callbacks.source) callbacks.source(file.path, "hub");
  std::error_code ec;
  // Bytes already in the partial file are not received again.
  uint64_t held = fs::file_size(partial, ec);
  if (ec) held = 0;
  return client.Download(snapshot.repo_id, file.path, metadata, partial, [&](uint64_t bytes) {
    if (callbacks.progress) callbacks.progress(file.path, bytes, metadata.size);
    // Fewer bytes than before: the file restarted from 0 (the hub ignored Range).
    const uint64_t before = bytes >= held ? held : 0;
    if (bytes > before && callbacks.received) callbacks.received("hub", bytes - before);
    held = bytes;
  });
}

absl::Status SnapshotDownloader::Fetch(const Snapshot& snapshot,
                                       const std::vector<SnapshotFile>& files,
                                       const FetchCallbacks& callbacks) {
  std::atomic<size_t> next = 0;
  base::FirstError errors;
  auto work = [&] {
    HubClient client(settings_, &stop_);
    for (;;) {
      const size_t i = next++;
      if (i >= files.size() || errors.failed()) return;
      if (stop_) {
        errors.Add(absl::CancelledError("download cancelled"));
        return;
      }
      absl::Status status = FetchFile(snapshot, files[i], callbacks, client);
      if (!status.ok()) {
        errors.Add(std::move(status));
        return;
      }
    }
  };
  const size_t workers =
      std::min(files.size(), static_cast<size_t>(std::max(1, settings_.max_connections)));
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  return errors.status();
}

}  // namespace df11::hub
