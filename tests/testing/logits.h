// Comparing logits in tests: the relative L2 distance to a reference, and the greedy token.
#ifndef DF11_TESTS_TESTING_LOGITS_H_
#define DF11_TESTS_TESTING_LOGITS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace df11::testing {

// ||a - b|| / ||b||, in double.
inline double RelativeL2(std::span<const float> a, const std::vector<double>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / norm);
}

inline int32_t Argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace df11::testing

#endif  // DF11_TESTS_TESTING_LOGITS_H_
