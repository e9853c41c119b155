// The SIGBUS guard of read-only file mappings (codec/mapping_guard.h), and SafetensorsFile's use
// of it: a file truncated under its mapping reads as zeros past its new end and is reported,
// while a fault outside every guarded mapping still kills the process.
#include "codec/mapping_guard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "codec/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace df11::codec {
namespace {

namespace fs = std::filesystem;

class MappingGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InstallMappingGuard();
    path_ = (fs::temp_directory_path() /
             ("mapping_guard_test_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
  }
  void TearDown() override { fs::remove(path_); }

  // Maps a file of `pages` pages of 0x5a bytes; its address.
  const uint8_t* MapFile(size_t pages) {
    size_ = pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    std::ofstream(path_, std::ios::binary) << std::string(size_, '\x5a');
    const int fd = ::open(path_.c_str(), O_RDONLY);
    void* addr = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    EXPECT_NE(addr, MAP_FAILED);
    return static_cast<const uint8_t*>(addr);
  }

  std::string path_;
  size_t size_ = 0;
};

TEST_F(MappingGuardTest, ReadsPastATruncationGetZerosAndAreRecorded) {
  const uint8_t* bytes = MapFile(3);
  const int slot = GuardMapping(bytes, size_);
  ASSERT_GE(slot, 0);
  EXPECT_EQ(bytes[0], 0x5a);
  EXPECT_FALSE(MappingFaulted(slot));
  fs::resize_file(path_, size_ / 3);  // the first page stays
  volatile const uint8_t* v = bytes;
  EXPECT_EQ(v[0], 0x5a);
  EXPECT_EQ(v[size_ / 3], 0);
  EXPECT_EQ(v[size_ - 1], 0);
  EXPECT_TRUE(MappingFaulted(slot));
  UnguardMapping(slot);
  ::munmap(const_cast<uint8_t*>(bytes), size_);
}

TEST_F(MappingGuardTest, AFaultOutsideEveryGuardedMappingStillKills) {
  const uint8_t* bytes = MapFile(2);
  fs::resize_file(path_, 0);
  volatile const uint8_t* v = bytes;
  EXPECT_DEATH((void)v[0], "");
  ::munmap(const_cast<uint8_t*>(bytes), size_);
}

TEST_F(MappingGuardTest, ASafetensorsFileTruncatedUnderItsMappingIsReported) {
  SafetensorsWriter writer;
  const std::vector<uint16_t> values(100000, 0x3f80);
  ASSERT_TRUE(writer
                  .Add("w", DType::kBF16, {100000},
                       std::as_bytes(std::span<const uint16_t>(values.data(), values.size())))
                  .ok());
  std::ofstream(path_, std::ios::binary) << writer.Serialize();
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->CheckUnchanged().ok());
  const TensorView* w = file->Find("w");
  ASSERT_NE(w, nullptr);
  fs::resize_file(path_, 4096);
  volatile const std::byte* data = w->data.data();
  EXPECT_EQ(static_cast<uint8_t>(data[w->data.size() - 1]), 0);
  const absl::Status status = file->CheckUnchanged();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("was truncated while mapped"));
}

}  // namespace
}  // namespace df11::codec
