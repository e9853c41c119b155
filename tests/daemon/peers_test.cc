// Peer shard distribution between real daemons on 127.0.0.1 with the fake hub: node B loads a
// model node A holds with no weight byte from the hub and the same tokens; the same with the hub
// down (resolved through A); A killed mid-transfer (B resumes from the hub with the partial
// files); A serving a blob changed on disk (B discards it and takes the hub's; A stops serving it);
// peers unreachable or frozen; a node without the peer credential refused (a token, or under
// mutual TLS a client certificate); three nodes loading at once, each weight file from the hub at
// most once.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/df11_client.h"
#include "daemon/server/auth.h"
#include "df11/v1/shard.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/daemon/daemon_process.h"
#include "tests/daemon/demo_hub.h"
#include "tests/hub/fake_hub.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
using testing::DemoHubFiles;
using testing::GreedyTokens;
using ::testing::HasSubstr;

constexpr char kRepo[] = "test-org/fleet";
constexpr char kPeerToken[] = "peer-token-0123456789";
constexpr char kAdminToken[] = "admin-token-0123456789";

// A TCP relay to `target` that forwards everything until `pause_after` bytes have gone from the
// target to its clients, then holds them back until Cut(), which closes every connection: what a
// client sees of a server killed mid-transfer.
class CuttingRelay {
 public:
  CuttingRelay(int target_port, int64_t pause_after)
      : target_port_(target_port), pause_after_(pause_after) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listener_, 16) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "relay: cannot listen";
    }
    port_ = ntohs(addr.sin_port);
    threads_.emplace_back([this] { Accept(); });
  }
  ~CuttingRelay() {
    Cut();
    for (std::thread& t : threads_) t.join();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  // Waits (up to 30 s) until the relay holds bytes back.
  bool WaitPaused() {
    for (int i = 0; i < 3000 && !paused_; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return paused_;
  }
  void Cut() {
    std::lock_guard lock(mu_);
    cut_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    for (int fd : sockets_) ::shutdown(fd, SHUT_RDWR);
  }

 private:
  void Accept() {
    for (;;) {
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      const int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(target_port_));
      std::lock_guard lock(mu_);
      sockets_.push_back(client);
      sockets_.push_back(server);
      if (cut_ || ::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::shutdown(client, SHUT_RDWR);
        continue;
      }
      threads_.emplace_back([this, client, server] { Pump(client, server, false); });
      threads_.emplace_back([this, client, server] { Pump(server, client, true); });
    }
  }
  void Pump(int from, int to, bool counted) {
    char buffer[16384];
    for (;;) {
      const ssize_t n = ::read(from, buffer, sizeof buffer);
      if (n <= 0) break;
      if (counted && (down_ += n) > pause_after_) {
        paused_ = true;
        while (!cut_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        break;
      }
      if (::write(to, buffer, static_cast<size_t>(n)) != n) break;
    }
    ::shutdown(to, SHUT_RDWR);
    ::shutdown(from, SHUT_RDWR);
  }

  const int target_port_;
  const int64_t pause_after_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<int64_t> down_{0};
  std::atomic<bool> paused_{false};
  std::atomic<bool> cut_{false};
  std::mutex mu_;
  std::vector<int> sockets_;
  std::vector<std::thread> threads_;
};

// What one load reported: each file's source, and how it ended.
struct LoadResult {
  absl::Status status;
  v1::ModelState state = v1::MODEL_STATE_UNSPECIFIED;
  std::string failure;
  std::map<std::string, std::string> sources;  // path -> the last source that is not "cache"
};

class PeersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir();
    commit_ = hub_.AddCommit(kRepo, "main", DemoHubFiles());
    std::ofstream(dir_ + "/tokens.yaml")
        << "tokens:\n"
        << "  - {name: fleet, sha256: " << server::Sha256Hex(kPeerToken)
        << ", tenant: cluster, role: peer}\n"
        << "  - {name: ops, sha256: " << server::Sha256Hex(kAdminToken)
        << ", tenant: ops, role: admin}\n";
    std::ofstream(dir_ + "/peer-token") << kPeerToken << "\n";
  }
  void TearDown() override {
    nodes_.clear();
    fs::remove_all(dir_);
  }

  // Starts node `name` on its own hub cache; `peers` is its peers: section's body ("" for none).
  testing::DaemonProcess& StartNode(const std::string& name, const std::string& peers,
                                    const std::string& endpoint = "") {
    const std::string dir = absl::StrCat(dir_, "/", name);
    fs::create_directories(dir);
    auto node = std::make_unique<testing::DaemonProcess>();
    const absl::Status started =
        node->Start(absl::StrCat("hub: {cache_dir: ", dir,
                                 "/hub, endpoint: ", endpoint.empty() ? hub_.endpoint() : endpoint,
                                 "}\n", "auth: {tokens_file: ", dir_, "/tokens.yaml}\n",
                                 peers.empty() ? "" : absl::StrCat("peers: {", peers, "}\n")),
                    dir);
    EXPECT_TRUE(started.ok()) << name << ": " << started;
    nodes_.push_back(std::move(node));
    return *nodes_.back();
  }
  std::string PeersOf(const std::vector<std::string>& addresses, bool with_token = true) const {
    std::string list;
    for (const std::string& a : addresses) absl::StrAppend(&list, list.empty() ? "" : ", ", a);
    return absl::StrCat("addresses: [", list, "], timeout: 1s",
                        with_token ? absl::StrCat(", token_file: ", dir_, "/peer-token") : "");
  }

  static std::unique_ptr<client::Df11Client> Admin(const testing::DaemonProcess& node) {
    client::ConnectOptions options;
    options.token = kAdminToken;
    return *client::Df11Client::Connect(node.address(), options);
  }
  static LoadResult Load(const testing::DaemonProcess& node) {
    v1::LoadModelRequest request;
    request.set_source(kRepo);
    LoadResult result;
    absl::StatusOr<v1::LoadModelProgress> last =
        Admin(node)->LoadModel(request, [&](const v1::LoadModelProgress& p) {
          for (const v1::LoadFileProgress& f : p.files()) {
            if (f.source() != "cache" && !f.source().empty()) result.sources[f.path()] = f.source();
          }
        });
    result.status = last.status();
    if (last.ok()) {
      result.state = last->model().state();
      result.failure = last->model().failure_reason();
    }
    return result;
  }
  static std::vector<int32_t> Tokens(const testing::DaemonProcess& node) {
    absl::StatusOr<std::vector<int32_t>> tokens = GreedyTokens(*Admin(node), kRepo);
    EXPECT_TRUE(tokens.ok()) << tokens.status();
    return tokens.ok() ? *tokens : std::vector<int32_t>{};
  }
  // Node A: the model loaded from the hub, so that its cache holds every file. Chunks of 64 KiB,
  // so that a transfer cut short leaves B partial files.
  testing::DaemonProcess& StartNodeA() {
    testing::DaemonProcess& a = StartNode("a", "chunk_size: 64KiB");
    LoadResult loaded = Load(a);
    EXPECT_TRUE(loaded.status.ok() && loaded.state == v1::MODEL_STATE_READY)
        << loaded.status << " " << loaded.failure;
    expected_ = Tokens(a);
    EXPECT_FALSE(expected_.empty());
    return a;
  }
  // File-body bytes the hub has sent for the weight files.
  int64_t HubWeightBytes() const {
    int64_t total = 0;
    for (const testing::FakeFile& f : DemoHubFiles()) {
      if (f.lfs) total += hub_.body_bytes_sent(kRepo, f.path);
    }
    return total;
  }
  static int64_t WeightBytes() {
    int64_t total = 0;
    for (const testing::FakeFile& f : DemoHubFiles()) {
      if (f.lfs) total += static_cast<int64_t>(fs::file_size(f.disk_path));
    }
    return total;
  }
  // df11_download_bytes_total{source=...} on the node's /metrics (0 when absent).
  static double DownloadedBytes(const testing::DaemonProcess& node, const std::string& source) {
    const std::string metrics = testing::HttpGet(node.http_port(), "/metrics");
    std::smatch m;
    const std::regex line("df11_download_bytes_total\\{source=\"" + source + "\"\\} ([0-9.e+]+)");
    return std::regex_search(metrics, m, line) ? std::stod(m[1]) : 0;
  }

  testing::FakeHub hub_;
  std::string dir_, commit_;
  std::vector<int32_t> expected_;
  std::vector<std::unique_ptr<testing::DaemonProcess>> nodes_;
};

TEST_F(PeersTest, NodeBLoadsWhatNodeAHoldsWithoutAWeightByteFromTheHub) {
  testing::DaemonProcess& a = StartNodeA();
  const int64_t hub_bytes = HubWeightBytes();
  ASSERT_EQ(hub_bytes, WeightBytes());
  testing::DaemonProcess& b = StartNode("b", PeersOf({a.address()}));
  LoadResult loaded = Load(b);
  ASSERT_TRUE(loaded.status.ok()) << loaded.status;
  ASSERT_EQ(loaded.state, v1::MODEL_STATE_READY) << loaded.failure;
  EXPECT_EQ(HubWeightBytes(), hub_bytes) << "no weight byte from the hub";
  EXPECT_EQ(Tokens(b), expected_);
  for (const testing::FakeFile& f : DemoHubFiles()) {
    if (!f.lfs) continue;
    EXPECT_EQ(loaded.sources[f.path], "peer " + a.address()) << f.path;
    // The cache is the hub's layout: the snapshot's link to its blob, with the original bytes.
    const std::string cached =
        absl::StrCat(dir_, "/b/hub/models--test-org--fleet/snapshots/", commit_, "/", f.path);
    EXPECT_TRUE(fs::is_symlink(cached)) << cached;
    EXPECT_TRUE(testing::ReadFile(cached) == testing::ReadFile(f.disk_path)) << f.path;
  }
  EXPECT_GE(DownloadedBytes(b, "peer"), static_cast<double>(WeightBytes()));
  EXPECT_EQ(DownloadedBytes(b, "hub"), 0);
}

TEST_F(PeersTest, WithTheHubDownNodeBResolvesThroughNodeA) {
  testing::DaemonProcess& a = StartNodeA();
  // Nothing listens on port 1: the hub is down for B.
  testing::DaemonProcess& b = StartNode("b", PeersOf({a.address()}), "http://127.0.0.1:1");
  LoadResult loaded = Load(b);
  ASSERT_TRUE(loaded.status.ok()) << loaded.status;
  ASSERT_EQ(loaded.state, v1::MODEL_STATE_READY) << loaded.failure;
  EXPECT_EQ(Tokens(b), expected_);
  EXPECT_EQ(testing::ReadFile(dir_ + "/b/hub/models--test-org--fleet/refs/main"), commit_);
}

TEST_F(PeersTest, NodeAKilledMidTransferLeavesNodeBToResumeFromTheHub) {
  testing::DaemonProcess& a = StartNodeA();
  const int64_t hub_bytes = HubWeightBytes();
  // B reaches A through a relay that holds A's bytes back after 2 MB; A is then killed.
  const int a_port = std::stoi(a.address().substr(a.address().rfind(':') + 1));
  CuttingRelay relay(a_port, 2 << 20);
  testing::DaemonProcess& b = StartNode("b", PeersOf({relay.address()}));
  hub_.ClearRequests();
  LoadResult loaded;
  std::thread load([&] { loaded = Load(b); });
  ASSERT_TRUE(relay.WaitPaused());
  ::kill(a.pid(), SIGKILL);
  relay.Cut();
  load.join();
  ASSERT_TRUE(loaded.status.ok()) << loaded.status;
  ASSERT_EQ(loaded.state, v1::MODEL_STATE_READY) << loaded.failure;
  EXPECT_EQ(Tokens(b), expected_);
  const double from_peer = DownloadedBytes(b, "peer"), from_hub = DownloadedBytes(b, "hub");
  EXPECT_GT(from_peer, 0);
  EXPECT_GT(from_hub, 0);
  // What A sent before dying was kept: the hub sent only the rest, resuming with Range.
  EXPECT_LT(HubWeightBytes() - hub_bytes, WeightBytes());
  bool resumed = false;
  for (const testing::FakeHub::Request& r : hub_.requests()) {
    resumed = resumed || (r.method == "GET" && !r.range.empty() && r.range != "bytes=0-");
  }
  EXPECT_TRUE(resumed);
}

TEST_F(PeersTest, ABlobChangedOnNodeAsDiskIsDiscardedAndTakenFromTheHub) {
  testing::DaemonProcess& a = StartNodeA();
  const int64_t hub_bytes = HubWeightBytes();
  // One shard's blob on A: a byte changed in place, the size kept.
  const std::string shard = absl::StrCat(dir_, "/a/hub/models--test-org--fleet/snapshots/", commit_,
                                         "/model_layers_0.safetensors");
  const std::string blob = fs::canonical(shard).string();
  const std::string etag = fs::path(blob).filename().string();
  {
    std::fstream f(blob, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(blob) / 2));
    f.put('\x5a');
  }
  testing::DaemonProcess& b = StartNode("b", PeersOf({a.address()}));
  LoadResult loaded = Load(b);
  ASSERT_TRUE(loaded.status.ok()) << loaded.status;
  ASSERT_EQ(loaded.state, v1::MODEL_STATE_READY) << loaded.failure;
  EXPECT_EQ(Tokens(b), expected_);
  EXPECT_EQ(loaded.sources["model_layers_0.safetensors"], "hub");
  // The hub sent that shard once more, and nothing else.
  EXPECT_EQ(
      HubWeightBytes() - hub_bytes,
      static_cast<int64_t>(fs::file_size(testing::DemoDir() + "/model_layers_0.safetensors")));
  // A no longer offers it.
  auto stub = v1::ShardService::NewStub(
      grpc::CreateChannel(a.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", kPeerToken));
  v1::StatBlobsRequest request;
  request.set_repo_id(kRepo);
  request.add_etags(etag);
  v1::StatBlobsResponse response;
  ASSERT_TRUE(stub->StatBlobs(&context, request, &response).ok());
  EXPECT_FALSE(response.blobs(0).complete());
}

TEST_F(PeersTest, UnreachableAndFrozenPeersLeaveTheLoadToTheHub) {
  testing::DaemonProcess& a = StartNodeA();
  const int64_t hub_bytes = HubWeightBytes();
  ::kill(a.pid(), SIGSTOP);  // accepts connections, answers nothing
  testing::DaemonProcess& b = StartNode("b", PeersOf({"127.0.0.1:1", a.address()}));
  const auto start = std::chrono::steady_clock::now();
  LoadResult loaded = Load(b);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::kill(a.pid(), SIGCONT);
  ASSERT_TRUE(loaded.status.ok()) << loaded.status;
  ASSERT_EQ(loaded.state, v1::MODEL_STATE_READY) << loaded.failure;
  EXPECT_EQ(HubWeightBytes() - hub_bytes, WeightBytes());
  // Each file waits at most peers.timeout (1 s) on the frozen peer; five shards, eight at once.
  EXPECT_LT(seconds, 30);
}

TEST_F(PeersTest, ANodeWithoutThePeerCredentialIsRefusedAndUsesTheHub) {
  testing::DaemonProcess& a = StartNodeA();
  const int64_t hub_bytes = HubWeightBytes();
  testing::DaemonProcess& b = StartNode("b", PeersOf({a.address()}, /*with_token=*/false));
  LoadResult loaded = Load(b);
  ASSERT_TRUE(loaded.status.ok()) << loaded.status;
  ASSERT_EQ(loaded.state, v1::MODEL_STATE_READY) << loaded.failure;
  EXPECT_EQ(HubWeightBytes() - hub_bytes, WeightBytes());
  EXPECT_EQ(DownloadedBytes(b, "peer"), 0);
  EXPECT_THAT(testing::ReadFile(dir_ + "/a/df11d.log"), HasSubstr("authentication_failure"));
}

TEST_F(PeersTest, ThreeNodesLoadingAtOnceTakeEachWeightFileFromTheHubAtMostOnce) {
  testing::DaemonProcess& a = StartNodeA();
  const int64_t hub_bytes = HubWeightBytes();
  testing::DaemonProcess& b = StartNode("b", PeersOf({a.address()}));
  testing::DaemonProcess& c = StartNode("c", PeersOf({a.address(), b.address()}));
  LoadResult from_b, from_c;
  std::thread load_b([&] { from_b = Load(b); });
  std::thread load_c([&] { from_c = Load(c); });
  load_b.join();
  load_c.join();
  ASSERT_EQ(from_b.state, v1::MODEL_STATE_READY) << from_b.status << from_b.failure;
  ASSERT_EQ(from_c.state, v1::MODEL_STATE_READY) << from_c.status << from_c.failure;
  EXPECT_EQ(HubWeightBytes(), hub_bytes);
  EXPECT_EQ(Tokens(b), expected_);
  EXPECT_EQ(Tokens(c), expected_);
}

TEST_F(PeersTest, UnderMutualTlsNodesPresentTheirCertificates) {
  testing::MakeCa(dir_, "ca");
  testing::MakeCert(dir_, "node-a", "ca", "/CN=node-a", 2, /*server=*/true);
  testing::MakeCert(dir_, "node-b", "ca", "/CN=node-b", 2, /*server=*/false);
  testing::MakeCert(dir_, "ops", "ca", "/CN=ops", 2, /*server=*/false);
  std::ofstream(dir_ + "/tokens.yaml", std::ios::app)
      << "  - {name: node-b, subject: \"CN=node-b\", tenant: cluster, role: peer}\n"
      << "  - {name: ops-cert, subject: \"CN=ops\", tenant: ops, role: admin}\n";
  // Node A serves mutual TLS only; the test calls it as CN=ops.
  const std::string a_dir = dir_ + "/a";
  fs::create_directories(a_dir);
  auto a = std::make_unique<testing::DaemonProcess>();
  grpc::SslCredentialsOptions ops;
  ops.pem_root_certs = testing::ReadFile(dir_ + "/ca.pem");
  ops.pem_cert_chain = testing::ReadFile(dir_ + "/ops.pem");
  ops.pem_private_key = testing::ReadFile(dir_ + "/ops.key");
  a->set_credentials(grpc::SslCredentials(ops));
  ASSERT_TRUE(a->Start(absl::StrCat("hub: {cache_dir: ", a_dir, "/hub, endpoint: ", hub_.endpoint(),
                                    "}\nauth: {tokens_file: ", dir_, "/tokens.yaml}\n",
                                    "tls: {cert_file: ", dir_, "/node-a.pem, key_file: ", dir_,
                                    "/node-a.key, client_ca_file: ", dir_, "/ca.pem}\n"),
                       a_dir)
                  .ok());
  client::ConnectOptions as_ops;
  as_ops.tls_ca_file = dir_ + "/ca.pem";
  as_ops.tls_cert_file = dir_ + "/ops.pem";
  as_ops.tls_key_file = dir_ + "/ops.key";
  std::unique_ptr<client::Df11Client> a_client = *client::Df11Client::Connect(a->address(), as_ops);
  v1::LoadModelRequest request;
  request.set_source(kRepo);
  absl::StatusOr<v1::LoadModelProgress> loaded_a = a_client->LoadModel(request, nullptr);
  ASSERT_TRUE(loaded_a.ok()) << loaded_a.status();
  ASSERT_EQ(loaded_a->model().state(), v1::MODEL_STATE_READY);
  absl::StatusOr<std::vector<int32_t>> expected = GreedyTokens(*a_client, kRepo);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const int64_t hub_bytes = HubWeightBytes();

  // B presents its certificate: every weight file from A. The timeout is long: a busy machine
  // (CI runs tests side by side) must not turn A's TLS answers into a fall back to the hub; C,
  // refused at the handshake, does not wait for it.
  const std::string tls_to_a =
      absl::StrCat("addresses: [", a->address(), "], timeout: 10s, ca_file: ", dir_, "/ca.pem");
  testing::DaemonProcess& b =
      StartNode("b", absl::StrCat(tls_to_a, ", cert_file: ", dir_, "/node-b.pem, key_file: ", dir_,
                                  "/node-b.key"));
  LoadResult from_b = Load(b);
  ASSERT_EQ(from_b.state, v1::MODEL_STATE_READY) << from_b.status << from_b.failure;
  EXPECT_EQ(HubWeightBytes(), hub_bytes);
  EXPECT_EQ(Tokens(b), *expected);

  // C trusts A's CA but has no certificate of its own: A refuses it, the hub serves it.
  testing::DaemonProcess& c = StartNode("c", tls_to_a);
  LoadResult from_c = Load(c);
  ASSERT_EQ(from_c.state, v1::MODEL_STATE_READY) << from_c.status << from_c.failure;
  EXPECT_EQ(HubWeightBytes() - hub_bytes, WeightBytes());
  EXPECT_EQ(DownloadedBytes(c, "peer"), 0);
  EXPECT_EQ(a->Terminate(), 0);
}

}  // namespace
}  // namespace df11
