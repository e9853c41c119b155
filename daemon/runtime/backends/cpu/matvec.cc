#include "daemon/runtime/backends/cpu/matvec.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "codec/format.h"

namespace df11::runtime {
namespace {

// The arithmetic of every kernel, for one W row and one input row:
// - 32 fp32 accumulators in 4 vectors of 8 lanes. Each run of 32 weights adds one product into
//   every lane (a fused multiply-add); a last run of 16 uses vectors 0 and 1 only.
// - Within a run of 16 weights, vector v (0 or 1) lane j takes weight kRunOrder[8v + j]: the
//   order in which in-lane unpacks widen 16 BF16 values held in one 256-bit register.
// - Then s = (acc0 + acc1) + (acc2 + acc3), lane by lane; then h[j] = s[j] + s[j + 4];
//   then (h0 + h2) + (h1 + h3).
// - Then the weights past the last run of 16, in order, one fused multiply-add each.
constexpr int kRunOrder[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

using format::Bf16ToFloat;

// The dot product of one W row with one input row (permuted as MatVecInput::Set does), in the
// order above; weight(i) returns W's element i.
template <typename Weight>
float DotPortable(const Weight& weight, const float* x, int64_t in) {
  float acc[4][8] = {};
  int64_t i = 0;
  for (; i + 32 <= in; i += 32) {
    for (int k = 0; k < 4; ++k) {
      for (int j = 0; j < 8; ++j) {
        const int64_t element = i + 16 * (k / 2) + kRunOrder[8 * (k % 2) + j];
        acc[k][j] = std::fma(weight(element), x[i + 8 * k + j], acc[k][j]);
      }
    }
  }
  if (i + 16 <= in) {
    for (int k = 0; k < 2; ++k) {
      for (int j = 0; j < 8; ++j) {
        acc[k][j] = std::fma(weight(i + kRunOrder[8 * k + j]), x[i + 8 * k + j], acc[k][j]);
      }
    }
    i += 16;
  }
  float s[8], h[4];
  for (int j = 0; j < 8; ++j) s[j] = (acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j]);
  for (int j = 0; j < 4; ++j) h[j] = s[j] + s[j + 4];
  float sum = (h[0] + h[2]) + (h[1] + h[3]);
  for (; i < in; ++i) sum = std::fma(weight(i), x[i], sum);
  return sum;
}

// ---- AVX2 ----

#define DF11_AVX2 __attribute__((target("avx2,fma")))

// Four vectors of fp32 weights from 16 BF16 values at w and 16 at w + 16 (ordered as above).
DF11_AVX2 inline void WidenRuns(__m256i first, __m256i second, __m256 out[4]) {
  const __m256i zero = _mm256_setzero_si256();
  out[0] = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, first));
  out[1] = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, first));
  out[2] = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, second));
  out[3] = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, second));
}

struct Bf16Weights {
  const uint16_t* w;

  DF11_AVX2 void Run32(int64_t i, __m256 out[4]) const {
    WidenRuns(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i)),
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i + 16)), out);
  }
  DF11_AVX2 void Run16(int64_t i, __m256 out[4]) const {
    WidenRuns(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i)), _mm256_setzero_si256(),
              out);
  }
  float operator()(int64_t i) const { return Bf16ToFloat(w[i]); }
  Bf16Weights Row(int64_t offset) const { return {w + offset}; }
};

// The two bytes of each BF16 value from exponents e and sign/mantissa bytes sm (format::JoinBf16):
// high byte = sign | exponent >> 1, low byte = exponent << 7 | mantissa. 16-bit shifts carry bits
// across bytes; the masks drop them.
struct JoinedBytes256 {
  __m256i low, high;
};
struct JoinedBytes128 {
  __m128i low, high;
};

DF11_AVX2 inline JoinedBytes256 JoinBytes(__m256i e, __m256i sm) {
  const __m256i sign = _mm256_set1_epi8(static_cast<char>(0x80));
  return {_mm256_or_si256(_mm256_and_si256(_mm256_slli_epi16(e, 7), sign),
                          _mm256_andnot_si256(sign, sm)),
          _mm256_or_si256(_mm256_and_si256(sm, sign),
                          _mm256_andnot_si256(sign, _mm256_srli_epi16(e, 1)))};
}

DF11_AVX2 inline JoinedBytes128 JoinBytes(__m128i e, __m128i sm) {
  const __m128i sign = _mm_set1_epi8(static_cast<char>(0x80));
  return {_mm_or_si128(_mm_and_si128(_mm_slli_epi16(e, 7), sign), _mm_andnot_si128(sign, sm)),
          _mm_or_si128(_mm_and_si128(sm, sign), _mm_andnot_si128(sign, _mm_srli_epi16(e, 1)))};
}

struct Df11Weights {
  const uint8_t* e;
  const uint8_t* sm;

  DF11_AVX2 void Run32(int64_t i, __m256 out[4]) const {
    const JoinedBytes256 b =
        JoinBytes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(e + i)),
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sm + i)));
    // Quadwords 0, 2 | 1, 3, so that the in-lane byte unpacks give values 0-15, then 16-31.
    const __m256i low = _mm256_permute4x64_epi64(b.low, 0xD8);
    const __m256i high = _mm256_permute4x64_epi64(b.high, 0xD8);
    WidenRuns(_mm256_unpacklo_epi8(low, high), _mm256_unpackhi_epi8(low, high), out);
  }
  DF11_AVX2 void Run16(int64_t i, __m256 out[4]) const {
    const JoinedBytes128 b =
        JoinBytes(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e + i)),
                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(sm + i)));
    WidenRuns(_mm256_set_m128i(_mm_unpackhi_epi8(b.low, b.high), _mm_unpacklo_epi8(b.low, b.high)),
              _mm256_setzero_si256(), out);
  }
  float operator()(int64_t i) const { return Bf16ToFloat(format::JoinBf16(e[i], sm[i])); }
  Df11Weights Row(int64_t offset) const { return {e + offset, sm + offset}; }
};

DF11_AVX2 inline float HorizontalSum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// R input rows at once (each W row is widened once for all of them). The loops over rows and
// vectors are unrolled so that the accumulators stay in registers.
template <int R, typename Weights>
DF11_AVX2 void MatVecAvx2Rows(const Weights& weights, size_t n, const MatVecInput& input,
                              int64_t first_row, float* y, int64_t out) {
  const int64_t in = input.in();
  const float* x[R];
  #pragma GCC unroll 4
  for (int r = 0; r < R; ++r) x[r] = input.row(first_row + r);
  for (size_t o = 0; o < n; ++o) {
    const Weights row = weights.Row(static_cast<int64_t>(o) * in);
    __m256 acc[R][4];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      #pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) acc[r][k] = _mm256_setzero_ps();
    }
    __m256 w[4];
    int64_t i = 0;
    for (; i + 32 <= in; i += 32) {
      row.Run32(i, w);
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        #pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          acc[r][k] = _mm256_fmadd_ps(w[k], _mm256_loadu_ps(x[r] + i + 8 * k), acc[r][k]);
        }
      }
    }
    if (i + 16 <= in) {
      row.Run16(i, w);
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        #pragma GCC unroll 4
        for (int k = 0; k < 2; ++k) {
          acc[r][k] = _mm256_fmadd_ps(w[k], _mm256_loadu_ps(x[r] + i + 8 * k), acc[r][k]);
        }
      }
      i += 16;
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      float sum = HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]),
                                              _mm256_add_ps(acc[r][2], acc[r][3])));
      for (int64_t t = i; t < in; ++t) sum = std::fma(row(t), x[r][t], sum);
      y[(first_row + r) * out + static_cast<int64_t>(o)] = sum;
    }
  }
}

// Input rows two at a time: more would spill the accumulators out of the 16 registers.
template <typename Weights>
void MatVecAvx2(const Weights& weights, size_t n, const MatVecInput& input, float* y,
                int64_t out) {
  int64_t r = 0;
  for (; r + 2 <= input.rows(); r += 2) MatVecAvx2Rows<2>(weights, n, input, r, y, out);
  if (r < input.rows()) MatVecAvx2Rows<1>(weights, n, input, r, y, out);
}

template <typename Weights>
void MatVecPortable(const Weights& weights, size_t n, const MatVecInput& input, float* y,
                    int64_t out) {
  const int64_t in = input.in();
  for (size_t o = 0; o < n; ++o) {
    const Weights row = weights.Row(static_cast<int64_t>(o) * in);
    for (int64_t r = 0; r < input.rows(); ++r) {
      y[r * out + static_cast<int64_t>(o)] = DotPortable(row, input.row(r), in);
    }
  }
}

const bool kHasAvx2Fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");

}  // namespace

void MatVecInput::Set(const float* x, int64_t rows, int64_t in) {
  rows_ = rows;
  in_ = in;
  values_.resize(rows * in);
  for (int64_t r = 0; r < rows; ++r) {
    const float* from = x + r * in;
    float* to = values_.data() + r * in;
    int64_t i = 0;
    for (; i + 16 <= in; i += 16) {
      for (int p = 0; p < 16; ++p) to[i + p] = from[i + kRunOrder[p]];
    }
    for (; i < in; ++i) to[i] = from[i];
  }
}

void MatVecBf16(const uint16_t* w, size_t n, const MatVecInput& input, float* y, int64_t out) {
  if (kHasAvx2Fma) {
    MatVecAvx2(Bf16Weights{w}, n, input, y, out);
  } else {
    MatVecPortable(Bf16Weights{w}, n, input, y, out);
  }
}

void MatVecDf11(const uint8_t* exponents, const uint8_t* sign_mantissa, size_t n,
                const MatVecInput& input, float* y, int64_t out) {
  if (kHasAvx2Fma) {
    MatVecAvx2(Df11Weights{exponents, sign_mantissa}, n, input, y, out);
  } else {
    MatVecPortable(Df11Weights{exponents, sign_mantissa}, n, input, y, out);
  }
}

void MatVecBf16Portable(const uint16_t* w, size_t n, const MatVecInput& input, float* y,
                        int64_t out) {
  MatVecPortable(Bf16Weights{w}, n, input, y, out);
}

void MatVecDf11Portable(const uint8_t* exponents, const uint8_t* sign_mantissa, size_t n,
                        const MatVecInput& input, float* y, int64_t out) {
  MatVecPortable(Df11Weights{exponents, sign_mantissa}, n, input, y, out);
}

bool MatVecUsesAvx2() { return kHasAvx2Fma; }

}  // namespace df11::runtime
