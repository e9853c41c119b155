#include "daemon/hub/blob_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/hub/file_io.h"

namespace df11::hub {

absl::StatusOr<std::unique_ptr<BlobWriter>> BlobWriter::Open(const std::string& path,
                                                             bool bypass_page_cache) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    const std::string message =
        absl::StrCat("hub cache: cannot open ", path, ": ", std::strerror(errno));
    if (errno == ENOSPC || errno == EDQUOT) return absl::ResourceExhaustedError(message);
    return absl::InternalError(message);
  }
  int direct_fd = -1;
  char* staging = nullptr;
  if (bypass_page_cache) {
    // EINVAL where the file system has no direct I/O: then the page cache it is.
    direct_fd = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (direct_fd >= 0) {
      staging = static_cast<char*>(std::aligned_alloc(kBlockBytes, kStagingBytes));
      if (staging == nullptr) {
        ::close(direct_fd);
        direct_fd = -1;
      }
    }
  }
  std::unique_ptr<BlobWriter> writer(new BlobWriter(path, fd, direct_fd, staging));
  struct stat st;
  if (::fstat(fd, &st) != 0) return writer->Error("stat");
  const auto length = static_cast<uint64_t>(st.st_size);
  if (writer->direct()) {
    // A length off a block boundary (a transfer cut, or huggingface_hub's partial file): its
    // last partial block is staged, to be rewritten whole by the next direct write.
    writer->staged_offset_ = length / kBlockBytes * kBlockBytes;
    writer->staged_ = static_cast<size_t>(length - writer->staged_offset_);
    if (!PreadAll(fd, staging, writer->staged_, writer->staged_offset_)) {
      return writer->Error("read");
    }
  } else {
    writer->staged_offset_ = length;
  }
  return writer;
}

BlobWriter::BlobWriter(std::string path, int fd, int direct_fd, char* staging)
    : path_(std::move(path)), fd_(fd), direct_fd_(direct_fd), staging_(staging) {}

BlobWriter::~BlobWriter() {
  ::close(fd_);
  if (direct_fd_ >= 0) ::close(direct_fd_);
  std::free(staging_);
}

absl::Status BlobWriter::Error(const char* what) const {
  const int error = errno;
  if (error == ENOSPC || error == EDQUOT) {
    // The file keeps the prefix written so far, for a download that resumes once there is room.
    struct statvfs stats;
    const std::string free_bytes =
        ::fstatvfs(fd_, &stats) == 0
            ? absl::StrCat(static_cast<uint64_t>(stats.f_bavail) * stats.f_frsize, " bytes free")
            : "free space unknown";
    struct stat st;
    const uint64_t on_disk = ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    return absl::ResourceExhaustedError(absl::StrCat(
        "hub cache: cannot ", what, " ", path_, ": ", std::strerror(error), " (", size(),
        " bytes of the file received, ", on_disk, " on disk and kept; ", free_bytes, ")"));
  }
  return absl::InternalError(
      absl::StrCat("hub cache: cannot ", what, " ", path_, ": ", std::strerror(error)));
}

absl::Status BlobWriter::Append(const char* data, size_t size) {
  if (!direct()) {
    if (!PwriteAll(fd_, data, size, staged_offset_)) return Error("write");
    staged_offset_ += size;
    return absl::OkStatus();
  }
  while (size > 0) {
    const size_t n = std::min(size, kStagingBytes - staged_);
    std::memcpy(staging_ + staged_, data, n);
    staged_ += n;
    data += n;
    size -= n;
    if (staged_ == kStagingBytes) {
      if (absl::Status s = Flush(); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status BlobWriter::Flush() {
  if (!direct() || staged_ == 0) return absl::OkStatus();
  const size_t whole = staged_ / kBlockBytes * kBlockBytes;
  if (whole > 0 && !PwriteAll(direct_fd_, staging_, whole, staged_offset_)) {
    if (errno != EINVAL) return Error("write");
    // The file system took the O_DIRECT open but refuses the write: the page cache from here on.
    ::close(direct_fd_);
    direct_fd_ = -1;
    if (!PwriteAll(fd_, staging_, staged_, staged_offset_)) return Error("write");
    staged_offset_ += staged_;
    staged_ = 0;
    return absl::OkStatus();
  }
  if (staged_ > whole &&
      !PwriteAll(fd_, staging_ + whole, staged_ - whole, staged_offset_ + whole)) {
    return Error("write");
  }
  std::memmove(staging_, staging_ + whole, staged_ - whole);
  staged_offset_ += whole;
  staged_ -= whole;
  return absl::OkStatus();
}

absl::Status BlobWriter::Sync() {
  if (absl::Status s = Flush(); !s.ok()) return s;
  if (::fsync(fd_) != 0) return Error("sync");
  return absl::OkStatus();
}

absl::Status BlobWriter::Truncate() {
  if (::ftruncate(fd_, 0) != 0) return Error("truncate");
  staged_offset_ = 0;
  staged_ = 0;
  return absl::OkStatus();
}

}  // namespace df11::hub
