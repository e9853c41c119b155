// The hub cache's file system filling up. The test runs in a mount namespace of its own (the
// daemons it starts inherit it) with the cache on a small tmpfs; where it may not mount one
// (no CAP_SYS_ADMIN), it skips, and blob_writer_test covers the error with /dev/full.
//
// A download that cannot fit is refused before a byte is written; a disk that fills during the
// download fails the load with RESOURCE_EXHAUSTED naming the file and the sizes, keeps the
// partial blobs (each a prefix of its file) for the next try, leaves nothing corrupt in the cache,
// and the next load, once there is room, resumes them. Another model serves throughout.
//
// Also: model files the CPU backend maps, modified in place after the load.
#include <sched.h>
#include <sys/mount.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/df11_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/daemon_process.h"
#include "tests/daemon/demo_hub.h"
#include "tests/hub/fake_hub.h"
#include "tests/testing/status_matchers.h"

namespace df11 {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::StatusIs;
using testing::DemoDir;
using testing::DemoHubFiles;
using testing::GreedyTokens;
using ::testing::HasSubstr;
using testing::HealthStatus;
using testing::ReadFile;

// Mounts a tmpfs of `bytes` at `dir` (created), in a private mount namespace of this thread (and
// the processes it starts); "" when done, else why not.
std::string MountTmpfs(const std::string& dir, uint64_t bytes) {
  static const std::string unshared = [] {
    if (::unshare(CLONE_NEWNS) != 0) return absl::StrCat("unshare: ", std::strerror(errno));
    // Nothing mounted here propagates to the parent namespace.
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return absl::StrCat("mount --make-rprivate /: ", std::strerror(errno));
    }
    return std::string();
  }();
  if (!unshared.empty()) return unshared;
  fs::create_directories(dir);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, absl::StrCat("size=", bytes).c_str()) != 0) {
    return absl::StrCat("mount tmpfs: ", std::strerror(errno));
  }
  return "";
}

// The cache's blobs: name -> content, complete ones and `.incomplete` ones apart.
struct Blobs {
  std::map<std::string, std::string> complete, partial;
};
Blobs ReadBlobs(const std::string& cache) {
  Blobs blobs;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(cache, ec)) {
    if (!e.is_regular_file() || e.path().parent_path().filename() != "blobs") continue;
    auto& into = e.path().extension() == ".incomplete" ? blobs.partial : blobs.complete;
    into[e.path().filename().string()] = ReadFile(e.path());
  }
  return blobs;
}

// The largest safetensors file of a model directory.
std::string LargestSafetensors(const std::string& dir) {
  fs::path largest;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors" &&
        (largest.empty() || e.file_size() > fs::file_size(largest))) {
      largest = e.path();
    }
  }
  return largest.string();
}

// Fills the file system of `dir` with one file until it refuses more; the file.
std::string FillUp(const std::string& dir) {
  const std::string path = dir + "/filler";
  std::ofstream out(path, std::ios::binary);
  const std::string chunk(64 << 10, 'x');
  while (out.write(chunk.data(), chunk.size())) {
  }
  return path;
}

class DiskFaultsTest : public ::testing::Test {
 protected:
  // A daemon serving demo, with its hub cache on a tmpfs of `bytes`.
  void StartDaemon(uint64_t bytes) {
    cache_ = dir_ + "/hub";
    if (const std::string why = MountTmpfs(cache_, bytes); !why.empty()) {
      GTEST_SKIP() << "cannot mount a tmpfs here: " << why;
    }
    mounted_ = true;
    const absl::Status started = daemon_.Start(
        absl::StrCat("preload: [{source: ", DemoDir(), ", name: demo, pin: true}]\n",
                     "hub: {cache_dir: ", cache_, ", endpoint: ", hub_.endpoint(), "}\n"),
        dir_);
    ASSERT_TRUE(started.ok()) << started;
    client_ = *client::Df11Client::Connect(daemon_.address());
    absl::StatusOr<std::vector<int32_t>> expected = GreedyTokens(*client_, "demo");
    ASSERT_TRUE(expected.ok()) << expected.status();
    expected_ = *expected;
  }
  void TearDown() override {
    if (client_ != nullptr) {
      EXPECT_EQ(daemon_.Terminate(), 0);
    }
    if (mounted_) ::umount2(cache_.c_str(), MNT_DETACH);
    fs::remove_all(dir_);
  }

  absl::Status Load(const std::string& repo) {
    v1::LoadModelRequest load;
    load.set_source(repo);
    return client_->LoadModel(load, nullptr, {.timeout = absl::Seconds(300)}).status();
  }

  const std::string dir_ = testing::MakeTempDir();
  std::string cache_;
  bool mounted_ = false;
  testing::FakeHub hub_;
  testing::DaemonProcess daemon_;
  std::unique_ptr<client::Df11Client> client_;
  std::vector<int32_t> expected_;
};

TEST_F(DiskFaultsTest, ADownloadThatCannotFitIsRefusedBeforeAByteIsWritten) {
  // The demo model's weights are 6.3 MB.
  StartDaemon(4 << 20);
  if (IsSkipped()) return;
  hub_.AddCommit("test-org/too-big", "main", DemoHubFiles());
  const absl::Status loaded = Load("test-org/too-big");
  EXPECT_THAT(loaded, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(loaded.message(),
              HasSubstr(absl::StrCat("bytes to download, but the file system of the hub cache ",
                                     cache_, " has ")));
  // No weights were fetched (the shards come from the CDN).
  for (const testing::FakeHub::Request& r : hub_.requests()) {
    EXPECT_FALSE(r.server == "cdn" && r.method == "GET") << r.path;
  }
  EXPECT_THAT(ReadBlobs(cache_).partial, ::testing::IsEmpty());
  EXPECT_FALSE(fs::exists(cache_ + "/models--test-org--too-big/refs/main"));
  EXPECT_EQ(GreedyTokens(*client_, "demo").value_or(std::vector<int32_t>{}), expected_);
}

TEST_F(DiskFaultsTest, ADiskThatFillsMidDownloadKeepsThePartsAndTheNextLoadResumes) {
  StartDaemon(16 << 20);
  if (IsSkipped()) return;
  hub_.AddCommit("test-org/filled", "main", DemoHubFiles());
  std::map<std::string, std::string> originals;  // every file of the model, by name
  for (const testing::FakeFile& f : DemoHubFiles()) originals[f.path] = ReadFile(f.disk_path);

  testing::GreedyTraffic traffic(daemon_.address(), "demo", expected_);
  hub_.SetThrottle(1 << 20);  // about 7 s for the model
  absl::Status loaded;
  std::thread load([&] { loaded = Load("test-org/filled"); });
  // Once part of a shard is on disk, something else takes all the room that is left.
  for (int i = 0; i < 200; ++i) {
    const Blobs blobs = ReadBlobs(cache_);
    if (!blobs.partial.empty() && blobs.partial.begin()->second.size() >= (256 << 10)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string filler = FillUp(cache_);
  load.join();
  EXPECT_THAT(loaded, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(loaded.message(), HasSubstr(".incomplete: No space left on device"));
  EXPECT_THAT(loaded.message(), HasSubstr("on disk and kept"));
  EXPECT_THAT(loaded.message(), HasSubstr("bytes free"));

  // Nothing corrupt: each complete blob is one of the files, each partial one a prefix of one.
  const Blobs after = ReadBlobs(cache_);
  EXPECT_FALSE(after.partial.empty());
  auto is_prefix_of_a_file = [&](const std::string& content, bool whole) {
    for (const auto& [name, original] : originals) {
      if (whole ? content == original : original.compare(0, content.size(), content) == 0) {
        return true;
      }
    }
    return false;
  };
  for (const auto& [name, content] : after.complete) {
    EXPECT_TRUE(is_prefix_of_a_file(content, /*whole=*/true)) << name;
  }
  for (const auto& [name, content] : after.partial) {
    EXPECT_TRUE(is_prefix_of_a_file(content, /*whole=*/false)) << name;
  }

  // Room again: the next load resumes the partial blobs instead of starting over.
  fs::remove(filler);
  hub_.SetThrottle(0);
  hub_.ClearRequests();
  const absl::Status again = Load("test-org/filled");
  ASSERT_TRUE(again.ok()) << again;
  int resumed = 0;
  for (const testing::FakeHub::Request& r : hub_.requests()) {
    if (r.server == "cdn" && r.range.rfind("bytes=", 0) == 0 && r.range != "bytes=0-") ++resumed;
  }
  EXPECT_GE(resumed, 1);
  EXPECT_EQ(GreedyTokens(*client_, "test-org/filled").value_or(std::vector<int32_t>{}), expected_);
  EXPECT_THAT(ReadBlobs(cache_).partial, ::testing::IsEmpty());
  traffic.Stop();
  EXPECT_GT(traffic.ok(), 0);
  EXPECT_THAT(traffic.failures(), ::testing::IsEmpty());
}

// The files of a model the CPU backend maps, modified in place after the load (a `cp` over them,
// an editor): the next request finds it, the model becomes FAILED naming the file, and nothing
// reads the changed bytes. A catalog model is loaded again from the files as they are now; another
// model is loaded again by hand. Demo serves throughout.
TEST(ModelFilesTest, AFileModifiedInPlaceFailsItsModelBeforeAnyRequestReadsIt) {
  const std::string dir = testing::MakeTempDir();
  const std::string catalog_model =
      testing::MakeTestModel(dir, "catalog", "qwen3", /*df11=*/false, 21, DemoDir());
  const std::string loaded_model =
      testing::MakeTestModel(dir, "loaded", "qwen2", /*df11=*/true, 22, DemoDir());
  testing::DaemonProcess daemon;
  ASSERT_TRUE(
      daemon
          .Start(absl::StrCat("preload: [{source: ", DemoDir(), ", name: demo, pin: true}]\n",
                              "catalog: [{source: ", catalog_model, ", name: catalog}]\n"),
                 dir)
          .ok());
  std::unique_ptr<client::Df11Client> c = *client::Df11Client::Connect(daemon.address());
  v1::LoadModelRequest load;
  load.set_source(loaded_model);
  load.set_name("loaded");
  ASSERT_TRUE(c->LoadModel(load, nullptr).ok());
  const absl::StatusOr<std::vector<int32_t>> demo = GreedyTokens(*c, "demo");
  const absl::StatusOr<std::vector<int32_t>> catalog = GreedyTokens(*c, "catalog");
  const absl::StatusOr<std::vector<int32_t>> loaded = GreedyTokens(*c, "loaded");
  ASSERT_TRUE(demo.ok() && catalog.ok() && loaded.ok());

  // Bytes in the middle of the DF11 model's file overwritten, the size unchanged.
  const std::string df11_file = LargestSafetensors(loaded_model);
  const std::string original = ReadFile(df11_file);
  {
    std::fstream f(df11_file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(original.size() / 2));
    f.write("\x3f\x3f\x3f\x3f\x3f\x3f\x3f\x3f", 8);
  }
  const absl::StatusOr<std::vector<int32_t>> changed = GreedyTokens(*c, "loaded");
  EXPECT_THAT(changed.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(changed.status().message(),
              HasSubstr(absl::StrCat(df11_file, " was modified in place after it was mapped")));
  absl::StatusOr<v1::ModelInfo> info = c->GetModel("loaded");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->state(), v1::MODEL_STATE_FAILED);
  EXPECT_THAT(info->failure_reason(), HasSubstr("modified in place"));
  EXPECT_EQ(GreedyTokens(*c, "demo").value_or(std::vector<int32_t>{}), *demo);
  // Loaded again, it serves the file as it is now (the same bytes again: the same tokens).
  { std::ofstream(df11_file, std::ios::binary | std::ios::trunc) << original; }
  ASSERT_TRUE(c->LoadModel(load, nullptr).ok());
  EXPECT_EQ(GreedyTokens(*c, "loaded").value_or(std::vector<int32_t>{}), *loaded);

  // The catalog model's file truncated in place, then written back whole (a `cp` over it): the
  // first request fails the model, the next one loads it again.
  const std::string bf16_file = LargestSafetensors(catalog_model);
  const std::string catalog_bytes = ReadFile(bf16_file);
  fs::resize_file(bf16_file, catalog_bytes.size() / 2);
  const absl::StatusOr<std::vector<int32_t>> truncated = GreedyTokens(*c, "catalog");
  // Failed, then loaded again on demand from the half file, which is refused as corrupt.
  EXPECT_THAT(truncated.status(), StatusIs(absl::StatusCode::kDataLoss));
  { std::ofstream(bf16_file, std::ios::binary | std::ios::trunc) << catalog_bytes; }
  EXPECT_EQ(GreedyTokens(*c, "catalog").value_or(std::vector<int32_t>{}), *catalog);
  EXPECT_EQ(GreedyTokens(*c, "demo").value_or(std::vector<int32_t>{}), *demo);
  const std::string log = ReadFile(dir + "/df11d.log");
  EXPECT_THAT(log, HasSubstr("can no longer be served"));
  // Each model turned FAILED is in the audit log, with why.
  EXPECT_THAT(log, HasSubstr(R"("audit":"model_failed")"));
  EXPECT_THAT(log, HasSubstr(R"("model":"loaded","outcome":"DATA_LOSS")"));
  EXPECT_EQ(daemon.Terminate(), 0);
  fs::remove_all(dir);
}

// A model file truncated while a request computes on its mapping: the reads past the new end get
// zeros instead of killing the daemon (SIGBUS), the request ends with DATA_LOSS, the model is
// FAILED at the next request, and demo serves on.
TEST(ModelFilesTest, AFileTruncatedUnderARunningRequestFailsTheRequestNotTheDaemon) {
  const std::string dir = testing::MakeTempDir();
  const std::string model =
      testing::MakeTestModel(dir, "bf16", "qwen3", /*df11=*/false, 23, DemoDir());
  testing::DaemonProcess daemon;
  ASSERT_TRUE(
      daemon
          .Start(absl::StrCat("preload: [{source: ", DemoDir(), ", name: demo, pin: true},\n",
                              "          {source: ", model, ", name: bf16}]\n"),
                 dir)
          .ok());
  std::unique_ptr<client::Df11Client> c = *client::Df11Client::Connect(daemon.address());
  const absl::StatusOr<std::vector<int32_t>> demo = GreedyTokens(*c, "demo");
  ASSERT_TRUE(demo.ok()) << demo.status();

  const std::string file = LargestSafetensors(model);
  v1::GenerateRequest request;
  request.set_model("bf16");
  request.set_text("def main(");
  request.set_max_tokens(2000);
  request.set_ignore_eos(true);
  bool truncated = false;
  const absl::Status status = c->Generate(request,
                                          [&](const v1::GenerateResponse&) {
                                            if (!truncated)
                                              fs::resize_file(file, fs::file_size(file) / 3);
                                            truncated = true;
                                            return true;
                                          },
                                          {.timeout = absl::Seconds(300)});
  ASSERT_TRUE(truncated);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(status.message(), HasSubstr("the model's files changed while the request ran"));
  EXPECT_THAT(status.message(), HasSubstr("was truncated while mapped"));
  EXPECT_EQ(HealthStatus(daemon.address()), 1);
  EXPECT_EQ(GreedyTokens(*c, "demo").value_or(std::vector<int32_t>{}), *demo);
  EXPECT_THAT(GreedyTokens(*c, "bf16").status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(daemon.Terminate(), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace df11
