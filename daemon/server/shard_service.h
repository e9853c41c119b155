// df11.v1.ShardService (proto/df11/v1/shard.proto): the complete blobs of the node's hub cache,
// served to the cluster's other nodes, and its snapshots listed, so that a fleet fetches a model
// from the hub once. Only blobs the cache holds whole are served; each is checked against its
// etag as it streams, until it has matched once as that file (device, inode, size, mtime); one
// found corrupt is not served again until its file changes. The reader checks every byte again.
// With auth, callers need the role peer or admin.
//
//   ShardService shards(node);
//   builder.RegisterService(&shards);
#ifndef DF11_DAEMON_SERVER_SHARD_SERVICE_H_
#define DF11_DAEMON_SERVER_SHARD_SERVICE_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/server/node.h"
#include "daemon/server/stall_watchdog.h"
#include "daemon/server/timer.h"
#include "df11/v1/shard.grpc.pb.h"

namespace df11::server {

class ShardService final : public df11::v1::ShardService::Service {
 public:
  explicit ShardService(Node& node);

  grpc::Status StatBlobs(grpc::ServerContext* context, const df11::v1::StatBlobsRequest* request,
                         df11::v1::StatBlobsResponse* response) override;
  grpc::Status ReadBlob(grpc::ServerContext* context, const df11::v1::ReadBlobRequest* request,
                        grpc::ServerWriter<df11::v1::BlobChunk>* writer) override;
  grpc::Status ResolveSnapshot(grpc::ServerContext* context,
                               const df11::v1::ResolveSnapshotRequest* request,
                               df11::v1::SnapshotListing* response) override;

 private:
  // A blob file as it is on disk: a change of any of these is a new file.
  struct FileIdentity {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    int64_t modified_ns = 0;
    bool operator==(const FileIdentity&) const = default;
  };

  // OK for an admin or a peer (or anyone without auth).
  grpc::Status Authorize(const grpc::ServerContext& context) const;
  // The identity of the complete blob at `path`, or NOT_FOUND (absent, partial, or known corrupt
  // in that identity).
  absl::StatusOr<FileIdentity> ServableBlob(const std::string& path) const;
  // The same for the file `st` describes (lstat of the path, or fstat of it opened).
  absl::StatusOr<FileIdentity> ServableBlob(const std::string& path, const struct stat& st) const;

  Node& node_;
  Timer timer_;  // the stall watchdog's
  StallWatchdog stall_watchdog_;
  std::atomic<int64_t> readers_{0};
  mutable absl::Mutex mu_;
  // Blobs that did not match their etag, by path, as they were when found so.
  std::map<std::string, FileIdentity> corrupt_ ABSL_GUARDED_BY(mu_);
  // Blobs that did, as they were then: served without hashing while they stay so.
  std::map<std::string, FileIdentity> verified_ ABSL_GUARDED_BY(mu_);
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_SHARD_SERVICE_H_
