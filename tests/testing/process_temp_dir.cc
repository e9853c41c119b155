// Linked into every test program: a temporary folder of the process's own, made at start and
// removed at exit, which ::testing::TempDir() returns (through TEST_TMPDIR). So a test never
// meets files that another run, or another program, left behind (a stale compressed model, say).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace {

class ProcessTempDir {
 public:
  ProcessTempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
                          "/df11-test-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) return;  // then gtest's default folder
    dir_ = pattern;
    owner_ = getpid();
    setenv("TEST_TMPDIR", dir_.c_str(), /*overwrite=*/1);
  }
  ~ProcessTempDir() {
    // Only the process that made it: a forked child that exits leaves it to its parent.
    if (dir_.empty() || getpid() != owner_) return;
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

 private:
  std::string dir_;
  pid_t owner_ = 0;
};

const ProcessTempDir process_temp_dir;

}  // namespace
