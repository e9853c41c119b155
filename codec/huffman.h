// The exponent Huffman code of a DF11 unit, built exactly as the official compressor builds it:
// dahuffman 0.4.2's tree (with an EOF pseudo-symbol of frequency 1) and the official 32-bit length
// limiter. The code is not canonical; reproducing the tree is what makes our bitstreams and LUTs
// byte-identical to the official ones. See codec/FORMAT.md, "Huffman code".
//
//   Histogram h = CountExponents(weights);
//   DF11_ASSIGN_OR_RETURN(HuffmanCode code, BuildOfficialCode(h));
#ifndef DF11_CODEC_HUFFMAN_H_
#define DF11_CODEC_HUFFMAN_H_

#include <array>
#include <cstdint>
#include <span>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace df11::codec {

// counts[e] = number of BF16 values whose 8-bit exponent is e.
using Histogram = std::array<uint64_t, 256>;

// Adds the exponents of `bf16` (raw BF16 bit patterns) to `histogram`.
void CountExponents(std::span<const uint16_t> bf16, Histogram& histogram);

// A histogram that worker threads add their counts to, each once per range of weights.
class SharedHistogram {
 public:
  void Add(const Histogram& counts) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (size_t e = 0; e < counts.size(); ++e) counts_[e] += counts[e];
  }
  Histogram Total() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return counts_;
  }

 private:
  mutable absl::Mutex mu_;
  Histogram counts_ ABSL_GUARDED_BY(mu_){};
};

// One code word: the low `length` bits of `bits`, most significant first. length 0 = no code.
struct CodeWord {
  uint32_t bits = 0;
  uint8_t length = 0;
};

struct HuffmanCode {
  std::array<CodeWord, 256> symbols{};  // by exponent; length 0 for absent exponents
  CodeWord eof;                         // the EOF pseudo-symbol, used only for tail padding
  bool limited = false;                 // the 32-bit limiter changed the code

  int max_length() const;  // longest code, EOF included
};

// Builds the official code for `histogram`. kInvalidArgument if the histogram is empty or holds an
// exponent >= 240 (those values are LUT pointers and cannot be coded).
//
// The limiter raises the k smallest counts to 1 for k = 2, 3, ... until every code fits 32 bits.
// Where counts tie at the k-th place, numpy's argpartition (official) and this implementation
// (smallest exponent first) may choose different symbols; the code is valid either way, only byte
// identity with the official file is lost. numpy dispatches int64 argpartition to SIMD selection
// kernels chosen by the CPU, so the official choice at ties is not even the same on every machine.
absl::StatusOr<HuffmanCode> BuildOfficialCode(const Histogram& histogram);

}  // namespace df11::codec

#endif  // DF11_CODEC_HUFFMAN_H_
