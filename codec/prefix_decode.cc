#include "codec/prefix_decode.h"

#include <algorithm>

#include "codec/format.h"

namespace df11::codec {

PrefixCodes DecodePrefix(const Unit& unit, uint32_t prefix, int prefix_bits, int max_symbols) {
  const uint8_t* luts = unit.lut_row(0);
  const uint8_t* lengths = unit.code_lengths();
  const uint64_t window = uint64_t{prefix} << (64 - prefix_bits);
  PrefixCodes out;
  while (out.count < max_symbols) {
    const uint64_t w = window << out.bits;
    const uint8_t* row = luts;
    int level = 0;
    int v = row[w >> 56];
    while (v >= format::kFirstPointerValue && level + 1 < format::kMaxLookups) {
      ++level;
      row = luts + 256 * (256 - v);
      v = row[(w >> (56 - 8 * level)) & 0xFF];
    }
    if (v >= format::kFirstPointerValue) break;
    const int length = lengths[v];
    const int last_bits = length - 8 * level;  // bits of the code read from the last row's key
    if (length == 0 || out.bits + length > prefix_bits || last_bits < 1 || last_bits > 8) break;
    // The code's own bits decide the symbol only if every key sharing them gives the same value.
    const int key = static_cast<int>((w >> (56 - 8 * level)) & 0xFF);
    const int first = key & ~((1 << (8 - last_bits)) - 1);
    if (!std::all_of(row + first, row + first + (1 << (8 - last_bits)),
                     [v](uint8_t x) { return x == v; })) {
      break;
    }
    out.symbols[out.count++] = static_cast<uint8_t>(v);
    out.bits += length;
  }
  return out;
}

}  // namespace df11::codec
