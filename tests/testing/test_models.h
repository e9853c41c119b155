// Small models and shell commands for tests: a random-weight model made by the df11 tool, a fresh
// temporary folder, and commands whose failure fails the test.
#ifndef DF11_TESTS_TESTING_TEST_MODELS_H_
#define DF11_TESTS_TESTING_TEST_MODELS_H_

#include <filesystem>
#include <string>

namespace df11::testing {

// The demo model (models/demo/), whose tokenizer the test models use.
inline std::string DemoDir() {
  return (std::filesystem::path(DF11_SOURCE_DIR) / "models" / "demo").string();
}

// Runs a shell command; its exit code, and stdout in `out`.
int RunCommand(const std::string& command, std::string* out);
// Runs a shell command with stderr joined to stdout; fails the test (naming the command and its
// output) when it does not exit 0. Its output.
std::string MustRun(const std::string& command);

// A random-weight model of `arch` (qwen3, qwen2, llama: 2 layers, hidden 128, vocabulary 4096)
// made with `df11 synth` ($DF11_TOOL) in root/name, DF11-compressed when `df11`, with the
// tokenizer files of `tokenizer_dir`. Its directory.
std::string MakeTestModel(const std::string& root, const std::string& name, const std::string& arch,
                          bool df11, int seed, const std::string& tokenizer_dir);

// A fresh directory under the system temporary directory.
std::string MakeTempDir();

}  // namespace df11::testing

#endif  // DF11_TESTS_TESTING_TEST_MODELS_H_
