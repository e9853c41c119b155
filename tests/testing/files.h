// Bytes of files for tests: reading a whole file, and making content whose every range differs.
#ifndef DF11_TESTS_TESTING_FILES_H_
#define DF11_TESTS_TESTING_FILES_H_

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace df11::testing {

// The bytes of a file ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `size` pseudo-random bytes from `seed`, so that a misplaced or repeated range shows.
inline std::string Pattern(size_t size, uint32_t seed) {
  std::string s(size, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

}  // namespace df11::testing

#endif  // DF11_TESTS_TESTING_FILES_H_
