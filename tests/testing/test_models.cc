#include "tests/testing/test_models.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "gtest/gtest.h"

namespace df11::testing {

int RunCommand(const std::string& command, std::string* out) {
  out->clear();
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string MustRun(const std::string& command) {
  std::string out;
  const int code = RunCommand(command + " 2>&1", &out);
  EXPECT_EQ(code, 0) << command << "\n" << out;
  return out;
}

std::string MakeTempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "df11d-test-XXXXXX").string();
  return mkdtemp(pattern.data()) == nullptr ? "" : pattern;
}

std::string MakeTestModel(const std::string& root, const std::string& name, const std::string& arch,
                          bool df11, int seed, const std::string& tokenizer_dir) {
  const std::string tool = std::getenv("DF11_TOOL");
  const std::string bf16 = root + "/" + name + (df11 ? "-bf16" : "");
  MustRun(tool + " synth " + bf16 + " --arch " + arch +
          " --layers 2 --hidden 128 --intermediate 256 --heads 4 --kv-heads 2 --vocab 4096" +
          " --seed " + std::to_string(seed));
  std::string dir = bf16;
  if (df11) {
    dir = root + "/" + name;
    MustRun(tool + " compress " + bf16 + " " + dir);
  }
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::copy_file(tokenizer_dir + "/" + file, dir + "/" + file,
                               std::filesystem::copy_options::overwrite_existing);
  }
  return dir;
}

}  // namespace df11::testing
