// The cluster's other nodes as hub::PeerSource over gRPC (df11.v1.ShardService): a static list of
// addresses, or the A/AAAA records of a DNS name (a Kubernetes headless Service) re-resolved every
// `refresh_seconds`; this node itself is left out (an address of one of its interfaces on its own
// port). Each call presents the cluster's peer credential: a bearer token of role `peer`, and under
// mutual TLS a client certificate.
//
//   DF11_ASSIGN_OR_RETURN(auto peers, PeerClient::Create(options));
//   peers->SetOwnPort(bound_port);
//   SnapshotDownloader downloader(settings, peers);
#ifndef DF11_DAEMON_SERVER_PEER_CLIENT_H_
#define DF11_DAEMON_SERVER_PEER_CLIENT_H_

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/df11_client.h"
#include "daemon/hub/peer_fetch.h"
#include "df11/v1/shard.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"

namespace df11::server {

struct PeerClientOptions {
  std::vector<std::string> addresses;  // HOST:PORT; or else
  std::string dns;                     // a name whose A/AAAA records are the peers, on `port`
  int port = 7411;
  double refresh_seconds = 30;  // how often `dns` (and the addresses' names) are resolved again
  // StatBlobs and ResolveSnapshot; the window of fetch.min_bytes_per_second, and how long a
  // ReadBlob may send nothing (after the time the peer needs to hash what precedes the offset).
  double timeout_seconds = 5;
  // The credential presented to peers: a token, and for TLS the CA their certificates chain to
  // and, for mutual TLS, this node's client certificate and key.
  client::ConnectOptions credential;
  hub::PeerFetchOptions fetch;
};

class PeerClient final : public hub::PeerSource {
 public:
  // kInvalidArgument for no addresses and no name, or a TLS file that cannot be read.
  static absl::StatusOr<std::shared_ptr<PeerClient>> Create(PeerClientOptions options);

  // The port this node serves ShardService on, once bound: its own address is skipped.
  void SetOwnPort(int port) { own_port_ = port; }

  std::vector<std::string> Peers() override;
  absl::StatusOr<hub::PeerSnapshot> ResolveSnapshot(const std::string& peer,
                                                    const std::string& repo_id,
                                                    const std::string& revision) override;
  absl::StatusOr<std::optional<uint64_t>> StatBlob(const std::string& peer,
                                                   const std::string& repo_id,
                                                   const std::string& etag) override;
  absl::Status ReadBlob(
      const std::string& peer, const std::string& repo_id, const std::string& etag, uint64_t offset,
      const std::function<absl::Status(uint64_t offset, const char* data, size_t size)>& sink,
      const std::function<bool()>& keep_going) override;

 private:
  PeerClient(PeerClientOptions options, std::shared_ptr<grpc::ChannelCredentials> credentials);
  // The stub of `peer`'s channel (kept while `peer` is one of the peers; a caller's copy outlives
  // its removal).
  std::shared_ptr<df11::v1::ShardService::Stub> Stub(const std::string& peer);
  // `context` with the token and, when `deadline`, the timeout.
  void Prepare(grpc::ClientContext& context, bool deadline) const;
  // Resolves the configured names to IP:PORT addresses, this node's left out.
  std::vector<std::string> Resolve() const;

  const PeerClientOptions options_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::atomic<int> own_port_{0};

  absl::Mutex mu_;
  std::vector<std::string> peers_ ABSL_GUARDED_BY(mu_);
  std::optional<std::chrono::steady_clock::time_point> resolved_at_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<df11::v1::ShardService::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace df11::server

#endif  // DF11_DAEMON_SERVER_PEER_CLIENT_H_
