// Writing the Hugging Face hub cache exactly as the `huggingface_hub` Python library does, so
// that either can use what the other downloaded (huggingface_hub's cache layout: blobs/, snapshots/, refs/):
//   CACHEDIR.TAG
//   .locks/models--{org}--{name}/{etag}.lock      flock'ed while a blob is written
//   models--{org}--{name}/blobs/{etag}            complete, verified files only (atomic rename)
//   models--{org}--{name}/blobs/{etag}.incomplete a partial download, resumed by the next writer
//   models--{org}--{name}/snapshots/{commit}/{path} -> ../../blobs/{etag} (relative symlinks)
//   models--{org}--{name}/refs/{revision}         the commit, no newline
//   models--{org}--{name}/.no_exist/{commit}/{path}  empty: the file is absent at that commit
// Callers validate repo ids, revisions, paths (IsRepoFilePath) and etags (IsEtag) first.
#ifndef DF11_DAEMON_HUB_CACHE_WRITER_H_
#define DF11_DAEMON_HUB_CACHE_WRITER_H_

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace df11::hub {

class RepoCache {
 public:
  RepoCache(std::string cache_dir, const std::string& repo_id);

  const std::string& cache_dir() const { return cache_dir_; }
  std::string folder() const;  // .../models--org--name
  std::string BlobPath(const std::string& etag) const;
  std::string IncompletePath(const std::string& etag) const;
  std::string LockPath(const std::string& etag) const;
  std::string SnapshotDir(const std::string& commit) const;
  std::string SnapshotPath(const std::string& commit, const std::string& path) const;

  // Writes refs/{revision} (atomically, and only when it changes) unless `revision` is the
  // commit itself. kInternal naming the path on a filesystem error.
  absl::Status WriteRef(const std::string& revision, const std::string& commit) const;
  // CACHEDIR.TAG in the cache directory, once.
  absl::Status EnsureCacheDirTag() const;
  // snapshots/{commit}/{path} as a relative symlink to blobs/{etag}, replacing what is there.
  absl::Status LinkSnapshot(const std::string& commit, const std::string& path,
                            const std::string& etag) const;
  // .no_exist/{commit}/{path}.
  absl::Status MarkMissing(const std::string& commit, const std::string& path) const;
  bool IsMarkedMissing(const std::string& commit, const std::string& path) const;

 private:
  std::string cache_dir_;
  std::string folder_name_;
};

// An exclusive flock on a path (created with mode 0664), as Python's filelock takes it; released
// when destroyed. Acquire waits, polling `cancel` (may be null); kCancelled when it is set,
// kInternal when the file cannot be opened.
class FileLock {
 public:
  static absl::StatusOr<FileLock> Acquire(const std::string& path, const std::atomic<bool>* cancel);
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace df11::hub

#endif  // DF11_DAEMON_HUB_CACHE_WRITER_H_
