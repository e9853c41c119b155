// Model sources and finding a hub model in a huggingface_hub-layout cache, without network.
#include "daemon/hub/cache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace df11::hub {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kCommit[] = "0123456789abcdef0123456789abcdef01234567";

ModelSource Hub(const std::string& repo_id, const std::string& revision) {
  ModelSource source;
  source.is_hub = true;
  source.repo_id = repo_id;
  source.revision = revision;
  return source;
}

class HubCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("hub_cache_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    repo_ = root_ / "models--org--model";
    fs::create_directories(repo_ / "blobs");
    fs::create_directories(repo_ / "snapshots" / kCommit);
    fs::create_directories(repo_ / "refs" / "refs" / "pr");
    std::ofstream(repo_ / "blobs" / "abc") << "{}";
    fs::create_symlink("../../blobs/abc", repo_ / "snapshots" / kCommit / "config.json");
    std::ofstream(repo_ / "refs" / "main") << kCommit;  // as huggingface_hub: no newline
    std::ofstream(repo_ / "refs" / "refs" / "pr" / "1") << kCommit << "\n";
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_, repo_;
};

TEST(ParseModelSourceTest, AnExistingDirectoryIsLocal) {
  const std::string dir = fs::temp_directory_path().string();
  absl::StatusOr<ModelSource> s = ParseModelSource(dir);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->is_hub);
  EXPECT_EQ(s->directory, dir);
}

TEST(ParseModelSourceTest, HubIdsWithAndWithoutRevision) {
  absl::StatusOr<ModelSource> s = ParseModelSource("DFloat11/Qwen3-8B-DF11");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->is_hub);
  EXPECT_EQ(s->repo_id, "DFloat11/Qwen3-8B-DF11");
  EXPECT_EQ(s->revision, "main");
  s = ParseModelSource("org/name_1.5@refs/pr/12");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->repo_id, "org/name_1.5");
  EXPECT_EQ(s->revision, "refs/pr/12");
  s = ParseModelSource(std::string("org/name@") + kCommit);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->revision, kCommit);
}

TEST(ParseModelSourceTest, RejectsWhatIsNeitherADirectoryNorAHubId) {
  EXPECT_THAT(ParseModelSource(""), StatusIs(absl::StatusCode::kInvalidArgument));
  for (const char* source : {"no-slash", "a/b/c", "/does/not/exist", "./rel/missing",
                             ".hidden/name", "org/.name", "org/na me", "../x"}) {
    EXPECT_THAT(ParseModelSource(source),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr("neither a directory")))
        << source;
  }
}

TEST(ParseModelSourceTest, RejectsRevisionsThatLeaveRefs) {
  for (const char* source :
       {"org/name@", "org/name@/etc/passwd", "org/name@../../x", "org/name@refs/../../x",
        "org/name@a//b", "org/name@main/", "org/name@./main", "org/name@ma in", "org/name@a\\b"}) {
    EXPECT_THAT(ParseModelSource(source),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("revision")))
        << source;
  }
}

TEST_F(HubCacheTest, FindsASnapshotByBranchRefOrCommit) {
  for (const std::string revision : {"main", "refs/pr/1", kCommit}) {
    absl::StatusOr<CachedSnapshot> snap =
        FindCachedSnapshot(root_.string(), Hub("org/model", revision));
    ASSERT_TRUE(snap.ok()) << revision << ": " << snap.status();
    EXPECT_EQ(snap->commit, kCommit);
    EXPECT_EQ(fs::path(snap->directory), repo_ / "snapshots" / kCommit);
  }
}

TEST_F(HubCacheTest, WhatIsNotCachedIsUnavailableAndSaysWhat) {
  EXPECT_THAT(FindCachedSnapshot(root_.string(), Hub("org/other", "main")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("org/other@main")));
  EXPECT_THAT(FindCachedSnapshot(root_.string(), Hub("org/model", "v2")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no refs/v2")));
  // A ref whose commit has no snapshot with a config.json.
  std::ofstream(repo_ / "refs" / "dev") << "fedcba9876543210fedcba9876543210fedcba98";
  EXPECT_THAT(FindCachedSnapshot(root_.string(), Hub("org/model", "dev")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("has no config.json")));
  // A ref that does not hold a commit.
  std::ofstream(repo_ / "refs" / "broken") << "not a commit";
  EXPECT_THAT(FindCachedSnapshot(root_.string(), Hub("org/model", "broken")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no refs/broken")));
}

TEST(HubCacheDirTest, ConfiguredThenEnvironmentAsHuggingfaceHub) {
  const char* home = std::getenv("HOME");
  const std::string saved_home = home == nullptr ? "" : home;
  EXPECT_EQ(HubCacheDir("/srv/hf"), "/srv/hf");
  setenv("HF_HUB_CACHE", "/a/hub", 1);
  EXPECT_EQ(HubCacheDir(""), "/a/hub");
  unsetenv("HF_HUB_CACHE");
  unsetenv("HUGGINGFACE_HUB_CACHE");
  setenv("HF_HOME", "/b", 1);
  EXPECT_EQ(HubCacheDir(""), "/b/hub");
  unsetenv("HF_HOME");
  setenv("XDG_CACHE_HOME", "/c", 1);
  EXPECT_EQ(HubCacheDir(""), "/c/huggingface/hub");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(HubCacheDir(""), "/home/u/.cache/huggingface/hub");
  setenv("HOME", saved_home.c_str(), 1);
}

}  // namespace
}  // namespace df11::hub
