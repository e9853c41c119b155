// BlobWriter: whatever the pieces, flushes and reopenings, the file is exactly the bytes
// appended, and at any moment it holds a prefix of them (what resuming relies on). Run with and
// without O_DIRECT.
#include "daemon/hub/blob_writer.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/files.h"
#include "tests/testing/status_matchers.h"

namespace df11::hub {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::IsOk;
using ::df11::testing::Pattern;
using ::df11::testing::ReadFile;

class BlobWriterTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("blob_writer_test_" + std::to_string(::getpid()) + "_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
    fs::create_directories(dir_);
    path_ = (dir_ / "blob.incomplete").string();
    fs::remove(path_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<BlobWriter> Open() {
    absl::StatusOr<std::unique_ptr<BlobWriter>> writer = BlobWriter::Open(path_, GetParam());
    EXPECT_THAT(writer.status(), IsOk());
    return writer.ok() ? std::move(*writer) : nullptr;
  }

  // Appends data[begin, end) in pieces of awkward sizes (1 byte, just under and over a block,
  // more than the staging buffer).
  static void AppendInPieces(BlobWriter& writer, const std::string& data, size_t begin,
                             size_t end) {
    static constexpr size_t kPieces[] = {1,     4095,  4097, 16384,
                                         65543, 12345, 3,    BlobWriter::kStagingBytes + 17};
    size_t i = 0;
    while (begin < end) {
      const size_t n = std::min(kPieces[i++ % std::size(kPieces)], end - begin);
      ASSERT_THAT(writer.Append(data.data() + begin, n), IsOk());
      begin += n;
      ASSERT_EQ(writer.size(), begin);
    }
  }

  fs::path dir_;
  std::string path_;
};

TEST_P(BlobWriterTest, WritesExactlyTheBytesAppended) {
  const std::string data = Pattern(5 * BlobWriter::kStagingBytes / 2 + 123, 1);
  std::unique_ptr<BlobWriter> writer = Open();
  ASSERT_NE(writer, nullptr);
  if (!GetParam()) {
    EXPECT_FALSE(writer->direct());
  }
  if (GetParam() && !writer->direct()) std::cout << "no O_DIRECT in " << dir_ << "\n";
  AppendInPieces(*writer, data, 0, data.size());
  ASSERT_THAT(writer->Sync(), IsOk());
  EXPECT_EQ(fs::file_size(path_), data.size());
  EXPECT_TRUE(ReadFile(path_) == data);
}

TEST_P(BlobWriterTest, FlushLeavesTheFileAtTheAcceptedLengthAndWritingGoesOn) {
  const std::string data = Pattern(3 * BlobWriter::kStagingBytes + 999, 2);
  std::unique_ptr<BlobWriter> writer = Open();
  ASSERT_NE(writer, nullptr);
  // Flushes off block boundaries stage a tail that the next direct write must rewrite whole.
  for (const size_t end : {size_t{10000}, size_t{10001}, size_t{BlobWriter::kStagingBytes + 5},
                           2 * BlobWriter::kStagingBytes, data.size()}) {
    AppendInPieces(*writer, data, writer->size(), end);
    ASSERT_THAT(writer->Flush(), IsOk());
    ASSERT_EQ(fs::file_size(path_), end);
    ASSERT_TRUE(ReadFile(path_) == data.substr(0, end)) << "after a flush at " << end;
  }
}

TEST_P(BlobWriterTest, ReopeningResumesAfterWhatTheFileHolds) {
  const std::string data = Pattern(2 * BlobWriter::kStagingBytes + 77, 3);
  // A partial file left by another writer (huggingface_hub, or a cut transfer), off a block.
  std::ofstream(path_, std::ios::binary).write(data.data(), 5000);
  std::unique_ptr<BlobWriter> writer = Open();
  ASSERT_NE(writer, nullptr);
  ASSERT_EQ(writer->size(), 5000u);
  AppendInPieces(*writer, data, 5000, 1500000);
  ASSERT_THAT(writer->Flush(), IsOk());
  writer = Open();
  ASSERT_NE(writer, nullptr);
  ASSERT_EQ(writer->size(), 1500000u);
  AppendInPieces(*writer, data, 1500000, data.size());
  ASSERT_THAT(writer->Sync(), IsOk());
  EXPECT_TRUE(ReadFile(path_) == data);
}

TEST_P(BlobWriterTest, WithoutAFlushTheFileStillHoldsAPrefix) {
  // What a kill -9 leaves: staged bytes are lost, the file is a prefix to resume after.
  const std::string data = Pattern(BlobWriter::kStagingBytes + 4096 * 3 + 5, 4);
  {
    std::unique_ptr<BlobWriter> writer = Open();
    ASSERT_NE(writer, nullptr);
    AppendInPieces(*writer, data, 0, data.size());
  }
  const std::string kept = ReadFile(path_);
  EXPECT_LE(kept.size(), data.size());
  EXPECT_TRUE(kept == data.substr(0, kept.size()));
}

TEST_P(BlobWriterTest, TruncateStartsOver) {
  const std::string first = Pattern(BlobWriter::kStagingBytes + 10, 5);
  const std::string second = Pattern(70000, 6);
  std::unique_ptr<BlobWriter> writer = Open();
  ASSERT_NE(writer, nullptr);
  AppendInPieces(*writer, first, 0, first.size());
  ASSERT_THAT(writer->Flush(), IsOk());
  ASSERT_THAT(writer->Truncate(), IsOk());
  EXPECT_EQ(writer->size(), 0u);
  EXPECT_EQ(fs::file_size(path_), 0u);
  AppendInPieces(*writer, second, 0, second.size());
  ASSERT_THAT(writer->Sync(), IsOk());
  EXPECT_TRUE(ReadFile(path_) == second);
}

// /dev/full refuses every write with ENOSPC, as a full file system does.
TEST_P(BlobWriterTest, AFullDiskIsResourceExhaustedNamingTheFileAndTheBytes) {
  absl::StatusOr<std::unique_ptr<BlobWriter>> writer = BlobWriter::Open("/dev/full", GetParam());
  if (!writer.ok()) GTEST_SKIP() << "no /dev/full here: " << writer.status();
  const std::string data = Pattern(BlobWriter::kStagingBytes + 5000, 7);
  absl::Status status = (*writer)->Append(data.data(), data.size());
  if (status.ok()) status = (*writer)->Flush();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("cannot write /dev/full: No space left"));
  EXPECT_THAT(status.message(), ::testing::HasSubstr("bytes of the file received"));
  EXPECT_THAT(status.message(), ::testing::HasSubstr("bytes free"));
}

INSTANTIATE_TEST_SUITE_P(PageCache, BlobWriterTest, ::testing::Values(false));
INSTANTIATE_TEST_SUITE_P(Direct, BlobWriterTest, ::testing::Values(true));

}  // namespace
}  // namespace df11::hub
