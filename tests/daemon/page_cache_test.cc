// PopulateFile: progress in steps, cancellation, errors, and the file resident afterwards.
#include "daemon/registry/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace df11::registry {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::IsOk;
using ::df11::testing::StatusIs;
using ::testing::ElementsAre;

constexpr uint64_t kStep = 16 << 20;

class PageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("page_cache_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string MakeFile(const std::string& name, uint64_t size) {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    const std::string chunk(1 << 20, 'x');
    for (uint64_t left = size; left > 0;) {
      const uint64_t n = std::min<uint64_t>(left, chunk.size());
      out.write(chunk.data(), static_cast<std::streamsize>(n));
      left -= n;
    }
    return path;
  }

  // Pages of `path` not in memory.
  static size_t MissingPages(const std::string& path, uint64_t size) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    EXPECT_NE(mapped, MAP_FAILED);
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> resident((size + page - 1) / page);
    EXPECT_EQ(::mincore(mapped, size, resident.data()), 0);
    ::munmap(mapped, size);
    size_t missing = 0;
    for (unsigned char r : resident) missing += (r & 1) == 0;
    return missing;
  }

  // Drops the file's clean pages from the page cache (where the file system allows it).
  static void Evict(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }

  fs::path dir_;
};

TEST_F(PageCacheTest, ReportsEachStepAndReturnsTheSize) {
  const uint64_t size = 2 * kStep + 123;
  const std::string path = MakeFile("weights.safetensors", size);
  Evict(path);
  if (MissingPages(path, size) == 0)
    std::cout << "the page cache kept the file: no eviction here\n";
  std::vector<uint64_t> reports;
  absl::StatusOr<uint64_t> populated = PopulateFile(path, kStep, [&](uint64_t done) {
    reports.push_back(done);
    return true;
  });
  ASSERT_THAT(populated.status(), IsOk());
  EXPECT_EQ(*populated, size);
  EXPECT_THAT(reports, ElementsAre(kStep, 2 * kStep, size));

  EXPECT_EQ(MissingPages(path, size), 0u);
}

TEST_F(PageCacheTest, EmptyFileReportsOnce) {
  const std::string path = MakeFile("empty", 0);
  std::vector<uint64_t> reports;
  absl::StatusOr<uint64_t> populated = PopulateFile(path, kStep, [&](uint64_t done) {
    reports.push_back(done);
    return true;
  });
  ASSERT_THAT(populated.status(), IsOk());
  EXPECT_EQ(*populated, 0u);
  EXPECT_THAT(reports, ElementsAre(0u));
}

TEST_F(PageCacheTest, FalseFromProgressCancels) {
  const std::string path = MakeFile("weights.safetensors", 3 * kStep);
  int calls = 0;
  EXPECT_THAT(PopulateFile(path, kStep,
                           [&](uint64_t) {
                             ++calls;
                             return false;
                           })
                  .status(),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(calls, 1);
}

TEST_F(PageCacheTest, MissingFileIsNotFound) {
  EXPECT_THAT(
      PopulateFile((dir_ / "absent").string(), kStep, [](uint64_t) { return true; }).status(),
      StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace df11::registry
