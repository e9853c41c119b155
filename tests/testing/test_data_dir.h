// Where the tests' committed data lives: $DF11_TEST_DATA when set (tests run against a copy),
// else tests/data in the source tree.
//
//   const std::filesystem::path goldens = TestDataDir("engine") / "goldens.json";
#ifndef DF11_TESTS_TESTING_TEST_DATA_DIR_H_
#define DF11_TESTS_TESTING_TEST_DATA_DIR_H_

#include <cstdlib>
#include <filesystem>
#include <string>

namespace df11::testing {

// The data folder `name` (e.g. "engine", "chat") under the test data root.
inline std::filesystem::path TestDataDir(const std::string& name) {
  const char* dir = std::getenv("DF11_TEST_DATA");
  const std::filesystem::path root =
      dir != nullptr && *dir != '\0' ? std::filesystem::path(dir)
                                     : std::filesystem::path(DF11_SOURCE_DIR) / "tests" / "data";
  return root / name;
}

}  // namespace df11::testing

#endif  // DF11_TESTS_TESTING_TEST_DATA_DIR_H_
