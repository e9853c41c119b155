// The command-line pieces shared by df11 and df11ctl: argument parsing, durations, byte counts and
// the progress display.
#include <sstream>
#include <string>

#include "client/cli/args.h"
#include "client/cli/progress.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace df11::cli {
namespace {

using ::df11::testing::IsOk;
using ::df11::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ArgsTest, PositionalsValuesAndBooleans) {
  DF11_ASSERT_OK_AND_ASSIGN(
      Args args, Args::Parse({"src", "--threads", "4", "--name=x", "dst", "--json", "-h"},
                             {"threads", "name"}, {"json", "help"}));
  EXPECT_THAT(args.positional(), ElementsAre("src", "dst"));
  EXPECT_EQ(args.Get("threads"), "4");
  EXPECT_EQ(args.Get("name"), "x");
  EXPECT_TRUE(args.Has("json"));
  EXPECT_TRUE(args.Has("help"));
  EXPECT_FALSE(args.Has("other"));
  EXPECT_EQ(args.Get("other"), std::nullopt);
}

TEST(ArgsTest, RepeatedValueFlagKeepsEveryValueAndGetReturnsTheLast) {
  DF11_ASSERT_OK_AND_ASSIGN(Args args, Args::Parse({"--stop", "a", "--stop=b"}, {"stop"}, {}));
  EXPECT_THAT(args.GetAll("stop"), ElementsAre("a", "b"));
  EXPECT_EQ(args.Get("stop"), "b");
  EXPECT_THAT(args.GetAll("missing"), ElementsAre());
}

TEST(ArgsTest, BadCommandLinesAreInvalidArgument) {
  EXPECT_THAT(Args::Parse({"--bogus"}, {}, {"help"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown option --bogus"));
  EXPECT_THAT(Args::Parse({"--threads"}, {"threads"}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--threads needs a value"));
  EXPECT_THAT(Args::Parse({"--json=1"}, {}, {"json"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--json takes no value"));
}

TEST(ArgsTest, TypedGettersCheckRanges) {
  DF11_ASSERT_OK_AND_ASSIGN(Args args,
                            Args::Parse({"--n", "7", "--x", "0.5", "--bad", "7q", "--d", "5m"},
                                        {"n", "x", "bad", "d", "missing"}, {}));
  EXPECT_EQ(*args.GetInt("n", 0, 1, 10), 7);
  EXPECT_EQ(*args.GetInt("missing", 3, 1, 10), 3);
  EXPECT_THAT(args.GetInt("n", 0, 8, 10), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   "--n must be an integer from 8 to 10, not '7'"));
  EXPECT_THAT(args.GetInt("bad", 0, 0, 10), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(*args.GetDouble("x", 0, 0, 1), 0.5);
  EXPECT_EQ(*args.GetSeconds("d", 1), 300);
  EXPECT_EQ(*args.GetSeconds("missing", 1.5), 1.5);
  EXPECT_THAT(args.GetSeconds("bad", 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--bad: ")));
}

TEST(HumanBytesTest, BinaryUnitsWithOneDecimal) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(5767168), "5.5 MiB");
  EXPECT_EQ(HumanBytes(3ull << 30), "3.0 GiB");
  EXPECT_EQ(HumanBytes(2ull << 40), "2.0 TiB");
  EXPECT_EQ(HumanBytes(2048ull << 40), "2048.0 TiB");
}

TEST(ProgressTest, PlainLinesOncePerTenth) {
  std::ostringstream out;
  {
    Progress progress("load", out, /*terminal=*/false);
    for (uint64_t done = 0; done <= 100; done += 5) progress.Update("m", done, 100);
  }
  EXPECT_EQ(out.str(),
            "load:   0% 0 B / 100 B m\n"
            "load:  10% 10 B / 100 B m\n"
            "load:  20% 20 B / 100 B m\n"
            "load:  30% 30 B / 100 B m\n"
            "load:  40% 40 B / 100 B m\n"
            "load:  50% 50 B / 100 B m\n"
            "load:  60% 60 B / 100 B m\n"
            "load:  70% 70 B / 100 B m\n"
            "load:  80% 80 B / 100 B m\n"
            "load:  90% 90 B / 100 B m\n"
            "load: 100% 100 B / 100 B m\n");
}

// Regression: the first update was dropped when it fell in the first tenth (0% never showed).
TEST(ProgressTest, PlainFirstUpdateAtZeroIsPrinted) {
  std::ostringstream out;
  Progress progress("placing", out, /*terminal=*/false);
  progress.Update("m", 0, 5);
  EXPECT_EQ(out.str(), "placing:   0% 0 B / 5 B m\n");
}

TEST(ProgressTest, TerminalBarRedrawsInPlaceAndEndsTheLine) {
  std::ostringstream out;
  Progress progress("load", out, /*terminal=*/true);
  progress.Update("m", 50, 100);
  progress.Update("m", 50, 100);   // unchanged: not redrawn
  progress.Update("m", 200, 100);  // more than the total shows as full
  progress.Done();
  progress.Done();
  EXPECT_EQ(out.str(), "\rload [###############               ]  50.0% 50 B / 100 B  m" +
                           std::string(31, ' ') + "\rload [" + std::string(30, '#') +
                           "] 100.0% 200 B / 100 B  m" + std::string(31, ' ') + "\n");
}

}  // namespace
}  // namespace df11::cli
