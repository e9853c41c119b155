// The project's base helpers: reading a file with a cap, durations.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "codec/base/duration.h"
#include "codec/base/read_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace df11::base {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

fs::path TempFile(const std::string& name, const std::string& text) {
  const fs::path p = fs::path(::testing::TempDir()) / ("base_test_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

TEST(ReadFileTest, ReadsUpToItsCapExactly) {
  const std::string text(1000, 'x');
  const fs::path p = TempFile("exact", text);
  EXPECT_EQ(*ReadFile(p, 1000), text);
  EXPECT_EQ(*ReadFile(TempFile("empty", ""), 0), "");
}

TEST(ReadFileTest, RefusesAFileOverItsCapWithBothSizes) {
  const fs::path p = TempFile("big", std::string(1001, 'x'));
  EXPECT_THAT(ReadFile(p, 1000),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is 1001 bytes, more than the 1000 bytes this file may hold")));
}

TEST(ReadFileTest, MissingFilesAreNotFound) {
  EXPECT_THAT(ReadFile(fs::path(::testing::TempDir()) / "base_test_none", 10),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist")));
}

// A directory, a FIFO (whose read would block until a writer comes) and a device that never ends
// are refused before any read.
TEST(ReadFileTest, RefusesWhatIsNotARegularFile) {
  EXPECT_THAT(ReadFile(::testing::TempDir(), 1 << 20),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
  const fs::path fifo = fs::path(::testing::TempDir()) / "base_test_fifo";
  fs::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(ReadFile(fifo, 1 << 20),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
  EXPECT_THAT(ReadFile("/dev/zero", 1 << 20),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
}

// /proc files report size 0 and have content: read on, up to the cap.
TEST(ReadFileTest, FilesThatUnderstateTheirSizeAreReadToTheCap) {
  absl::StatusOr<std::string> status = ReadFile("/proc/self/status", 1 << 20);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_THAT(*status, HasSubstr("Name:"));
  EXPECT_THAT(ReadFile("/proc/self/status", 16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than the 16 bytes")));
}

TEST(ParseDurationTest, UnitsAndBareSeconds) {
  EXPECT_EQ(*ParseDuration("250ms"), 0.25);
  EXPECT_EQ(*ParseDuration("30s"), 30);
  EXPECT_EQ(*ParseDuration("5m"), 300);
  EXPECT_EQ(*ParseDuration("2h"), 7200);
  EXPECT_EQ(*ParseDuration("10"), 10);
  EXPECT_EQ(*ParseDuration("1.5"), 1.5);
  EXPECT_EQ(*ParseDuration("0"), 0);
}

TEST(ParseDurationTest, RejectsOtherText) {
  EXPECT_THAT(ParseDuration("5d"), StatusIs(absl::StatusCode::kInvalidArgument,
                                            "\"5d\": unknown unit \"d\" (ms, s, m, h)"));
  for (const char* bad : {"", "s", "-1s", "abc", "1.2.3s", "inf", "nan"}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(ParseDuration(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

}  // namespace
}  // namespace df11::base
