// Reading the hub's answers (daemon/hub/hub_answers.h): what the hub sends, and what a broken or
// hostile server might send instead.
#include "daemon/hub/hub_answers.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace df11::hub {
namespace {

using ::df11::testing::StatusIs;

constexpr char kCommit[] = "0123456789abcdef0123456789abcdef01234567";

TEST(HubAnswersTest, TheRevisionAnswerGivesItsCommit) {
  EXPECT_EQ(ParseRevisionAnswer(std::string(R"({"id": "org/m", "sha": ")") + kCommit + R"("})")
                .value_or(""),
            kCommit);
  EXPECT_THAT(ParseRevisionAnswer(R"({"sha": "main"})").status(),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(ParseRevisionAnswer(R"({"sha": 7})").status(), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(ParseRevisionAnswer("<html>").status(), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(HubAnswersTest, ATreePageListsItsFilesAndRefusesPathsLeavingTheRepository) {
  absl::StatusOr<std::vector<RepoFile>> files = ParseTreePage(
      R"([{"type": "directory", "path": "sub"},
          {"type": "file", "path": "sub/a.json", "size": 12},
          {"type": "file", "path": "w.safetensors", "size": 99, "lfs": {"oid": "abc"}},
          {"type": "file", "path": "odd-size", "size": -1}])");
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0].path, "sub/a.json");
  EXPECT_EQ((*files)[0].size, 12u);
  EXPECT_EQ((*files)[1].lfs_sha256, "abc");
  EXPECT_EQ((*files)[2].size, 0u);  // not an unsigned number: unknown
  EXPECT_THAT(ParseTreePage(R"([{"type": "file", "path": "../etc/passwd"}])").status(),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(ParseTreePage(R"({"type": "file"})").status(), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(HubAnswersTest, TheNextLinkIsTheOneMarkedNext) {
  EXPECT_EQ(NextLink(R"(<https://h/p?c=1>; rel="prev", <https://h/p?c=3>; rel="next")"),
            "https://h/p?c=3");
  EXPECT_EQ(NextLink(R"(<https://h/p?c=1>; rel="prev")"), "");
  EXPECT_EQ(NextLink(R"(>broken<; rel="next")"), "");
}

TEST(HubAnswersTest, FileMetadataComesFromTheHubsHeaders) {
  HttpResponse head;
  head.status = 302;
  head.headers = {
      {"x-repo-commit", kCommit},
      {"x-linked-etag", "\"ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\""},
      {"x-linked-size", "1234"},
      {"location", "https://cdn.example/blob"}};
  absl::StatusOr<FileMetadata> m = ParseFileMetadata(head, "https://hub/resolve");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->etag, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
  EXPECT_EQ(m->size, 1234u);
  EXPECT_EQ(m->location, "https://cdn.example/blob");
  head.headers["location"] = "/relative";
  EXPECT_THAT(ParseFileMetadata(head, "https://hub/resolve").status(),
              StatusIs(absl::StatusCode::kDataLoss));
  head.headers.erase("x-repo-commit");
  EXPECT_THAT(ParseFileMetadata(head, "https://hub/resolve").status(),
              StatusIs(absl::StatusCode::kDataLoss));
}

TEST(HubAnswersTest, TheRequestedWaitComesFromRateLimitThenRetryAfter) {
  HttpResponse r;
  EXPECT_EQ(RequestedWait(r), -1);
  r.headers["retry-after"] = "12";
  EXPECT_EQ(RequestedWait(r), 12);
  r.headers["ratelimit"] = "\"api\";r=0;t=55";
  EXPECT_EQ(RequestedWait(r), 56);
  r.headers["ratelimit"] = "\"api\";r=3;t=55";  // requests left: Retry-After decides
  EXPECT_EQ(RequestedWait(r), 12);
  // t at the top of int64: once an integer overflow, now a (huge) finite wait.
  r.headers["ratelimit"] = "\"api\";r=0;t=9223372036854775807";
  EXPECT_EQ(RequestedWait(r), 9223372036854775808.0);
}

}  // namespace
}  // namespace df11::hub
