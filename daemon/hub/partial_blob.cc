#include "daemon/hub/partial_blob.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace df11::hub {

absl::StatusOr<std::unique_ptr<PartialBlob>> PartialBlob::Open(const std::string& path,
                                                               const std::string& etag,
                                                               uint64_t size) {
  absl::StatusOr<std::unique_ptr<BlobWriter>> file = BlobWriter::Open(path);
  if (!file.ok()) return file.status();
  std::unique_ptr<PartialBlob> blob(new PartialBlob(path, etag, size, std::move(*file)));
  if (blob->file_->size() > size) {
    if (absl::Status s = blob->Restart(); !s.ok()) return s;
    return blob;
  }
  std::vector<char> buffer(1 << 20);
  while (blob->held_ < blob->file_->size()) {
    const ssize_t n = ::pread(blob->file_->fd(), buffer.data(),
                              std::min<uint64_t>(buffer.size(), blob->file_->size() - blob->held_),
                              static_cast<off_t>(blob->held_));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::InternalError(absl::StrCat("hub cache: cannot read ", path, ": ",
                                              n < 0 ? std::strerror(errno) : "file shrank"));
    }
    blob->hash_->Update(buffer.data(), static_cast<size_t>(n));
    blob->held_ += static_cast<uint64_t>(n);
  }
  return blob;
}

PartialBlob::PartialBlob(std::string path, std::string etag, uint64_t size,
                         std::unique_ptr<BlobWriter> file)
    : path_(std::move(path)),
      etag_(std::move(etag)),
      size_(size),
      file_(std::move(file)),
      hash_(std::make_unique<ContentHash>(etag_, size_)) {}

absl::Status PartialBlob::Append(const char* data, size_t n) {
  if (held_ + n > size_) {
    std::remove(path_.c_str());
    return absl::DataLossError(
        absl::StrCat("the source sent more than the ", size_, " bytes of the file"));
  }
  if (absl::Status s = file_->Append(data, n); !s.ok()) return s;
  hash_->Update(data, n);
  held_ += n;
  return absl::OkStatus();
}

absl::Status PartialBlob::Restart() {
  hash_ = std::make_unique<ContentHash>(etag_, size_);
  held_ = 0;
  return file_->Truncate();
}

absl::Status PartialBlob::Flush() { return file_->Flush(); }

absl::Status PartialBlob::Finish() {
  if (held_ != size_) {
    std::remove(path_.c_str());
    return absl::DataLossError(absl::StrCat("got ", held_, " bytes of a ", size_, "-byte file"));
  }
  const std::string digest = hash_->HexDigest();
  if (digest != etag_) {
    std::remove(path_.c_str());
    return absl::DataLossError(absl::StrCat("content hash ", digest, " does not match its etag ",
                                            etag_, " (corrupt transfer; nothing was cached)"));
  }
  return file_->Sync();
}

}  // namespace df11::hub
