// The hub client and snapshot downloads against the fake hub on 127.0.0.1: the cache layout
// huggingface_hub writes, resume, retries, gated repos, errors, offline mode, one download for
// concurrent loads, and corrupt data never entering the cache.
#include "daemon/hub/hub_client.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "daemon/hub/cache_writer.h"
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
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kRepo[] = "test-org/tiny";

ModelSource Hub(const std::string& repo_id, const std::string& revision = "main") {
  return ModelSource{.is_hub = true, .directory = "", .repo_id = repo_id, .revision = revision};
}

class HubClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = fs::temp_directory_path() /
             ("hub_client_test_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(cache_);
    weights_ = Pattern(3 << 20, 7);
    config_ = R"({"architectures": ["Qwen3ForCausalLM"]})";
    commit_ = hub_.AddCommit(
        kRepo, "main",
        {FakeFile{.path = "config.json", .content = config_, .disk_path = "", .lfs = false},
         FakeFile{.path = "tokenizer.json", .content = "{}", .disk_path = "", .lfs = false},
         FakeFile{.path = "model.safetensors", .content = weights_, .disk_path = "", .lfs = true},
         FakeFile{.path = "original/params.json", .content = "{}", .disk_path = "", .lfs = false}});
  }
  void TearDown() override { fs::remove_all(cache_); }

  HubSettings Settings() const {
    HubSettings s;
    s.endpoint = hub_.endpoint();
    s.cache_dir = cache_.string();
    s.retry_base_seconds = 0.01;
    s.max_retry_seconds = 0.05;
    s.etag_timeout_seconds = 5;
    s.download_timeout_seconds = 5;
    return s;
  }

  absl::StatusOr<Snapshot> Download(const HubSettings& settings, const ModelSource& source,
                                    const std::vector<std::string>& include = {}) {
    SnapshotDownloader d(settings);
    absl::StatusOr<Snapshot> s = d.Resolve(source, include);
    if (!s.ok()) return s.status();
    absl::Status fetched = d.Fetch(*s, s->files, {});
    if (!fetched.ok()) return fetched;
    return s;
  }

  fs::path RepoDir() const { return cache_ / "models--test-org--tiny"; }

  std::vector<FakeHub::Request> Requests(const std::string& server, const std::string& method) {
    std::vector<FakeHub::Request> out;
    for (const FakeHub::Request& r : hub_.requests()) {
      if (r.server == server && r.method == method) out.push_back(r);
    }
    return out;
  }

  FakeHub hub_;
  fs::path cache_;
  std::string weights_, config_, commit_;
};

TEST_F(HubClientTest, DownloadsIntoTheHuggingFaceCacheLayout) {
  absl::StatusOr<Snapshot> s = Download(Settings(), Hub(kRepo), {"*.json", "*.safetensors"});
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->commit, commit_);
  EXPECT_EQ(s->directory, (RepoDir() / "snapshots" / commit_).string());
  EXPECT_EQ(ReadFile(RepoDir() / "refs" / "main"), commit_);  // no newline
  EXPECT_TRUE(absl::StartsWith(ReadFile(cache_ / "CACHEDIR.TAG"),
                               "Signature: 8a477f597d28d172789f06886806bc55"));
  // Snapshot files are relative links to blobs named by etag; the LFS etag is the sha256.
  const fs::path weights = RepoDir() / "snapshots" / commit_ / "model.safetensors";
  ASSERT_TRUE(fs::is_symlink(weights));
  const std::string target = fs::read_symlink(weights).string();
  EXPECT_TRUE(absl::StartsWith(target, "../../blobs/")) << target;
  EXPECT_EQ(fs::path(target).filename().string().size(), 64u);
  EXPECT_TRUE(ReadFile(weights) == weights_);
  EXPECT_EQ(fs::path(fs::read_symlink(RepoDir() / "snapshots" / commit_ / "config.json"))
                .filename()
                .string()
                .size(),
            40u);  // the git blob sha1
  EXPECT_EQ(ReadFile(RepoDir() / "snapshots" / commit_ / "config.json"), config_);
  // A nested file: one more ../ in its link. "*.json" matches across '/' as fnmatch does.
  EXPECT_TRUE(absl::StartsWith(
      fs::read_symlink(RepoDir() / "snapshots" / commit_ / "original" / "params.json").string(),
      "../../../blobs/"));
  // No temporary file is left.
  for (const auto& e : fs::directory_iterator(RepoDir() / "blobs")) {
    EXPECT_THAT(e.path().string(), ::testing::Not(HasSubstr(".incomplete")));
  }
  // The weights came from the CDN, once.
  EXPECT_EQ(hub_.body_bytes_sent(kRepo, "model.safetensors"),
            static_cast<int64_t>(weights_.size()));
  EXPECT_EQ(Requests("cdn", "GET").size(), 1u);
}

TEST_F(HubClientTest, IncludeGlobsSelectFiles) {
  absl::StatusOr<Snapshot> s = Download(Settings(), Hub(kRepo), {"config.json"});
  ASSERT_THAT(s, IsOk());
  ASSERT_EQ(s->files.size(), 1u);
  EXPECT_FALSE(fs::exists(RepoDir() / "snapshots" / commit_ / "model.safetensors"));
  EXPECT_THAT(Download(Settings(), Hub(kRepo), {"*.bin"}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no files matching *.bin")));
}

TEST_F(HubClientTest, SecondDownloadUsesTheCache) {
  ASSERT_THAT(Download(Settings(), Hub(kRepo)), IsOk());
  hub_.ClearRequests();
  ASSERT_THAT(Download(Settings(), Hub(kRepo)), IsOk());
  EXPECT_THAT(Requests("cdn", "GET"), IsEmpty());
  EXPECT_THAT(Requests("hub", "HEAD"), IsEmpty());
}

TEST_F(HubClientTest, ResumesAfterACutConnection) {
  hub_.CutNext(1, 1 << 20);
  ASSERT_THAT(Download(Settings(), Hub(kRepo), {"model.safetensors"}), IsOk());
  EXPECT_TRUE(ReadFile(RepoDir() / "snapshots" / commit_ / "model.safetensors") == weights_);
  const std::vector<FakeHub::Request> gets = Requests("cdn", "GET");
  ASSERT_EQ(gets.size(), 2u);
  EXPECT_EQ(gets[0].range, "");
  EXPECT_EQ(gets[1].range, "bytes=1048576-");
  EXPECT_EQ(hub_.body_bytes_sent(kRepo, "model.safetensors"),
            static_cast<int64_t>(weights_.size()));
}

TEST_F(HubClientTest, ARangeAnsweredWithTheWholeFileRestartsIt) {
  hub_.CutNext(1, 1 << 20);
  hub_.IgnoreRangeNext(1);
  ASSERT_THAT(Download(Settings(), Hub(kRepo), {"model.safetensors"}), IsOk());
  EXPECT_TRUE(ReadFile(RepoDir() / "snapshots" / commit_ / "model.safetensors") == weights_);
}

TEST_F(HubClientTest, ResumesAPartialFileLeftByAnEarlierProcess) {
  // As a download killed mid-file leaves it: blobs/{etag}.incomplete with the first bytes.
  HubClient client(Settings(), nullptr);
  absl::StatusOr<FileMetadata> m = client.FetchMetadata(kRepo, "main", "model.safetensors");
  ASSERT_THAT(m, IsOk());
  RepoCache cache(cache_.string(), kRepo);
  fs::create_directories(fs::path(cache.BlobPath(m->etag)).parent_path());
  std::ofstream(cache.IncompletePath(m->etag), std::ios::binary) << weights_.substr(0, 2 << 20);
  ASSERT_THAT(Download(Settings(), Hub(kRepo), {"model.safetensors"}), IsOk());
  EXPECT_TRUE(ReadFile(cache.BlobPath(m->etag)) == weights_);
  EXPECT_FALSE(fs::exists(cache.IncompletePath(m->etag)));
  EXPECT_EQ(hub_.body_bytes_sent(kRepo, "model.safetensors"),
            static_cast<int64_t>(weights_.size() - (2 << 20)));
}

TEST_F(HubClientTest, RetriesA429ThenSucceeds) {
  hub_.FailNext(2, 429, 0);
  ASSERT_THAT(Download(Settings(), Hub(kRepo), {"config.json"}), IsOk());
  const std::vector<FakeHub::Request> all = hub_.requests();
  ASSERT_GE(all.size(), 3u);
  EXPECT_EQ(all[0].status, 429);
  EXPECT_EQ(all[1].status, 429);
  EXPECT_EQ(all[2].status, 200);
}

TEST_F(HubClientTest, HonoursRetryAfter) {
  hub_.FailNext(1, 503, 1);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_THAT(Download(Settings(), Hub(kRepo), {"config.json"}), IsOk());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(950));
}

TEST_F(HubClientTest, GivesUpAsUnavailableWhenTheHubKeepsFailing) {
  HubSettings settings = Settings();
  settings.max_retries = 2;
  hub_.FailNext(3, 500);
  EXPECT_THAT(Download(settings, Hub(kRepo)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("after 3 attempts")));
}

TEST_F(HubClientTest, UnreachableHubIsUnavailable) {
  HubSettings settings = Settings();
  settings.endpoint = "http://127.0.0.1:1";  // nothing listens there
  settings.max_retries = 1;
  EXPECT_THAT(Download(settings, Hub(kRepo)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not in the hub cache")));
}

TEST_F(HubClientTest, GatedRepoNeedsAnApprovedToken) {
  hub_.SetGated(kRepo, "hf_good");
  HubSettings settings = Settings();
  EXPECT_THAT(Download(settings, Hub(kRepo)),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("gated")));
  settings.token = "hf_other";
  settings.token_source = "HF_TOKEN";
  EXPECT_THAT(Download(settings, Hub(kRepo)),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("gated")));
  settings.token = "hf_good";
  hub_.ClearRequests();
  ASSERT_THAT(Download(settings, Hub(kRepo)), IsOk());
  // The token went to the hub and never to the CDN.
  for (const FakeHub::Request& r : hub_.requests()) {
    const std::string expected = r.server == "hub" ? "Bearer hf_good" : "";
    EXPECT_EQ(r.authorization, expected) << r.server << " " << r.path;
  }
  EXPECT_FALSE(Requests("cdn", "GET").empty());
}

TEST_F(HubClientTest, MissingRepoRevisionAndFileAreNotFound) {
  EXPECT_THAT(Download(Settings(), Hub("test-org/nothing")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("repository not found")));
  EXPECT_THAT(Download(Settings(), Hub(kRepo, "no-such-branch")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no-such-branch")));
  HubClient client(Settings(), nullptr);
  absl::StatusOr<FileMetadata> m = client.FetchMetadata(kRepo, commit_, "missing.json");
  EXPECT_THAT(m, StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing.json")));
  EXPECT_EQ(HubErrorCode(m.status()), "EntryNotFound");
}

TEST_F(HubClientTest, AMissingFileIsRememberedInNoExist) {
  SnapshotDownloader d(Settings());
  absl::StatusOr<Snapshot> s = d.Resolve(Hub(kRepo), {"config.json"});
  ASSERT_THAT(s, IsOk());
  EXPECT_THAT(
      d.Fetch(
          *s,
          {SnapshotFile{.path = "generation_config.json", .size = 0, .cached = false, .etag = ""}},
          {}),
      StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(fs::exists(RepoDir() / ".no_exist" / commit_ / "generation_config.json"));

  // Asked again, the marker answers without the network, as huggingface_hub's does.
  const size_t requests = hub_.requests().size();
  absl::Status again = d.Fetch(
      *s, {SnapshotFile{.path = "generation_config.json", .size = 0, .cached = false, .etag = ""}},
      {});
  EXPECT_THAT(again, StatusIs(absl::StatusCode::kNotFound, HasSubstr(".no_exist")));
  EXPECT_EQ(HubErrorCode(again), "EntryNotFound");
  EXPECT_EQ(hub_.requests().size(), requests);
}

TEST_F(HubClientTest, RevisionsResolveByBranchTagPrAndCommit) {
  const std::string second = hub_.AddCommit(
      kRepo, "dev",
      {FakeFile{.path = "config.json", .content = "{\"v\": 2}", .disk_path = "", .lfs = false}});
  hub_.AddTag(kRepo, "refs/pr/1", second);
  for (const std::string& rev : {std::string("dev"), std::string("refs/pr/1"), second}) {
    absl::StatusOr<Snapshot> s = Download(Settings(), Hub(kRepo, rev));
    ASSERT_THAT(s, IsOk()) << rev;
    EXPECT_EQ(s->commit, second);
    EXPECT_EQ(ReadFile(fs::path(s->directory) / "config.json"), "{\"v\": 2}");
  }
  EXPECT_EQ(ReadFile(RepoDir() / "refs" / "refs" / "pr" / "1"), second);
  EXPECT_FALSE(fs::exists(RepoDir() / "refs" / second));  // a commit gets no ref
}

TEST_F(HubClientTest, FollowsARenamedRepository) {
  hub_.RenameRepo(kRepo, "test-org/renamed");
  HubClient client(Settings(), nullptr);
  absl::StatusOr<FileMetadata> m = client.FetchMetadata(kRepo, "main", "config.json");
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ(m->commit, commit_);
}

TEST_F(HubClientTest, OfflineUsesOnlyTheCache) {
  HubSettings settings = Settings();
  settings.offline = true;
  EXPECT_THAT(Download(settings, Hub(kRepo)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("offline mode")));
  ASSERT_THAT(Download(Settings(), Hub(kRepo), {"config.json", "model.safetensors"}), IsOk());
  hub_.ClearRequests();
  absl::StatusOr<Snapshot> s = Download(settings, Hub(kRepo));
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->commit, commit_);
  EXPECT_EQ(s->files.size(), 2u);
  EXPECT_THAT(hub_.requests(), IsEmpty());
  // A hub that cannot be reached falls back the same way.
  settings.offline = false;
  settings.endpoint = "http://127.0.0.1:1";
  settings.max_retries = 0;
  s = Download(settings, Hub(kRepo));
  ASSERT_THAT(s, IsOk());
  EXPECT_THAT(s->offline_reason, HasSubstr("unreachable"));
}

TEST_F(HubClientTest, ACorruptBlobNeverEntersTheCache) {
  std::string corrupt = weights_;
  corrupt[12345] ^= 1;
  hub_.ServeCorrupt(kRepo, "model.safetensors", corrupt);
  EXPECT_THAT(Download(Settings(), Hub(kRepo), {"model.safetensors"}),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("does not match its etag")));
  EXPECT_FALSE(fs::exists(RepoDir() / "snapshots" / commit_ / "model.safetensors"));
  for (const auto& e : fs::directory_iterator(RepoDir() / "blobs")) {
    ADD_FAILURE() << "left in blobs/: " << e.path();
  }
  // A body longer than announced is refused too.
  hub_.ServeCorrupt(kRepo, "model.safetensors", weights_ + "x");
  EXPECT_THAT(Download(Settings(), Hub(kRepo), {"model.safetensors"}),
              StatusIs(absl::StatusCode::kDataLoss));
}

TEST_F(HubClientTest, ConcurrentDownloadsOfOneModelFetchItOnce) {
  hub_.SetThrottle(20 << 20);  // long enough that the downloads overlap
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&] {
      if (Download(Settings(), Hub(kRepo)).ok()) ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 3);
  EXPECT_EQ(hub_.body_bytes_sent(kRepo, "model.safetensors"),
            static_cast<int64_t>(weights_.size()));
  EXPECT_TRUE(ReadFile(RepoDir() / "snapshots" / commit_ / "model.safetensors") == weights_);
}

TEST_F(HubClientTest, RefusesMoreThanTheDownloadLimit) {
  HubSettings settings = Settings();
  settings.max_download_bytes = 1 << 20;
  EXPECT_THAT(Download(settings, Hub(kRepo)),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("limit of 1048576")));
}

TEST_F(HubClientTest, CancelStopsADownloadAndKeepsThePartialFile) {
  hub_.SetThrottle(1 << 20);  // 3 s for the weights
  SnapshotDownloader d(Settings());
  absl::StatusOr<Snapshot> s = d.Resolve(Hub(kRepo), {"model.safetensors"});
  ASSERT_THAT(s, IsOk());
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    d.Cancel();
  });
  EXPECT_THAT(d.Fetch(*s, s->files, {}), StatusIs(absl::StatusCode::kCancelled));
  canceller.join();
  EXPECT_FALSE(fs::exists(RepoDir() / "snapshots" / commit_ / "model.safetensors"));
  bool partial = false;
  for (const auto& e : fs::directory_iterator(RepoDir() / "blobs")) {
    partial = partial || absl::EndsWith(e.path().string(), ".incomplete");
  }
  EXPECT_TRUE(partial);
}

}  // namespace
}  // namespace df11::hub
