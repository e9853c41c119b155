// Timing helpers of the benchmarks and the soak: seconds of a steady-clock duration, percentiles.
#ifndef DF11_TOOLS_DF11_STATS_H_
#define DF11_TOOLS_DF11_STATS_H_

#include <algorithm>
#include <chrono>
#include <vector>

namespace df11::tool {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The value below which a fraction `p` (0-1) of `v` lies; 0 for none.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

inline double Median(const std::vector<double>& v) { return Percentile(v, 0.5); }

}  // namespace df11::tool

#endif  // DF11_TOOLS_DF11_STATS_H_
