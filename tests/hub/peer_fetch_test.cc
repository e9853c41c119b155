// Fetching hub cache blobs from peers before the hub (daemon/hub/peer_fetch.h), with peers faked
// in-process: the blob streamed whole or resumed, a peer cut off mid-transfer, a corrupt or slow
// peer, the throughput floor, resolving a revision through a peer; and SnapshotDownloader with
// peers in front of the fake hub: zero hub bytes when a peer holds the files, the hub down, and
// the hub resuming after what a failed peer left.
#include "daemon/hub/peer_fetch.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "daemon/hub/cache.h"
#include "daemon/hub/content_hash.h"
#include "daemon/hub/snapshot_download.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hub/fake_hub.h"
#include "tests/testing/files.h"
#include "tests/testing/status_matchers.h"

namespace df11::hub {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::FakeFile;
using ::df11::testing::FakeHub;
using ::df11::testing::IsOk;
using ::df11::testing::Pattern;
using ::df11::testing::ReadFile;
using ::df11::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr char kRepo[] = "test-org/tiny";

std::string Sha256(const std::string& content) {
  ContentHash hash(std::string(64, '0'), content.size());
  hash.Update(content.data(), content.size());
  return hash.HexDigest();
}

// The fetcher's time in these tests: it moves only when the fake peers wait or the fetcher backs
// off, so windows are checked exactly and without waiting for them.
class FakeClock final : public FetchClock {
 public:
  Clock::time_point Now() override { return Clock::time_point(Clock::duration(ticks_.load())); }
  void SleepFor(Clock::duration d) override { Advance(d); }
  void Advance(Clock::duration d) { ticks_ += d.count(); }

 private:
  std::atomic<Clock::rep> ticks_{Clock::duration(std::chrono::hours(1)).count()};
};

// One faked node: the blobs it holds, the snapshots it lists, and how it misbehaves.
struct FakePeer {
  std::map<std::string, std::string> blobs;       // etag -> bytes served
  std::map<std::string, PeerSnapshot> snapshots;  // "repo@revision" -> listing
  bool unreachable = false;
  int64_t cut_after = -1;  // the stream fails (kUnavailable) after this many bytes of a call
  int delay_ms = 0;        // before each chunk
  int busy = 0;            // the next this many reads answer kResourceExhausted (all readers busy)
  bool silent = false;     // reads send nothing, until keep_going says to stop
  int first_delay_ms = 0;  // before a read's first chunk (a peer hashing the bytes before it)
  absl::Status fail_with;  // reads end with this at once
  size_t chunk = 64 << 10;
  std::function<void()> before_chunk;  // called before each chunk is sent
};

class FakePeers final : public PeerSource {
 public:
  explicit FakePeers(PeerFetchOptions options = {}) : PeerSource(options) {}

  std::map<std::string, FakePeer> peers;
  FakeClock clock;  // the fetchers' (PeerFetcher's clock argument)

  std::vector<std::string> Peers() override {
    std::vector<std::string> names;
    for (const auto& [name, peer] : peers) names.push_back(name);
    return names;
  }
  absl::StatusOr<PeerSnapshot> ResolveSnapshot(const std::string& peer, const std::string& repo_id,
                                               const std::string& revision) override {
    const FakePeer& p = peers.at(peer);
    if (p.unreachable) return absl::UnavailableError("connection refused");
    auto it = p.snapshots.find(repo_id + "@" + revision);
    if (it == p.snapshots.end()) return absl::NotFoundError("not in this node's cache");
    return it->second;
  }
  absl::StatusOr<std::optional<uint64_t>> StatBlob(const std::string& peer, const std::string&,
                                                   const std::string& etag) override {
    const FakePeer& p = peers.at(peer);
    if (p.unreachable) return absl::UnavailableError("connection refused");
    auto it = p.blobs.find(etag);
    if (it == p.blobs.end()) return std::nullopt;
    return it->second.size();
  }
  absl::Status ReadBlob(const std::string& peer, const std::string&, const std::string& etag,
                        uint64_t offset,
                        const std::function<absl::Status(uint64_t, const char*, size_t)>& sink,
                        const std::function<bool()>& keep_going) override {
    {
      absl::MutexLock lock(&mu_);
      reads_.push_back(absl::StrCat(peer, " from ", offset));
    }
    FakePeer& p = peers.at(peer);
    if (p.unreachable) return absl::UnavailableError("connection refused");
    if (p.busy > 0) {
      --p.busy;
      return absl::ResourceExhaustedError("4 readers already");
    }
    if (!p.fail_with.ok()) return p.fail_with;
    while (p.silent) {
      clock.Advance(std::chrono::milliseconds(10));
      if (!keep_going()) return absl::CancelledError("stopped");
    }
    const std::string& blob = p.blobs.at(etag);
    for (int waited = 0; waited < p.first_delay_ms; waited += 10) {
      clock.Advance(std::chrono::milliseconds(10));
      if (!keep_going()) return absl::CancelledError("stopped");
    }
    int64_t sent = 0;
    for (uint64_t at = offset; at < blob.size();) {
      clock.Advance(std::chrono::milliseconds(p.delay_ms));
      if (p.before_chunk) p.before_chunk();
      if (!keep_going()) return absl::CancelledError("stopped");
      size_t n = std::min<size_t>(p.chunk, blob.size() - at);
      if (p.cut_after >= 0 && sent + static_cast<int64_t>(n) > p.cut_after) {
        n = static_cast<size_t>(p.cut_after - sent);
        if (n > 0) DF11_RETURN_IF_ERROR(sink(at, blob.data() + at, n));
        return absl::UnavailableError("the peer went away");
      }
      DF11_RETURN_IF_ERROR(sink(at, blob.data() + at, n));
      at += n;
      sent += static_cast<int64_t>(n);
    }
    return absl::OkStatus();
  }

  std::vector<std::string> reads() {
    absl::MutexLock lock(&mu_);
    return reads_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> reads_ ABSL_GUARDED_BY(mu_);
};

class PeerFetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("peer_fetch_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    blob_ = Pattern(1 << 20, 3);
    etag_ = Sha256(blob_);
    partial_ = (dir_ / (etag_ + ".incomplete")).string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string blob_, etag_, partial_;
};

TEST_F(PeerFetchTest, StreamsTheBlobFromThePeerThatHoldsIt) {
  auto peers = std::make_shared<FakePeers>();
  peers->peers["a:1"] = {};
  peers->peers["b:1"].blobs[etag_] = blob_;
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  std::vector<std::string> started;
  uint64_t received = 0;
  absl::StatusOr<std::string> peer =
      fetcher.Fetch(kRepo, etag_, blob_.size(), partial_,
                    {.started = [&](const std::string& p) { started.push_back(p); },
                     .progress = nullptr,
                     .received = [&](uint64_t n) { received += n; }});
  ASSERT_THAT(peer.status(), IsOk());
  EXPECT_EQ(*peer, "b:1");
  EXPECT_EQ(ReadFile(partial_), blob_);
  EXPECT_THAT(started, ElementsAre("b:1"));
  EXPECT_EQ(received, blob_.size());
  EXPECT_THAT(peers->reads(), ElementsAre("b:1 from 0"));
}

TEST_F(PeerFetchTest, NotFoundWhenNoPeerHoldsTheBlob) {
  auto peers = std::make_shared<FakePeers>();
  peers->peers["a:1"] = {};
  peers->peers["b:1"].unreachable = true;
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  EXPECT_THAT(fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {}).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(etag_)));
  EXPECT_TRUE(peers->reads().empty());
}

TEST_F(PeerFetchTest, APeerCutOffLeavesItsBytesForTheNextToResume) {
  auto peers = std::make_shared<FakePeers>();
  peers->peers["a:1"].blobs[etag_] = blob_;
  peers->peers["a:1"].cut_after = 300'000;
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  EXPECT_THAT(fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {}).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("a:1: the peer went away")));
  EXPECT_EQ(ReadFile(partial_), blob_.substr(0, 300'000));

  // Another peer (or the hub) resumes after those bytes.
  peers->peers["b:1"].blobs[etag_] = blob_;
  peers->peers["a:1"].unreachable = true;
  ASSERT_THAT(fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {}).status(), IsOk());
  EXPECT_EQ(ReadFile(partial_), blob_);
  EXPECT_THAT(peers->reads(), ElementsAre("a:1 from 0", "b:1 from 300000"));
}

TEST_F(PeerFetchTest, ACorruptPeerIsDiscardedAndNotAskedForThatBlobAgain) {
  auto peers = std::make_shared<FakePeers>();
  std::string corrupt = blob_;
  corrupt[777'777] ^= 1;
  peers->peers["a:1"].blobs[etag_] = corrupt;
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  EXPECT_THAT(fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {}).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("does not match its etag")));
  EXPECT_FALSE(fs::exists(partial_)) << "nothing of a corrupt transfer is kept";

  peers->peers["b:1"].blobs[etag_] = blob_;
  absl::StatusOr<std::string> peer = fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {});
  ASSERT_THAT(peer.status(), IsOk());
  EXPECT_EQ(*peer, "b:1");
  EXPECT_EQ(ReadFile(partial_), blob_);
  EXPECT_THAT(peers->reads(), ElementsAre("a:1 from 0", "b:1 from 0"));
}

TEST_F(PeerFetchTest, ABadPrefixLeftByAnotherSourceGetsTheGoodPeerASecondTry) {
  std::ofstream(partial_, std::ios::binary) << std::string(1000, 'x');
  auto peers = std::make_shared<FakePeers>();
  peers->peers["a:1"].blobs[etag_] = blob_;
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  ASSERT_THAT(fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {}).status(), IsOk());
  EXPECT_EQ(ReadFile(partial_), blob_);
  EXPECT_THAT(peers->reads(), ElementsAre("a:1 from 1000", "a:1 from 0"));
}

TEST_F(PeerFetchTest, APeerWithAnotherSizeIsNotRead) {
  auto peers = std::make_shared<FakePeers>();
  peers->peers["a:1"].blobs[etag_] = blob_ + "x";
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  EXPECT_THAT(fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {}).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("the listing says")));
  EXPECT_TRUE(peers->reads().empty());
}

TEST_F(PeerFetchTest, ASlowPeerIsLeftWithinTheFloorsWindowAndItsBytesKept) {
  auto peers = std::make_shared<FakePeers>(
      PeerFetchOptions{.min_bytes_per_second = 10 << 20, .window_seconds = 0.2, .ask_at_once = 4});
  peers->peers["a:1"].blobs[etag_] = blob_;
  peers->peers["a:1"].chunk = 4096;
  peers->peers["a:1"].delay_ms = 20;  // about 200 KB/s
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  const Clock::time_point start = peers->clock.Now();
  EXPECT_THAT(fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {}).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("slower than the floor")));
  // Left at the first chunk after the first window from the first byte (at 20 ms) ends.
  EXPECT_GE(peers->clock.Now() - start, std::chrono::milliseconds(220));
  EXPECT_LE(peers->clock.Now() - start, std::chrono::milliseconds(260));
  const std::string kept = ReadFile(partial_);
  EXPECT_GT(kept.size(), 0u);
  EXPECT_LT(kept.size(), blob_.size());
  EXPECT_EQ(kept, blob_.substr(0, kept.size()));
}

TEST_F(PeerFetchTest, ABusyPeerIsAskedAgainWithinAWindow) {
  auto peers = std::make_shared<FakePeers>(
      PeerFetchOptions{.min_bytes_per_second = 0, .window_seconds = 2, .ask_at_once = 4});
  peers->peers["a:1"].blobs[etag_] = blob_;
  peers->peers["a:1"].busy = 2;
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  ASSERT_THAT(fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {}).status(), IsOk());
  EXPECT_EQ(ReadFile(partial_), blob_);
  EXPECT_THAT(peers->reads(), ElementsAre("a:1 from 0", "a:1 from 0", "a:1 from 0"));

  // Busy for longer than the window: the next source's turn.
  fs::remove(partial_);
  peers->peers["a:1"].busy = 1000;
  EXPECT_THAT(fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {}).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("a:1: 4 readers")));
}

TEST_F(PeerFetchTest, TheFloorCountsFromTheFirstByteNotWhileThePeerHashesThePrefix) {
  // 64 MB held already: the peer hashes them before its first byte, and may take the window
  // plus 64 MB / 256 MB/s for it.
  const std::string big = Pattern(65 << 20, 5);
  const std::string big_etag = Sha256(big);
  const std::string big_partial = (dir_ / (big_etag + ".incomplete")).string();
  std::ofstream(big_partial, std::ios::binary) << big.substr(0, 64 << 20);
  auto peers = std::make_shared<FakePeers>(PeerFetchOptions{
      .min_bytes_per_second = 10 << 20, .window_seconds = 0.2, .ask_at_once = 4});
  peers->peers["a:1"].blobs[big_etag] = big;
  peers->peers["a:1"].first_delay_ms = 350;
  peers->peers["a:1"].chunk = 16 << 10;
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  ASSERT_THAT(fetcher.Fetch(kRepo, big_etag, big.size(), big_partial, {}).status(), IsOk());
  EXPECT_TRUE(ReadFile(big_partial) == big);
}

TEST_F(PeerFetchTest, ASilentPeerIsLeftAfterAWindowEvenWithoutAFloor) {
  auto peers = std::make_shared<FakePeers>(
      PeerFetchOptions{.min_bytes_per_second = 0, .window_seconds = 0.2, .ask_at_once = 4});
  peers->peers["a:1"].blobs[etag_] = blob_;
  peers->peers["a:1"].silent = true;
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  EXPECT_THAT(fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {}).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("a:1: sent nothing for")));
}

TEST_F(PeerFetchTest, APeersCancelledIsTheNextSourcesTurnNotTheLoadsEnd) {
  auto peers = std::make_shared<FakePeers>();
  peers->peers["a:1"].blobs[etag_] = blob_;
  peers->peers["a:1"].fail_with = absl::CancelledError("the node is shutting down");
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  EXPECT_THAT(fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {}).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shutting down")));
}

TEST_F(PeerFetchTest, ThisNodesOwnCacheFailingStopsAtOnce) {
  auto peers = std::make_shared<FakePeers>();
  peers->peers["a:1"].blobs[etag_] = blob_;
  peers->peers["b:1"].blobs[etag_] = blob_;
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  const std::string unwritable = (dir_ / "no-such-dir" / (etag_ + ".incomplete")).string();
  absl::StatusOr<std::string> peer = fetcher.Fetch(kRepo, etag_, blob_.size(), unwritable, {});
  EXPECT_TRUE(IsLocalCacheError(peer.status())) << peer.status();
  EXPECT_THAT(peer.status().message(), HasSubstr("hub cache: cannot open"));
  EXPECT_TRUE(peers->reads().empty());
}

TEST_F(PeerFetchTest, StopCancels) {
  auto peers = std::make_shared<FakePeers>();
  peers->peers["a:1"].blobs[etag_] = blob_;
  peers->peers["a:1"].chunk = 4096;
  std::atomic<bool> stop{false};
  int chunks = 0;
  peers->peers["a:1"].before_chunk = [&] {
    if (++chunks == 3) stop = true;  // mid-transfer
  };
  PeerFetcher fetcher(peers, &stop, peers->clock);
  EXPECT_THAT(fetcher.Fetch(kRepo, etag_, blob_.size(), partial_, {}).status(),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(chunks, 3);
}

TEST(ThroughputFloorTest, HoldsUntilAWholeWindowBringsTooFewBytes) {
  const PeerFetchOptions options{
      .min_bytes_per_second = 1000, .window_seconds = 1, .ask_at_once = 1};
  const Clock::time_point t0{};
  ThroughputFloor floor(options, 0, t0);
  EXPECT_TRUE(floor.Holds(0, t0 + std::chrono::milliseconds(999)));  // a window not yet over
  EXPECT_TRUE(floor.Holds(1000, t0 + std::chrono::seconds(1)));      // 1000 B in 1 s
  EXPECT_TRUE(floor.Holds(1500, t0 + std::chrono::milliseconds(1500)));
  EXPECT_FALSE(floor.Holds(1999, t0 + std::chrono::seconds(2)));  // 999 B in the second
  ThroughputFloor off({.min_bytes_per_second = 0, .window_seconds = 1, .ask_at_once = 1}, 0, t0);
  EXPECT_TRUE(off.Holds(0, t0 + std::chrono::hours(1)));
}

RepoFile File(const std::string& path, char etag) {
  return {.path = path, .size = 1, .lfs_sha256 = std::string(64, etag), .git_oid = ""};
}

TEST(PeerResolveTest, ThePeersThatHoldTheRevisionAnswerTogether) {
  // One group of peers asked at once: their answers are merged.
  auto peers = std::make_shared<FakePeers>(
      PeerFetchOptions{.min_bytes_per_second = 0, .window_seconds = 1, .ask_at_once = 8});
  const std::string c(40, 'c'), d(40, 'd');
  peers->peers["a:1"].unreachable = true;
  peers->peers["b:1"] = {};
  // Two peers hold commit c, each some of its files; one holds an older commit d.
  peers->peers["c:1"].snapshots[std::string(kRepo) + "@main"] = {
      .peer = "", .commit = c, .files = {File("config.json", '1'), File("w1.safetensors", '2')}};
  peers->peers["c:2"].snapshots[std::string(kRepo) + "@main"] = {
      .peer = "", .commit = c, .files = {File("config.json", '1'), File("w2.safetensors", '3')}};
  peers->peers["d:1"].snapshots[std::string(kRepo) + "@main"] = {
      .peer = "", .commit = d, .files = {File("config.json", '4')}};
  PeerFetcher fetcher(peers, nullptr, peers->clock);
  absl::StatusOr<PeerSnapshot> s = fetcher.Resolve(kRepo, "main");
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->commit, c);  // most peers hold it
  EXPECT_THAT(s->peer, ::testing::StartsWith("c:"));
  std::vector<std::string> paths;
  for (const RepoFile& f : s->files) paths.push_back(f.path);
  EXPECT_THAT(paths,
              ::testing::UnorderedElementsAre("config.json", "w1.safetensors", "w2.safetensors"));
  // This node's ref names d: a peer that holds d is preferred.
  absl::StatusOr<PeerSnapshot> preferred = fetcher.Resolve(kRepo, "main", d);
  ASSERT_THAT(preferred.status(), IsOk());
  EXPECT_EQ(preferred->commit, d);
  EXPECT_EQ(preferred->peer, "d:1");
  EXPECT_THAT(
      fetcher.Resolve(kRepo, "v2").status(),
      StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("a:1: connection refused"),
                                                  HasSubstr("b:1: not in this node's cache"))));
}

// SnapshotDownloader with peers in front of the fake hub.
class PeersBeforeHubTest : public PeerFetchTest {
 protected:
  void SetUp() override {
    PeerFetchTest::SetUp();
    weights_ = Pattern(3 << 20, 7);
    config_ = R"({"architectures": ["Qwen3ForCausalLM"]})";
    commit_ = hub_.AddCommit(
        kRepo, "main",
        {FakeFile{.path = "config.json", .content = config_, .disk_path = "", .lfs = false},
         FakeFile{.path = "model.safetensors", .content = weights_, .disk_path = "", .lfs = true}});
    peers_ = std::make_shared<FakePeers>();
  }

  HubSettings Settings(const std::string& endpoint) const {
    HubSettings s;
    s.endpoint = endpoint;
    s.cache_dir = (dir_ / "cache").string();
    s.retry_base_seconds = 0.01;
    s.max_retry_seconds = 0.05;
    s.etag_timeout_seconds = 5;
    s.download_timeout_seconds = 5;
    return s;
  }
  // A peer that holds the whole commit.
  FakePeer& PeerWithEverything(const std::string& name) {
    FakePeer& p = peers_->peers[name];
    p.blobs[Sha256(weights_)] = weights_;
    // The git blob sha1 of config.json, as the hub's tree names it.
    ContentHash git(std::string(40, '0'), config_.size());
    git.Update(config_.data(), config_.size());
    const std::string config_oid = git.HexDigest();
    p.blobs[config_oid] = config_;
    p.snapshots[std::string(kRepo) + "@main"] = {.peer = "",
                                                 .commit = commit_,
                                                 .files = {{.path = "config.json",
                                                            .size = config_.size(),
                                                            .lfs_sha256 = "",
                                                            .git_oid = config_oid},
                                                           {.path = "model.safetensors",
                                                            .size = weights_.size(),
                                                            .lfs_sha256 = Sha256(weights_),
                                                            .git_oid = ""}}};
    return p;
  }
  // Resolves and fetches everything; the source each file came from last.
  absl::StatusOr<Snapshot> Download(const std::string& endpoint,
                                    std::map<std::string, std::string>* sources,
                                    std::map<std::string, uint64_t>* received) {
    SnapshotDownloader d(Settings(endpoint), peers_);
    absl::StatusOr<Snapshot> s =
        d.Resolve({.is_hub = true, .directory = "", .repo_id = kRepo, .revision = "main"}, {});
    if (!s.ok()) return s.status();
    std::mutex mu;
    DF11_RETURN_IF_ERROR(d.Fetch(*s, s->files,
                                 {.progress = nullptr,
                                  .file_ready = nullptr,
                                  .source =
                                      [&](const std::string& path, const std::string& source) {
                                        std::lock_guard lock(mu);
                                        (*sources)[path] = source;
                                      },
                                  .received =
                                      [&](const char* kind, uint64_t bytes) {
                                        std::lock_guard lock(mu);
                                        (*received)[kind] += bytes;
                                      }}));
    return s;
  }
  std::string Cached(const std::string& path) const {
    return ReadFile(dir_ / "cache" / "models--test-org--tiny" / "snapshots" / commit_ / path);
  }

  FakeHub hub_;
  std::string weights_, config_, commit_;
  std::shared_ptr<FakePeers> peers_;
};

TEST_F(PeersBeforeHubTest, APeerThatHoldsTheFilesServesThemAndTheHubSendsNoByte) {
  PeerWithEverything("a:1");
  std::map<std::string, std::string> sources;
  std::map<std::string, uint64_t> received;
  absl::StatusOr<Snapshot> s = Download(hub_.endpoint(), &sources, &received);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->commit, commit_);
  EXPECT_EQ(Cached("model.safetensors"), weights_);
  EXPECT_EQ(Cached("config.json"), config_);
  EXPECT_EQ(hub_.body_bytes_sent(kRepo, "model.safetensors"), 0);
  EXPECT_EQ(hub_.body_bytes_sent(kRepo, "config.json"), 0);
  EXPECT_EQ(sources["model.safetensors"], "peer a:1");
  EXPECT_EQ(received["peer"], weights_.size() + config_.size());
  EXPECT_EQ(received.count("hub"), 0u);
}

TEST_F(PeersBeforeHubTest, WithTheHubDownARevisionResolvesThroughAPeer) {
  PeerWithEverything("a:1");
  std::map<std::string, std::string> sources;
  std::map<std::string, uint64_t> received;
  absl::StatusOr<Snapshot> s = Download("http://127.0.0.1:1", &sources, &received);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->resolved_by, "a:1");
  EXPECT_EQ(s->commit, commit_);
  EXPECT_EQ(Cached("model.safetensors"), weights_);
  // The ref is written as a hub resolution writes it, so the cache alone serves it next time.
  EXPECT_EQ(ReadFile(dir_ / "cache" / "models--test-org--tiny" / "refs" / "main"), commit_);
}

TEST_F(PeersBeforeHubTest, WithTheHubDownWhatThisNodeHoldsCompletesWhatPeersList) {
  std::map<std::string, std::string> sources;
  std::map<std::string, uint64_t> received;
  ASSERT_THAT(Download(hub_.endpoint(), &sources, &received).status(), IsOk());  // all cached
  // The only peer holds the commit's config alone (it ran an estimate, say).
  FakePeer& a = PeerWithEverything("a:1");
  PeerSnapshot& listed = a.snapshots[std::string(kRepo) + "@main"];
  listed.files.erase(listed.files.begin() + 1);
  absl::StatusOr<Snapshot> s = Download("http://127.0.0.1:1", &sources, &received);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->resolved_by, "a:1");
  std::vector<std::string> paths;
  for (const SnapshotFile& f : s->files) paths.push_back(f.path);
  EXPECT_THAT(paths, ::testing::UnorderedElementsAre("config.json", "model.safetensors"));
  EXPECT_EQ(Cached("model.safetensors"), weights_);
}

TEST_F(PeersBeforeHubTest, WithTheHubDownAPeersOtherCommitDoesNotReplaceThisNodesRef) {
  std::map<std::string, std::string> sources;
  std::map<std::string, uint64_t> received;
  ASSERT_THAT(Download(hub_.endpoint(), &sources, &received).status(), IsOk());
  // The only peer holds main at another commit (older, or newer).
  FakePeer& a = PeerWithEverything("a:1");
  a.snapshots[std::string(kRepo) + "@main"].commit = std::string(40, 'b');
  absl::StatusOr<Snapshot> s = Download("http://127.0.0.1:1", &sources, &received);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->commit, commit_);
  EXPECT_EQ(s->resolved_by, "");
  EXPECT_FALSE(s->offline_reason.empty());  // the cache's snapshot
  EXPECT_EQ(ReadFile(dir_ / "cache" / "models--test-org--tiny" / "refs" / "main"), commit_);
}

TEST_F(PeersBeforeHubTest, TheHubResumesAfterWhatACutOffPeerLeft) {
  PeerWithEverything("a:1").cut_after = 1'000'000;
  std::map<std::string, std::string> sources;
  std::map<std::string, uint64_t> received;
  ASSERT_THAT(Download(hub_.endpoint(), &sources, &received).status(), IsOk());
  EXPECT_EQ(Cached("model.safetensors"), weights_);
  EXPECT_EQ(sources["model.safetensors"], "hub");
  EXPECT_EQ(hub_.body_bytes_sent(kRepo, "model.safetensors"),
            static_cast<int64_t>(weights_.size()) - 1'000'000);
  EXPECT_EQ(received["hub"], weights_.size() - 1'000'000);
}

TEST_F(PeersBeforeHubTest, ACorruptPeerFallsBackToTheWholeFileFromTheHub) {
  FakePeer& a = PeerWithEverything("a:1");
  a.blobs[Sha256(weights_)][12345] ^= 0x40;
  std::map<std::string, std::string> sources;
  std::map<std::string, uint64_t> received;
  ASSERT_THAT(Download(hub_.endpoint(), &sources, &received).status(), IsOk());
  EXPECT_EQ(Cached("model.safetensors"), weights_);
  EXPECT_EQ(sources["model.safetensors"], "hub");
  EXPECT_EQ(hub_.body_bytes_sent(kRepo, "model.safetensors"),
            static_cast<int64_t>(weights_.size()));
}

TEST_F(PeersBeforeHubTest, UnreachablePeersLeaveItToTheHub) {
  peers_->peers["a:1"].unreachable = true;
  std::map<std::string, std::string> sources;
  std::map<std::string, uint64_t> received;
  ASSERT_THAT(Download(hub_.endpoint(), &sources, &received).status(), IsOk());
  EXPECT_EQ(Cached("model.safetensors"), weights_);
  EXPECT_EQ(received["hub"], weights_.size() + config_.size());
}

}  // namespace
}  // namespace df11::hub
