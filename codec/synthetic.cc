#include "codec/synthetic.h"

#include <cmath>
#include <cstring>
#include <random>

#include "codec/format.h"

namespace df11::codec {

uint16_t FloatToBf16(float f) { return format::FloatToBf16(f); }

float Bf16ToFloat(uint16_t bf16) { return format::Bf16ToFloat(bf16); }

void FillNormalBf16(uint64_t seed, float stddev, std::span<uint16_t> out) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  for (uint16_t& v : out) v = FloatToBf16(normal(rng));
}

std::vector<uint16_t> NormalBf16(uint64_t seed, float stddev, size_t n) {
  std::vector<uint16_t> out(n);
  FillNormalBf16(seed, stddev, out);
  return out;
}

}  // namespace df11::codec
