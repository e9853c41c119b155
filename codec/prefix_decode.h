// Reading codes from a DF11 bitstream: the bounded window read, the LUT walk of one code, and
// decoding several codes at once from a short prefix (the basis of the multi-symbol tables of the
// CPU and GPU decoders).
#ifndef DF11_CODEC_PREFIX_DECODE_H_
#define DF11_CODEC_PREFIX_DECODE_H_

#include <array>
#include <cstdint>
#include <cstring>

#include "codec/format.h"
#include "codec/lut_walk.h"
#include "codec/unit.h"

namespace df11::codec {

// 64 stream bits starting at bit `bitpos`, MSB-first; bits past the end of the stream read as 0.
// At least the 57 leading bits are stream bits. Never reads outside data[0, n_bytes).
inline uint64_t Window(const uint8_t* data, size_t n_bytes, uint64_t bitpos) {
  const uint64_t byte = bitpos >> 3;
  uint64_t v = 0;
  if (byte + 8 <= n_bytes) {
    std::memcpy(&v, data + byte, 8);
  } else if (byte < n_bytes) {
    std::memcpy(&v, data + byte, n_bytes - byte);
  }
  return __builtin_bswap64(v) << (bitpos & 7);
}

// The LUT walk of one code at the top of `window` (codec/FORMAT.md, "Decoding one symbol"). Returns
// the code length and sets `symbol`, or returns 0 when the tables give no valid code: a pointer
// after four lookups, or a symbol without a length. Pointer targets were bounds-checked by
// Unit::Validate, so every row read is inside the tables.
inline int WalkLut(const Unit& unit, uint64_t window, int& symbol) {
  return WalkLutRows(unit.lut_row(0), unit.code_lengths(), window, &symbol);
}

struct PrefixCodes {
  std::array<uint8_t, 16> symbols{};
  int count = 0;  // codes decoded
  int bits = 0;   // bits they use
};

// The codes at the top of the `prefix_bits`-bit value `prefix` (prefix_bits <= 16), at most
// `max_symbols` (<= 16) of them, exactly as the LUT walk of codec/FORMAT.md decodes them, stopping
// at the first code whose walk result could depend on bits past the prefix (a long code, or
// irregular tables). A table built from this decodes every stream exactly as the walk does.
PrefixCodes DecodePrefix(const Unit& unit, uint32_t prefix, int prefix_bits, int max_symbols);

}  // namespace df11::codec

#endif  // DF11_CODEC_PREFIX_DECODE_H_
