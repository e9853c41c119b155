// Constants of the DFloat11 (DF11) on-disk format. codec/FORMAT.md describes every field; this
// header is the only place its numbers appear in code, and the two change together.
#ifndef DF11_CODEC_FORMAT_H_
#define DF11_CODEC_FORMAT_H_

#include <bit>
#include <cstddef>
#include <cstdint>

namespace df11::format {

// One GPU thread of the official kernel owns one 8-byte chunk of the exponent bitstream; a block of
// 512 threads owns 4096 bytes. Both numbers are baked into the layout of `gaps` and
// `output_positions`, so df11d accepts no other values in dfloat11_config.
inline constexpr int kThreadsPerBlock = 512;
inline constexpr int kBytesPerThread = 8;
inline constexpr size_t kBytesPerBlock = size_t{kThreadsPerBlock} * kBytesPerThread;  // 4096
inline constexpr size_t kBitsPerChunk = size_t{kBytesPerThread} * 8;                  // 64
inline constexpr size_t kBitsPerBlock = kBytesPerBlock * 8;                           // 32768

// `gaps`: one 5-bit field per chunk, MSB-first, padded to whole blocks: 512 * 5 / 8 bytes a block.
inline constexpr int kGapBits = 5;
inline constexpr size_t kGapBytesPerBlock = size_t{kThreadsPerBlock} * kGapBits / 8;  // 320

// Huffman codes, EOF included, are 1..32 bits long.
inline constexpr int kMaxCodeLength = 32;

// LUT rows are 256 bytes. A decode-row value v >= 240 is a pointer to row 256 - v (rows 1..16); a
// value below 240 is a symbol. The last row holds code lengths. So 2 <= n_luts <= 18, and
// exponents 240..255 (|x| >= 2^113, Inf, NaN) cannot be coded.
inline constexpr int kLutRowBytes = 256;
inline constexpr int kFirstPointerValue = 240;
inline constexpr int kMaxPointerRows = 16;
inline constexpr int kMinLutRows = 2;
inline constexpr int kMaxLutRows = kMaxPointerRows + 2;  // root + 16 pointer rows + length row
inline constexpr int kMaxLookups = 4;                    // 32-bit codes resolve in 4 byte lookups

// Units are below 2^31 elements and bytes (the official kernel takes `int` sizes).
inline constexpr uint64_t kMaxUnitElements = (uint64_t{1} << 31) - 1;

// Tensor names of a unit U are "U." + one of these.
inline constexpr char kLuts[] = "luts";
inline constexpr char kEncodedExponent[] = "encoded_exponent";
inline constexpr char kSignMantissa[] = "sign_mantissa";
inline constexpr char kOutputPositions[] = "output_positions";
inline constexpr char kGaps[] = "gaps";
inline constexpr char kSplitPositions[] = "split_positions";

// config.json
inline constexpr char kConfigKey[] = "dfloat11_config";
inline constexpr char kWriterVersion[] = "0.5.0";

// Number of 4096-byte blocks covering `n_bytes` of bitstream.
constexpr size_t NumBlocks(size_t n_bytes) {
  return (n_bytes + kBytesPerBlock - 1) / kBytesPerBlock;
}

// BF16 split: the exponent is the Huffman symbol; sign and 7 mantissa bits share one byte.
constexpr uint8_t Exponent(uint16_t bf16) { return static_cast<uint8_t>((bf16 >> 7) & 0xFF); }
constexpr uint8_t SignMantissa(uint16_t bf16) {
  return static_cast<uint8_t>(((bf16 >> 8) & 0x80) | (bf16 & 0x7F));
}
// A BF16 value as fp32: the BF16 bits are the top half of the fp32 bits.
constexpr float Bf16ToFloat(uint16_t bf16) { return std::bit_cast<float>(uint32_t{bf16} << 16); }
// The BF16 value nearest to `f` (ties to even), as GPUs round; a NaN stays a (quiet) NaN.
inline uint16_t FloatToBf16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (f != f) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}
constexpr uint16_t JoinBf16(uint8_t exponent, uint8_t sign_mantissa) {
  return static_cast<uint16_t>(((sign_mantissa & 0x80u) << 8) | (unsigned{exponent} << 7) |
                               (sign_mantissa & 0x7Fu));
}

}  // namespace df11::format

#endif  // DF11_CODEC_FORMAT_H_
