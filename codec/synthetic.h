// Synthetic BF16 weights with LLM-like statistics, for benchmarks, tests and the demo model.
// Deterministic for a given standard library: the same seed gives the same values wherever df11 is
// built with libstdc++ (std::normal_distribution's algorithm is implementation-defined).
#ifndef DF11_CODEC_SYNTHETIC_H_
#define DF11_CODEC_SYNTHETIC_H_

#include <cstdint>
#include <span>
#include <vector>

namespace df11::codec {

// Round-to-nearest-even float -> BF16 bit pattern (NaN stays NaN).
uint16_t FloatToBf16(float f);
float Bf16ToFloat(uint16_t bf16);

// Fills `out` with BF16 values drawn from N(0, stddev^2). stddev 0.02 gives the ~2.6 bits of
// exponent entropy of trained LLM linear layers.
void FillNormalBf16(uint64_t seed, float stddev, std::span<uint16_t> out);
std::vector<uint16_t> NormalBf16(uint64_t seed, float stddev, size_t n);

}  // namespace df11::codec

#endif  // DF11_CODEC_SYNTHETIC_H_
