// The audit log's encoder and sink, and the escaping of the daemon's other log lines: no string
// a client sends can end a line or start one that reads as an audit record.
#include "daemon/audit/audit.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace df11::audit {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kForged[] =
    "x\n{\"audit\":\"load\",\"tenant\":\"forged\"}\r\n\x1b[2K\xc2\x85\xe2\x80\xa8\xe2\x80\xa9\x7f";

TEST(AuditTest, ARecordIsOneJsonLineWhateverItsFieldsHold) {
  const std::string line = Encode({.event = "load",
                                   .tenant = "team-a",
                                   .token = "ci",
                                   .peer = "ipv4:127.0.0.1:1",
                                   .source = kForged,
                                   .model = kForged,
                                   .outcome = absl::InvalidArgumentError(kForged)});
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_EQ(line.find('\r'), std::string::npos);
  const nlohmann::json record = nlohmann::json::parse(line);
  EXPECT_EQ(record["audit"], "load");
  EXPECT_EQ(record["tenant"], "team-a");
  EXPECT_EQ(record["model"], kForged);
  EXPECT_EQ(record["source"], kForged);
  EXPECT_EQ(record["outcome"], "INVALID_ARGUMENT");
  EXPECT_EQ(record["message"], kForged);
}

TEST(AuditTest, InvalidUtf8IsReplacedNotABrokenLine) {
  const std::string line = Encode({.event = "load", .model = "a\xff\xfe" "b"});
  const nlohmann::json record = nlohmann::json::parse(line);
  EXPECT_EQ(record["model"], "a\xef\xbf\xbd\xef\xbf\xbd" "b");
}

TEST(AuditTest, LogTextHasNoLineBreakOfAnyKind) {
  EXPECT_EQ(EscapeForLog(kForged),
            "x\\n{\"audit\":\"load\",\"tenant\":\"forged\"}\\r\\n\\x1b[2K\\u0085\\u2028\\u2029\\x7f");
  EXPECT_EQ(EscapeForLog("tab\tand UTF-8 \xc3\xa9 stay"), "tab\tand UTF-8 \xc3\xa9 stay");
  EXPECT_EQ(EscapeForLog("cut \xe2\x80"), "cut \xe2\x80");  // a truncated sequence as it is
}

TEST(AuditTest, RecordsGoToTheConfiguredFile) {
  const fs::path path = fs::path(::testing::TempDir()) / "audit_test.jsonl";
  fs::remove(path);
  ASSERT_TRUE(UseFile(path.string()).ok());
  Record({.event = "unload", .tenant = "team-b", .model = kForged});
  Record({.event = "eviction", .model = "m"});
  std::ifstream in(path);
  std::string first, second, third;
  ASSERT_TRUE(std::getline(in, first));
  ASSERT_TRUE(std::getline(in, second));
  EXPECT_FALSE(std::getline(in, third));
  EXPECT_EQ(nlohmann::json::parse(first)["model"], kForged);
  EXPECT_EQ(nlohmann::json::parse(second)["audit"], "eviction");
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  const absl::Status refused = UseFile((fs::path(::testing::TempDir()) / "no" / "such").string());
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("cannot open it for appending"));
}

}  // namespace
}  // namespace df11::audit
