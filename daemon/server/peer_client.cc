#include "daemon/server/peer_client.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <set>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/server/log.h"
#include "grpcpp/create_channel.h"

namespace df11::server {
namespace {

// HOST and PORT of "HOST:PORT" or "[V6]:PORT"; nullopt when malformed.
std::optional<std::pair<std::string, std::string>> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return std::nullopt;
  std::string host = address.substr(0, colon);
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return std::pair{host, address.substr(colon + 1)};
}

// The numeric form of `addr`, as gRPC takes it ("10.0.0.5:7411", "[fd00::5]:7411").
std::string AddressOf(const sockaddr* addr, const std::string& port) {
  char ip[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, ip, sizeof ip);
    return absl::StrCat("[", ip, "]:", port);
  }
  ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, ip, sizeof ip);
  return absl::StrCat(ip, ":", port);
}

// This node's addresses on `port`, in AddressOf's form.
std::set<std::string> OwnAddresses(int port) {
  std::set<std::string> own;
  const std::string p = std::to_string(port);
  own.insert("127.0.0.1:" + p);
  own.insert("[::1]:" + p);
  struct ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) return own;
  for (const struct ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr != nullptr &&
        (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6)) {
      own.insert(AddressOf(i->ifa_addr, p));
    }
  }
  ::freeifaddrs(interfaces);
  return own;
}

}  // namespace

absl::StatusOr<std::shared_ptr<PeerClient>> PeerClient::Create(PeerClientOptions options) {
  if (options.addresses.empty() && options.dns.empty()) {
    return absl::InvalidArgumentError("peers: neither addresses nor a dns name");
  }
  for (const std::string& address : options.addresses) {
    if (!SplitHostPort(address)) {
      return absl::InvalidArgumentError(absl::StrCat("peers: \"", address, "\" is not HOST:PORT"));
    }
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      client::ChannelCredentialsFor(options.credential);
  if (!credentials.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("peers: ", credentials.status().message()));
  }
  return std::shared_ptr<PeerClient>(new PeerClient(std::move(options), *std::move(credentials)));
}

PeerClient::PeerClient(PeerClientOptions options,
                       std::shared_ptr<grpc::ChannelCredentials> credentials)
    : hub::PeerSource(options.fetch),
      options_(std::move(options)),
      credentials_(std::move(credentials)) {}

std::vector<std::string> PeerClient::Resolve() const {
  std::vector<std::pair<std::string, std::string>> names;
  for (const std::string& address : options_.addresses) names.push_back(*SplitHostPort(address));
  if (!options_.dns.empty()) names.emplace_back(options_.dns, std::to_string(options_.port));
  const std::set<std::string> own = OwnAddresses(own_port_);
  std::vector<std::string> peers;
  for (const auto& [host, port] : names) {
    struct addrinfo hints = {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo* found = nullptr;
    if (const int error = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); error != 0) {
      Log(absl::StrCat("peers: cannot resolve ", host, ": ", ::gai_strerror(error)));
      continue;
    }
    for (const struct addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const std::string address = AddressOf(a->ai_addr, port);
      // Any loopback address (127.0.1.1 of /etc/hosts too) on this node's port is this node.
      const bool loopback =
          a->ai_addr->sa_family == AF_INET &&
          (ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr) >> 24) == 127;
      if (own.contains(address) || (loopback && port == std::to_string(own_port_))) continue;
      if (std::find(peers.begin(), peers.end(), address) == peers.end()) peers.push_back(address);
    }
    ::freeaddrinfo(found);
  }
  return peers;
}

std::vector<std::string> PeerClient::Peers() {
  const auto now = std::chrono::steady_clock::now();
  {
    absl::MutexLock lock(&mu_);
    if (resolved_at_ &&
        now - *resolved_at_ < std::chrono::duration<double>(options_.refresh_seconds)) {
      return peers_;
    }
  }
  // Resolved without the lock: a slow DNS answer holds up no other call.
  std::vector<std::string> peers = Resolve();
  absl::MutexLock lock(&mu_);
  peers_ = std::move(peers);
  resolved_at_ = now;
  // The connections of peers that are gone (pods replaced) go with them.
  for (auto it = stubs_.begin(); it != stubs_.end();) {
    const bool gone = std::find(peers_.begin(), peers_.end(), it->first) == peers_.end();
    it = gone ? stubs_.erase(it) : std::next(it);
  }
  return peers_;
}

std::shared_ptr<df11::v1::ShardService::Stub> PeerClient::Stub(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<df11::v1::ShardService::Stub>& stub = stubs_[peer];
  if (stub == nullptr) {
    stub = df11::v1::ShardService::NewStub(grpc::CreateChannel(peer, credentials_));
  }
  return stub;
}

void PeerClient::Prepare(grpc::ClientContext& context, bool deadline) const {
  if (!options_.credential.token.empty()) {
    context.AddMetadata("authorization", "Bearer " + options_.credential.token);
  }
  if (deadline) {
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::duration<double>(options_.timeout_seconds)));
  }
}

absl::StatusOr<hub::PeerSnapshot> PeerClient::ResolveSnapshot(const std::string& peer,
                                                              const std::string& repo_id,
                                                              const std::string& revision) {
  grpc::ClientContext context;
  Prepare(context, true);
  df11::v1::ResolveSnapshotRequest request;
  request.set_repo_id(repo_id);
  request.set_revision(revision);
  df11::v1::SnapshotListing listing;
  if (absl::Status s =
          client::FromGrpcStatus(Stub(peer)->ResolveSnapshot(&context, request, &listing));
      !s.ok()) {
    return s;
  }
  hub::PeerSnapshot snapshot{.peer = peer, .commit = listing.commit(), .files = {}};
  for (const df11::v1::SnapshotFile& f : listing.files()) {
    hub::RepoFile file{.path = f.path(), .size = f.size(), .lfs_sha256 = "", .git_oid = ""};
    // The etag's length tells its kind: a sha256 names an LFS blob, a sha1 a git-stored one.
    (f.etag().size() == 64 ? file.lfs_sha256 : file.git_oid) = f.etag();
    snapshot.files.push_back(std::move(file));
  }
  return snapshot;
}

absl::StatusOr<std::optional<uint64_t>> PeerClient::StatBlob(const std::string& peer,
                                                             const std::string& repo_id,
                                                             const std::string& etag) {
  grpc::ClientContext context;
  Prepare(context, true);
  df11::v1::StatBlobsRequest request;
  request.set_repo_id(repo_id);
  request.add_etags(etag);
  df11::v1::StatBlobsResponse response;
  if (absl::Status s = client::FromGrpcStatus(Stub(peer)->StatBlobs(&context, request, &response));
      !s.ok()) {
    return s;
  }
  if (response.blobs_size() != 1 || response.blobs(0).etag() != etag) {
    return absl::DataLossError("StatBlobs answered for other blobs than asked");
  }
  if (!response.blobs(0).complete()) return std::nullopt;
  return response.blobs(0).size();
}

absl::Status PeerClient::ReadBlob(
    const std::string& peer, const std::string& repo_id, const std::string& etag, uint64_t offset,
    const std::function<absl::Status(uint64_t offset, const char* data, size_t size)>& sink,
    const std::function<bool()>& keep_going) {
  grpc::ClientContext context;
  Prepare(context, false);
  df11::v1::ReadBlobRequest request;
  request.set_repo_id(repo_id);
  request.set_etag(etag);
  request.set_offset(offset);
  // A watcher cancels the call when keep_going says so, also while no chunk arrives.
  struct Watch {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    bool stopped ABSL_GUARDED_BY(mu) = false;
  } watch;
  std::thread watcher([&] {
    absl::MutexLock lock(&watch.mu);
    while (!watch.mu.AwaitWithTimeout(absl::Condition(&watch.done), absl::Milliseconds(100))) {
      if (!keep_going()) {
        watch.stopped = true;
        context.TryCancel();
        break;
      }
    }
  });
  absl::Status sink_error;
  // A connection of its own: the transfers of one load then run side by side on several
  // connections, not one HTTP/2 connection's single transport thread.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  const std::unique_ptr<df11::v1::ShardService::Stub> stub =
      df11::v1::ShardService::NewStub(grpc::CreateCustomChannel(peer, credentials_, args));
  std::unique_ptr<grpc::ClientReader<df11::v1::BlobChunk>> reader =
      stub->ReadBlob(&context, request);
  df11::v1::BlobChunk chunk;
  while (reader->Read(&chunk)) {
    sink_error = sink(chunk.offset(), chunk.data().data(), chunk.data().size());
    if (!sink_error.ok()) {
      context.TryCancel();
      break;
    }
  }
  const grpc::Status finished = reader->Finish();
  {
    absl::MutexLock lock(&watch.mu);
    watch.done = true;
  }
  watcher.join();
  if (!sink_error.ok()) return sink_error;
  if (absl::MutexLock lock(&watch.mu); watch.stopped) return absl::CancelledError("stopped");
  return client::FromGrpcStatus(finished);
}

}  // namespace df11::server
