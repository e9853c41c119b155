#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace df11::hub {

// Appends a download to its `{etag}.incomplete` blob, bypassing the page cache (O_DIRECT) where
// the file system allows it. At loopback or data-centre speed the page cache's per-page work
// (allocation, LRU, buffer heads, writeback) costs more CPU than the sha256 of the same bytes.
// Bytes are staged in a block-aligned buffer and written a megabyte at a time; file systems
// without O_DIRECT get plain writes.
//
// The file always holds a prefix of the blob, which is what resuming (here or by
// huggingface_hub) relies on: Flush() writes every staged byte, and a tail shorter than a block
// goes through the page cache and stays staged, so direct writes keep starting on a block.
class BlobWriter {
 public:
  static constexpr size_t kBlockBytes = 4096;
  static constexpr size_t kStagingBytes = size_t{1} << 20;

  // Opens `path`, creating it or keeping what it holds (size() starts at its length).
  // `bypass_page_cache` false writes through the page cache (tests cover both paths).
  static absl::StatusOr<std::unique_ptr<BlobWriter>> Open(const std::string& path,
                                                          bool bypass_page_cache = true);
  ~BlobWriter();
  BlobWriter(const BlobWriter&) = delete;
  BlobWriter& operator=(const BlobWriter&) = delete;

  // Bytes accepted so far: on disk, or staged and written by the next Flush().
  uint64_t size() const { return staged_offset_ + staged_; }
  // Whether writes currently bypass the page cache.
  bool direct() const { return direct_fd_ >= 0; }
  // The file, for reading what an earlier download left (pread; there is no shared offset).
  int fd() const { return fd_; }

  absl::Status Append(const char* data, size_t size);
  // Writes every accepted byte, so the file's length is size().
  absl::Status Flush();
  // Flush() and fsync: the blob is durable before it is renamed into the cache.
  absl::Status Sync();
  // Empties the file (the server restarted the transfer from byte 0).
  absl::Status Truncate();

 private:
  BlobWriter(std::string path, int fd, int direct_fd, char* staging);
  absl::Status Error(const char* what) const;
  // Writes staging_[begin, end) at staged_offset_ + begin through `fd`.
  bool WriteStaged(int fd, size_t begin, size_t end);

  std::string path_;
  int fd_;
  int direct_fd_;               // -1 when writes go through the page cache
  char* staging_;               // kStagingBytes, block-aligned; null when not direct
  uint64_t staged_offset_ = 0;  // file offset of staging_[0], a multiple of kBlockBytes
  size_t staged_ = 0;
};

}  // namespace df11::hub
