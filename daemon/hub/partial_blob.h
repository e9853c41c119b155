// A blob arriving in its `{etag}.incomplete` file, from the hub or from a peer: what an earlier,
// interrupted transfer left is hashed first so that the next transfer resumes after it; each
// arriving byte is appended and hashed; Finish() accepts the file only when its length and hash
// match the etag. Either source leaves the same partial file for the other to resume.
//
//   DF11_ASSIGN_OR_RETURN(auto blob, PartialBlob::Open(cache.IncompletePath(etag), etag, size));
//   transfer from blob->size(): DF11_RETURN_IF_ERROR(blob->Append(data, n)); ...
//   DF11_RETURN_IF_ERROR(blob->Flush());   // whatever ended the transfer: keep what arrived
//   DF11_RETURN_IF_ERROR(blob->Finish());  // then rename into blobs/
#ifndef DF11_DAEMON_HUB_PARTIAL_BLOB_H_
#define DF11_DAEMON_HUB_PARTIAL_BLOB_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/hub/blob_writer.h"
#include "daemon/hub/content_hash.h"

namespace df11::hub {

class PartialBlob {
 public:
  // Opens (or creates) `path` and hashes what it holds; a file longer than `size` is emptied.
  // kResourceExhausted when its file system is full, kInternal for other I/O errors.
  static absl::StatusOr<std::unique_ptr<PartialBlob>> Open(const std::string& path,
                                                           const std::string& etag, uint64_t size);

  // Bytes held: where the transfer resumes.
  uint64_t size() const { return held_; }
  uint64_t expected_size() const { return size_; }
  const std::string& path() const { return path_; }

  // kDataLoss when the bytes would go past the expected size (the file is then removed).
  absl::Status Append(const char* data, size_t n);
  // Empties the file (a source that restarted from byte 0).
  absl::Status Restart();
  // Writes every accepted byte, so that a later transfer resumes after them.
  absl::Status Flush();
  // Checks length and hash and makes the file durable. kDataLoss when either does not match (the
  // file is then removed, so nothing of it is kept).
  absl::Status Finish();

 private:
  PartialBlob(std::string path, std::string etag, uint64_t size, std::unique_ptr<BlobWriter> file);

  const std::string path_, etag_;
  const uint64_t size_;
  std::unique_ptr<BlobWriter> file_;
  std::unique_ptr<ContentHash> hash_;
  uint64_t held_ = 0;
};

}  // namespace df11::hub

#endif  // DF11_DAEMON_HUB_PARTIAL_BLOB_H_
