// A length-limited prefix code for the exponents of a unit or matrix, shared by the in-memory
// layouts that re-encode DF11's exponents (codec::InterleavedUnit, codec::TiledMatrix): the most
// frequent exponents get Huffman codes of at most `max_length` bits, the rest share one escape
// code and are stored as raw bytes beside it.
//
//   ExponentCode code = ExponentCode::Choose(histogram, /*max_length=*/6, /*max_coded=*/31);
//   acc = acc << code.length_of[e] | code.value_of[e];   // MSB-first
//   if (code.escaped(e)) ... store e itself
#ifndef DF11_CODEC_EXPONENT_CODE_H_
#define DF11_CODEC_EXPONENT_CODE_H_

#include <array>
#include <cstdint>
#include <vector>

namespace df11::codec {

struct ExponentCode {
  // Of `histogram` (exponent counts), the number m of most frequent exponents to code, at most
  // `max_coded`, and their optimal code lengths of at most `max_length` bits (1 <= max_length
  // <= 15), that store the histogram in the fewest bits, each escape counting its 8 raw bits
  // plus `escape_cost_bits` (what a decoder's slow path for escapes is worth avoiding).
  // Canonical code values. Depends on the histogram only (ties by exponent), so every builder of
  // the same weights gets the same code.
  static ExponentCode Choose(const std::array<uint64_t, 256>& histogram, int max_length,
                             int max_coded, double escape_cost_bits = 0);

  int m = 0;                        // coded exponents; symbol m is the escape
  std::vector<uint8_t> exponents;   // of symbols 0 .. m-1, most frequent first
  std::vector<int> lengths;         // of symbols 0 .. m
  std::vector<uint32_t> values;     // of symbols 0 .. m, MSB-first
  std::array<uint8_t, 256> symbol;  // exponent -> symbol (m: escaped)
  // Per exponent: the length and value of its code (the escape's for escaped exponents).
  std::array<uint8_t, 256> length_of;
  std::array<uint32_t, 256> value_of;

  bool escaped(uint8_t exponent) const { return symbol[exponent] == m; }
  // Bits that coding `histogram` takes, escape bytes included.
  uint64_t Bits(const std::array<uint64_t, 256>& histogram) const;
};

}  // namespace df11::codec

#endif  // DF11_CODEC_EXPONENT_CODE_H_
