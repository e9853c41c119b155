// df11.v1.ShardService on a real df11d whose hub cache holds the demo model (downloaded from the
// fake hub): the snapshot listed, blobs stated and read whole or from an offset, bad requests
// refused, partial and corrupt blobs never served, and, with a tokens file, only the roles peer
// and admin let in (and a peer let in nowhere else).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
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
#include "httplib.h"
#include "tests/daemon/daemon_process.h"
#include "tests/daemon/demo_hub.h"
#include "tests/hub/fake_hub.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
using testing::DemoHubFiles;
using ::testing::HasSubstr;
using testing::ReadFile;

constexpr char kRepo[] = "test-org/shared";
constexpr char kPeerToken[] = "peer-token-0123456789";
constexpr char kUserToken[] = "user-token-0123456789";
constexpr char kAdminToken[] = "admin-token-0123456789";

client::ConnectOptions WithTokenOptions(const std::string& token) {
  client::ConnectOptions options;
  options.token = token;
  return options;
}

// What a ReadBlob call streamed, and how it ended.
struct Read {
  std::string bytes;
  bool contiguous = true;
  grpc::Status status;
};

class ShardServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir());
    hub_ = new testing::FakeHub();
    commit_ = new std::string(hub_->AddCommit(kRepo, "main", DemoHubFiles()));
    std::ofstream(*dir_ + "/tokens.yaml")
        << "tokens:\n"
        << "  - {name: node-b, sha256: " << server::Sha256Hex(kPeerToken)
        << ", tenant: cluster, role: peer}\n"
        << "  - {name: ci, sha256: " << server::Sha256Hex(kUserToken)
        << ", tenant: team-a, role: user}\n"
        << "  - {name: ops, sha256: " << server::Sha256Hex(kAdminToken)
        << ", tenant: ops, role: admin}\n";
    daemon_ = new testing::DaemonProcess();
    const absl::Status started = daemon_->Start(
        absl::StrCat("hub: {cache_dir: ", *dir_, "/hub, endpoint: ", hub_->endpoint(), "}\n",
                     "auth: {tokens_file: ", *dir_, "/tokens.yaml}\n",
                     "peers: {chunk_size: 64KiB, max_readers: 2}\n"),
        *dir_);
    ASSERT_TRUE(started.ok()) << started;
    // The model into the cache, then out of memory: the cache keeps its files.
    std::unique_ptr<client::Df11Client> admin =
        *client::Df11Client::Connect(daemon_->address(), WithTokenOptions(kAdminToken));
    v1::LoadModelRequest load;
    load.set_source(kRepo);
    ASSERT_TRUE(admin->LoadModel(load, nullptr).ok());
    v1::UnloadModelRequest unload;
    unload.set_name(kRepo);
    ASSERT_TRUE(admin->UnloadModel(unload).ok());
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->Terminate(), 0);
    delete daemon_;
    delete hub_;
    delete commit_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  static std::unique_ptr<v1::ShardService::Stub> Stub() {
    return v1::ShardService::NewStub(
        grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
  }
  static void WithToken(grpc::ClientContext& context, const std::string& token) {
    context.AddMetadata("authorization", "Bearer " + token);
  }

  static Read ReadBlob(const std::string& etag, uint64_t offset,
                       const std::string& token = kPeerToken) {
    grpc::ClientContext context;
    WithToken(context, token);
    v1::ReadBlobRequest request;
    request.set_repo_id(kRepo);
    request.set_etag(etag);
    request.set_offset(offset);
    std::unique_ptr<grpc::ClientReader<v1::BlobChunk>> reader = Stub()->ReadBlob(&context, request);
    Read read;
    for (v1::BlobChunk chunk; reader->Read(&chunk);) {
      read.contiguous = read.contiguous && chunk.offset() == offset + read.bytes.size();
      read.bytes += chunk.data();
    }
    read.status = reader->Finish();
    return read;
  }

  // The snapshot as the node lists it: path -> (etag, size).
  static std::map<std::string, std::pair<std::string, uint64_t>> Listing() {
    grpc::ClientContext context;
    WithToken(context, kPeerToken);
    v1::ResolveSnapshotRequest request;
    request.set_repo_id(kRepo);
    request.set_revision("main");
    v1::SnapshotListing listing;
    EXPECT_TRUE(Stub()->ResolveSnapshot(&context, request, &listing).ok());
    EXPECT_EQ(listing.commit(), *commit_);
    std::map<std::string, std::pair<std::string, uint64_t>> files;
    for (const v1::SnapshotFile& f : listing.files()) files[f.path()] = {f.etag(), f.size()};
    return files;
  }

  static std::string BlobPath(const std::string& etag) {
    return absl::StrCat(*dir_, "/hub/models--test-org--shared/blobs/", etag);
  }

  static std::string* dir_;
  static std::string* commit_;
  static testing::FakeHub* hub_;
  static testing::DaemonProcess* daemon_;
};
std::string* ShardServiceTest::dir_;
std::string* ShardServiceTest::commit_;
testing::FakeHub* ShardServiceTest::hub_;
testing::DaemonProcess* ShardServiceTest::daemon_;

TEST_F(ShardServiceTest, TheSnapshotIsListedAndEveryBlobReadsAsItsFile) {
  const auto files = Listing();
  // What the load fetched: every file but the README.
  ASSERT_EQ(files.size(), DemoHubFiles().size() - 1);
  for (const testing::FakeFile& f : DemoHubFiles()) {
    if (f.path == "README.md") continue;
    const std::string original = ReadFile(f.disk_path);
    ASSERT_TRUE(files.contains(f.path)) << f.path;
    const auto& [etag, size] = files.at(f.path);
    EXPECT_EQ(size, original.size()) << f.path;
    EXPECT_EQ(etag.size(), f.lfs ? 64u : 40u) << f.path;
    const Read whole = ReadBlob(etag, 0);
    ASSERT_TRUE(whole.status.ok()) << f.path << ": " << whole.status.error_message();
    EXPECT_TRUE(whole.contiguous);
    EXPECT_TRUE(whole.bytes == original) << f.path;
    // Resumed from an offset (a partial download on the other side).
    const Read rest = ReadBlob(etag, original.size() / 3);
    ASSERT_TRUE(rest.status.ok()) << rest.status.error_message();
    EXPECT_TRUE(rest.bytes == original.substr(original.size() / 3)) << f.path;
    const Read none = ReadBlob(etag, original.size());  // all there already: OK, nothing sent
    EXPECT_TRUE(none.status.ok()) << none.status.error_message();
    EXPECT_TRUE(none.bytes.empty());
  }
}

TEST_F(ShardServiceTest, StatBlobsTellsWhatIsHeldComplete) {
  const auto files = Listing();
  const auto& [shard_etag, shard_size] = files.at("model_layers_0.safetensors");
  const std::string unknown(64, 'e');
  const std::string partial(64, 'f');
  std::ofstream(BlobPath(partial) + ".incomplete") << "half";
  grpc::ClientContext context;
  WithToken(context, kPeerToken);
  v1::StatBlobsRequest request;
  request.set_repo_id(kRepo);
  request.add_etags(shard_etag);
  request.add_etags(unknown);
  request.add_etags(partial);
  v1::StatBlobsResponse response;
  ASSERT_TRUE(Stub()->StatBlobs(&context, request, &response).ok());
  ASSERT_EQ(response.blobs_size(), 3);
  EXPECT_TRUE(response.blobs(0).complete());
  EXPECT_EQ(response.blobs(0).size(), shard_size);
  EXPECT_FALSE(response.blobs(1).complete());
  EXPECT_FALSE(response.blobs(2).complete());
  EXPECT_EQ(ReadBlob(partial, 0).status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ReadBlob(unknown, 0).status.error_code(), grpc::StatusCode::NOT_FOUND);
  fs::remove(BlobPath(partial) + ".incomplete");
}

TEST_F(ShardServiceTest, ABlobThatIsALinkIsNeverServed) {
  // Whoever may write the cache must not make the daemon send a peer another file it can read.
  const std::string secret = *dir_ + "/tokens.yaml";
  const std::string symlinked(64, 'a'), hard_linked(64, 'b');
  fs::create_symlink(secret, BlobPath(symlinked));
  fs::create_hard_link(secret, BlobPath(hard_linked));
  for (const std::string& etag : {symlinked, hard_linked}) {
    const Read read = ReadBlob(etag, 0);
    EXPECT_EQ(read.status.error_code(), grpc::StatusCode::NOT_FOUND) << etag;
    EXPECT_TRUE(read.bytes.empty());
  }
  fs::remove(BlobPath(symlinked));
  fs::remove(BlobPath(hard_linked));
}

TEST_F(ShardServiceTest, BadRequestsAreInvalidArguments) {
  const auto listing = Listing();
  const auto& [etag, size] = listing.at("config.json");
  EXPECT_EQ(ReadBlob("not-an-etag", 0).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const Read past = ReadBlob(etag, size + 1);
  EXPECT_EQ(past.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(past.status.error_message(), HasSubstr("is past the"));
  for (const std::string repo : {"../etc", "test-org/shared@main", "", "a/b/c"}) {
    grpc::ClientContext context;
    WithToken(context, kPeerToken);
    v1::StatBlobsRequest request;
    request.set_repo_id(repo);
    v1::StatBlobsResponse response;
    EXPECT_EQ(Stub()->StatBlobs(&context, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT)
        << repo;
  }
  grpc::ClientContext context;
  WithToken(context, kPeerToken);
  v1::ResolveSnapshotRequest request;
  request.set_repo_id(kRepo);
  request.set_revision("no-such-branch");
  v1::SnapshotListing snapshot;
  EXPECT_EQ(Stub()->ResolveSnapshot(&context, request, &snapshot).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ShardServiceTest, ABlobCorruptOnDiskIsRefusedUntilItChanges) {
  const auto listing = Listing();
  const auto& [etag, size] = listing.at("model_layers_1.safetensors");
  const std::string original = ReadFile(BlobPath(etag));
  // Served once: verified, and then served without hashing while the file stays as it is.
  ASSERT_TRUE(ReadBlob(etag, 0).status.ok());
  {
    std::fstream f(BlobPath(etag), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.write("corrupt!", 8);
  }
  const Read corrupt = ReadBlob(etag, 0);
  EXPECT_EQ(corrupt.status.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_THAT(corrupt.status.error_message(), HasSubstr("does not match its etag"));
  // From now on the node does not offer it.
  EXPECT_EQ(ReadBlob(etag, 0).status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_FALSE(Listing().contains("model_layers_1.safetensors"));
  // Replaced by a good copy (a new file), it is served again.
  const std::string fresh = BlobPath(etag) + ".fresh";
  std::ofstream(fresh, std::ios::binary) << original;
  fs::rename(fresh, BlobPath(etag));
  const Read again = ReadBlob(etag, 0);
  EXPECT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_TRUE(again.bytes == original);
}

TEST_F(ShardServiceTest, AtMostMaxReadersStreamsAreServedAtOnce) {
  const auto listing = Listing();
  const auto& [etag, size] = listing.at("model_layers_2.safetensors");
  // Two streams (peers.max_readers) started and left unread: flow control (a 1 KiB window, no
  // BDP probes to widen it) holds them open.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  std::unique_ptr<v1::ShardService::Stub> stub = v1::ShardService::NewStub(
      grpc::CreateCustomChannel(daemon_->address(), grpc::InsecureChannelCredentials(), args));
  v1::ReadBlobRequest request;
  request.set_repo_id(kRepo);
  request.set_etag(etag);
  grpc::ClientContext first, second;
  WithToken(first, kPeerToken);
  WithToken(second, kPeerToken);
  auto a = stub->ReadBlob(&first, request);
  auto b = stub->ReadBlob(&second, request);
  v1::BlobChunk chunk;
  ASSERT_TRUE(a->Read(&chunk));
  ASSERT_TRUE(b->Read(&chunk));
  const Read third = ReadBlob(etag, 0);
  EXPECT_EQ(third.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(third.status.error_message(), HasSubstr("peers.max_readers"));
  first.TryCancel();
  second.TryCancel();
  (void)a->Finish();
  (void)b->Finish();
  // Once the server has let them go, reading works again.
  Read again;
  for (int i = 0; i < 50; ++i) {
    again = ReadBlob(etag, 0);
    if (again.status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_EQ(again.bytes.size(), size);
}

TEST_F(ShardServiceTest, OnlyPeersAndAdminsReadBlobsAndPeersDoNothingElse) {
  const auto listing = Listing();
  const auto& [etag, size] = listing.at("config.json");
  EXPECT_TRUE(ReadBlob(etag, 0, kAdminToken).status.ok());
  const Read user = ReadBlob(etag, 0, kUserToken);
  EXPECT_EQ(user.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(user.status.error_message(), HasSubstr("needs the role peer or admin"));
  EXPECT_EQ(ReadBlob(etag, 0, "wrong-token").status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // A peer token on ModelHost and on the HTTP API.
  std::unique_ptr<client::Df11Client> peer =
      *client::Df11Client::Connect(daemon_->address(), WithTokenOptions(kPeerToken));
  const absl::StatusOr<v1::ListModelsResponse> models = peer->ListModels();
  EXPECT_EQ(models.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(models.status().message(), HasSubstr("has the role peer"));
  httplib::Client http("127.0.0.1", daemon_->http_port());
  const httplib::Result r =
      http.Get("/v1/models", {{"Authorization", std::string("Bearer ") + kPeerToken}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
}

}  // namespace
}  // namespace df11
