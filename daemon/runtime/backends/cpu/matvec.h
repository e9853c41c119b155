// Matrix-vector products for decode steps (a few input rows): y[r, o] = W[o] · x[r], with W either
// BF16 or still split into DF11's two byte planes (exponents and sign/mantissa bytes, straight from
// the decoder). Both give the same bits for the same weights: each product is summed in one fixed
// order (32 fp32 lanes, fused multiply-adds, then a fixed reduction) whichever kernel runs, AVX2
// or portable, and whatever rows of W or of x are passed together.
//
//   MatVecInput input;
//   input.Set(x, rows, in);                 // once per product
//   MatVecBf16(w, n, input, y, out);        // any range of W rows, from any thread
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CPU_MATVEC_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CPU_MATVEC_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace df11::runtime {

// The input rows in the lane order the kernels read (each run of 16 values permuted, so that the
// kernels widen BF16 to fp32 with in-lane unpacks).
class MatVecInput {
 public:
  // x holds `rows` rows of `in` values.
  void Set(const float* x, int64_t rows, int64_t in);

  int64_t rows() const { return rows_; }
  int64_t in() const { return in_; }
  const float* row(int64_t r) const { return values_.data() + r * in_; }
  size_t capacity_bytes() const { return values_.capacity() * sizeof(float); }

 private:
  int64_t rows_ = 0, in_ = 0;
  std::vector<float> values_;
};

// y[r * out + k] = W[k] · x[r] for the n BF16 rows of W at w (each input.in() long).
void MatVecBf16(const uint16_t* w, size_t n, const MatVecInput& input, float* y, int64_t out);

// As MatVecBf16 for W[k] = format::JoinBf16(exponents[i], sign_mantissa[i]).
void MatVecDf11(const uint8_t* exponents, const uint8_t* sign_mantissa, size_t n,
                const MatVecInput& input, float* y, int64_t out);

// The portable kernels, which define the arithmetic; the AVX2 ones above match them bit for bit
// (tested). Exposed for that test.
void MatVecBf16Portable(const uint16_t* w, size_t n, const MatVecInput& input, float* y,
                        int64_t out);
void MatVecDf11Portable(const uint8_t* exponents, const uint8_t* sign_mantissa, size_t n,
                        const MatVecInput& input, float* y, int64_t out);

// Whether MatVecBf16/MatVecDf11 run the AVX2 kernels on this CPU.
bool MatVecUsesAvx2();

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CPU_MATVEC_H_
