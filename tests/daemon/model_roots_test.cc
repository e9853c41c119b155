// model_roots, tried by breaking out: "..", absolute paths, symlinks (of the folder, of a file in
// it, of a folder in it), a root that is a prefix of another folder's name, and probing for paths
// that exist elsewhere. Hub ids need no root.
#include "daemon/server/model_roots.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace df11::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ModelRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "df11-roots-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    // Real paths throughout, so messages and comparisons see what the check resolves.
    base_ = fs::canonical(pattern).string();
    fs::create_directories(base_ + "/models/good");
    std::ofstream(base_ + "/models/good/config.json") << "{}";
    fs::create_directories(base_ + "/models-evil/bad");
    std::ofstream(base_ + "/models-evil/bad/config.json") << "{}";
    std::ofstream(base_ + "/secret.txt") << "secret";
    roots_ = {base_ + "/models"};
  }
  void TearDown() override { fs::remove_all(base_); }

  absl::StatusCode Check(const std::string& source) {
    const absl::Status s = CheckModelRoots(source, roots_).status();
    if (!s.ok() && s.code() == absl::StatusCode::kPermissionDenied) {
      EXPECT_THAT(s.message(), HasSubstr("is not under model_roots (" + base_ + "/models)"));
    }
    return s.code();
  }

  std::string base_;
  std::vector<std::string> roots_;
};

TEST_F(ModelRootsTest, AFolderUnderARootIsAllowed) {
  EXPECT_EQ(Check(base_ + "/models/good"), absl::StatusCode::kOk);
  EXPECT_EQ(Check(base_ + "/models/good/"), absl::StatusCode::kOk);
  EXPECT_EQ(Check(base_ + "/models/../models/good"), absl::StatusCode::kOk);
  // A link inside the root to a folder inside the root.
  fs::create_directory_symlink(base_ + "/models/good", base_ + "/models/alias");
  EXPECT_EQ(Check(base_ + "/models/alias"), absl::StatusCode::kOk);
  // The load reads the folder that was checked: its real path.
  absl::StatusOr<CheckedSource> checked = CheckModelRoots(base_ + "/models/alias/", roots_);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->source, base_ + "/models/good");
  EXPECT_FALSE(checked->hub);
}

TEST_F(ModelRootsTest, PathsOutsideEveryRootAreDenied) {
  EXPECT_EQ(Check(base_ + "/models/../models-evil/bad"), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check(base_ + "/models-evil/bad"), absl::StatusCode::kPermissionDenied);  // prefix
  EXPECT_EQ(Check(base_), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check("/etc"), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check("/"), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check(base_ + "/secret.txt"), absl::StatusCode::kPermissionDenied);
  // Existing or not, elsewhere is the same answer: no probing.
  EXPECT_EQ(Check("/no/such/dir"), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check(base_ + "/models/missing"), absl::StatusCode::kNotFound);
  // No roots: nothing local.
  roots_.clear();
  EXPECT_EQ(CheckModelRoots(base_ + "/models/good", roots_).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(ModelRootsTest, SymlinksOutOfARootAreDenied) {
  // The folder itself.
  fs::create_directory_symlink(base_ + "/models-evil/bad", base_ + "/models/link");
  EXPECT_EQ(Check(base_ + "/models/link"), absl::StatusCode::kPermissionDenied);
  // A file in it.
  fs::create_directories(base_ + "/models/trap");
  fs::create_symlink(base_ + "/secret.txt", base_ + "/models/trap/model.safetensors");
  EXPECT_EQ(Check(base_ + "/models/trap"), absl::StatusCode::kPermissionDenied);
  // The message names the path the caller gave, never where the link leads.
  const absl::Status trap = CheckModelRoots(base_ + "/models/trap", roots_).status();
  EXPECT_THAT(trap.message(), HasSubstr(base_ + "/models/trap/model.safetensors, a link out"));
  EXPECT_THAT(trap.message(), ::testing::Not(HasSubstr("secret")));
  // A folder in a folder in it.
  fs::create_directories(base_ + "/models/deep/sub");
  fs::create_directory_symlink("/etc", base_ + "/models/deep/sub/etc");
  EXPECT_EQ(Check(base_ + "/models/deep"), absl::StatusCode::kPermissionDenied);
  // A relative link climbing out.
  fs::create_directories(base_ + "/models/climb");
  fs::create_symlink("../../secret.txt", base_ + "/models/climb/tokenizer.json");
  EXPECT_EQ(Check(base_ + "/models/climb"), absl::StatusCode::kPermissionDenied);
  // A link to nothing yet: what it names could appear later, outside.
  fs::create_directories(base_ + "/models/later");
  fs::create_symlink(base_ + "/not-yet.txt", base_ + "/models/later/config.json");
  EXPECT_EQ(Check(base_ + "/models/later"), absl::StatusCode::kPermissionDenied);
}

TEST_F(ModelRootsTest, HubIdsNeedNoRoot) {
  EXPECT_EQ(Check("DFloat11/Qwen3-8B-DF11"), absl::StatusCode::kOk);
  EXPECT_EQ(Check("org/name@v1.0"), absl::StatusCode::kOk);
  absl::StatusOr<CheckedSource> hub = CheckModelRoots("org/name@v1.0", roots_);
  ASSERT_TRUE(hub.ok());
  EXPECT_EQ(hub->source, "org/name@v1.0");
  EXPECT_TRUE(hub->hub);
  // A relative folder that looks like a hub id is a folder, and outside the roots.
  const fs::path cwd = fs::current_path();
  fs::create_directories(base_ + "/org/name");
  fs::current_path(base_);
  EXPECT_EQ(Check("org/name"), absl::StatusCode::kPermissionDenied);
  fs::current_path(cwd);
}

}  // namespace
}  // namespace df11::server
