#include "daemon/hub/cache_writer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codec/base/random_bits.h"
#include "codec/base/read_file.h"
#include "daemon/hub/cache.h"

namespace df11::hub {
namespace {

namespace fs = std::filesystem;

absl::Status FsError(const std::string& what, const fs::path& path, const std::error_code& ec) {
  const std::string message =
      absl::StrCat("hub cache: cannot ", what, " ", path.string(), ": ", ec.message());
  if (ec == std::errc::no_space_on_device || ec.value() == EDQUOT) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

std::string RandomHex8() { return absl::StrFormat("%08x", base::RandomBits() & 0xffffffff); }

// Writes `content` to `path` through a temporary file in the same directory and a rename.
absl::Status WriteAtomically(const fs::path& path, const std::string& content) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return FsError("create", path.parent_path(), ec);
  const fs::path temp = path.string() + "." + RandomHex8() + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out.flush()) return FsError("write", temp, std::make_error_code(std::errc::io_error));
  }
  fs::rename(temp, path, ec);
  if (ec) {
    fs::remove(temp);
    return FsError("rename to", path, ec);
  }
  return absl::OkStatus();
}

}  // namespace

RepoCache::RepoCache(std::string cache_dir, const std::string& repo_id)
    : cache_dir_(std::move(cache_dir)), folder_name_(RepoFolderName(repo_id)) {}

std::string RepoCache::folder() const { return (fs::path(cache_dir_) / folder_name_).string(); }

std::string RepoCache::BlobPath(const std::string& etag) const {
  return (fs::path(folder()) / "blobs" / etag).string();
}

std::string RepoCache::IncompletePath(const std::string& etag) const {
  return BlobPath(etag) + ".incomplete";
}

std::string RepoCache::LockPath(const std::string& etag) const {
  return (fs::path(cache_dir_) / ".locks" / folder_name_ / (etag + ".lock")).string();
}

std::string RepoCache::SnapshotDir(const std::string& commit) const {
  return (fs::path(folder()) / "snapshots" / commit).string();
}

std::string RepoCache::SnapshotPath(const std::string& commit, const std::string& path) const {
  return (fs::path(SnapshotDir(commit)) / path).string();
}

absl::Status RepoCache::WriteRef(const std::string& revision, const std::string& commit) const {
  if (revision == commit) return absl::OkStatus();
  const fs::path ref = fs::path(folder()) / "refs" / revision;
  const absl::StatusOr<std::string> old = base::ReadFile(ref, base::kMaxTokenFileBytes);
  if (old.ok() && *old == commit) return absl::OkStatus();
  return WriteAtomically(ref, commit);
}

absl::Status RepoCache::EnsureCacheDirTag() const {
  const fs::path tag = fs::path(cache_dir_) / "CACHEDIR.TAG";
  std::error_code ec;
  if (fs::exists(tag, ec)) return absl::OkStatus();
  return WriteAtomically(tag,
                         "Signature: 8a477f597d28d172789f06886806bc55\n"
                         "# This file is a cache directory tag created by huggingface_hub.\n"
                         "# For information about cache directory tags, see:\n"
                         "#\thttps://bford.info/cachedir/\n");
}

absl::Status RepoCache::LinkSnapshot(const std::string& commit, const std::string& path,
                                     const std::string& etag) const {
  const fs::path link = SnapshotPath(commit, path);
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec) return FsError("create", link.parent_path(), ec);
  const fs::path target = fs::relative(BlobPath(etag), link.parent_path(), ec);
  if (ec) return FsError("relate", link, ec);
  // A new link under a temporary name, renamed over the old one: readers never see it missing.
  const fs::path temp = link.string() + "." + RandomHex8() + ".tmp";
  fs::create_symlink(target, temp, ec);
  if (ec) return FsError("link", temp, ec);
  fs::rename(temp, link, ec);
  if (ec) {
    fs::remove(temp);
    return FsError("rename to", link, ec);
  }
  return absl::OkStatus();
}

absl::Status RepoCache::MarkMissing(const std::string& commit, const std::string& path) const {
  const fs::path marker = fs::path(folder()) / ".no_exist" / commit / path;
  std::error_code ec;
  fs::create_directories(marker.parent_path(), ec);
  if (ec) return FsError("create", marker.parent_path(), ec);
  std::ofstream touch(marker, std::ios::app);
  if (!touch) return FsError("create", marker, std::make_error_code(std::errc::io_error));
  return absl::OkStatus();
}

bool RepoCache::IsMarkedMissing(const std::string& commit, const std::string& path) const {
  std::error_code ec;
  return fs::exists(fs::path(folder()) / ".no_exist" / commit / path, ec);
}

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path,
                                           const std::atomic<bool>* cancel) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return FsError("create", fs::path(path).parent_path(), ec);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664);
  if (fd < 0) {
    return FsError("open lock", path, std::error_code(errno, std::generic_category()));
  }
  // Poll rather than block, so a cancelled load stops waiting for another writer.
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const std::error_code error(errno, std::generic_category());
      ::close(fd);
      return FsError("lock", path, error);
    }
    if (cancel != nullptr && cancel->load()) {
      ::close(fd);
      return absl::CancelledError("cancelled while waiting for the lock " + path);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return FileLock(fd);
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace df11::hub
