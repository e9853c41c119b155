// The per-lane steps of the fused decode + matrix product over codec::TiledMatrix, written once
// for the kernels (codec/cuda/tiled_gemv.cu) and for the CPU harness that runs them lane by lane
// (tests/codec/tiled_matrix_test.cc). Plain C++ without CUDA; __host__ __device__ under nvcc.
//
// Design. The matrix is cut into tiles of 16 rows x 16 columns, the A operand of one tensor-core
// product `mma.m16n8k16` (BF16 in, fp32 accumulation, up to 8 columns of X at once). Lane l of a
// warp holds 8 elements of every tile, in the order of that instruction's A fragment (SlotRow,
// SlotCol), so a decoded tile never leaves the registers: the lane decodes its 8 exponents, joins
// them to its 8 sign/mantissa bytes into 4 registers of two BF16 values, and the warp multiplies.
//   - Exponents: one prefix code per matrix, at most 6 bits per code (escape code plus raw byte
//     for rare exponents). A lane's codes of a segment (up to 32 tiles of a band of 16 rows) are
//     one bit stream of its own, so lanes never wait for each other. The warp first copies the
//     segment's streams (about 2.8 KB) into shared memory with coalesced loads; then a lane reads
//     a 64-bit window of its stream per tile (three 32-bit loads, funnel-shifted) and resolves its
//     8 codes two at a time with a 4096-entry table indexed by 12 bits (two codes of at most 6
//     bits always fit).
//   - A tile in which any lane meets an escape is decoded again code by code (rare on weights).
//   - Sign/mantissa bytes: 8 per lane per tile, stored so that one 16-byte load gives a lane two
//     tiles and a LOP3 puts two bytes under two exponents (JoinTile).
#ifndef DF11_CODEC_CUDA_TILED_STEPS_H_
#define DF11_CODEC_CUDA_TILED_STEPS_H_

#include <cstdint>

#include "codec/lut_walk.h"  // DF11_HOST_DEVICE, LoadReadOnly

namespace df11::codec::gpu {

inline constexpr int kTileRows = 16;
inline constexpr int kTileCols = 16;
inline constexpr int kTiledLanes = 32;
inline constexpr int kTiledSlots = 8;  // elements of a tile per lane
inline constexpr int kTiledMaxCodeLength = 6;
inline constexpr int kTiledPairBits = 2 * kTiledMaxCodeLength;
inline constexpr int kTiledTableEntries = 1 << kTiledPairBits;
inline constexpr int kTilesPerSegment = 32;
// Sign/mantissa bytes of one tile (8 per lane).
inline constexpr int kTileBytes = kTileRows * kTileCols;
// Zero words after the last stream: a window read at a lane's end reads 3 words, and the
// code-by-code path of an inconsistent stream at most 8 codes of 14 bits further before the
// kernel stops it.
inline constexpr int kTiledWordsRoom = 8;

// Where slot `slot` (0..7) of lane `lane` sits in its tile: the A fragment of mma.m16n8k16 (PTX
// ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"): register slot / 2 holds
// slots 2p and 2p + 1, two neighbouring columns of one row.
DF11_HOST_DEVICE int SlotRow(int lane, int slot) { return (lane >> 2) + 8 * ((slot >> 1) & 1); }
DF11_HOST_DEVICE int SlotCol(int lane, int slot) {
  return 2 * (lane & 3) + (slot & 1) + 8 * (slot >> 2);
}
// Which of the lane's 8 bytes of a tile holds slot `slot`'s sign and mantissa: the first 32-bit
// word holds slots 0, 2, 1, 3 (bytes 0..3), the second 4, 6, 5, 7, so that registers 0 and 1 take
// their bytes from the word and the word shifted by 8 (JoinTile).
DF11_HOST_DEVICE int SlotByte(int slot) {
  return 4 * (slot >> 2) + ((slot >> 1) & 1) + 2 * (slot & 1);
}
// Byte offset of lane `lane`'s 8 bytes of tile `tile` of band `band`: each pair of tiles of a band
// holds 16 bytes per lane (one 16-byte load), the even tile's first.
DF11_HOST_DEVICE uint64_t SignMantissaOffset(uint64_t band, uint32_t tiles_per_band, uint32_t tile,
                                             int lane) {
  return (band * tiles_per_band + (tile & ~1u)) * kTileBytes + lane * 16 + (tile & 1u) * 8;
}

// A matrix's code, kTiledCodes entries, one per 6-bit prefix: the code that the prefix starts
// with, its exponent in bits 0..7, its length in bits 8..11, bit 12 set for the escape code.
inline constexpr int kTiledCodes = 1 << kTiledMaxCodeLength;
DF11_HOST_DEVICE uint32_t CodeExponent(uint16_t code) { return code & 0xFFu; }
DF11_HOST_DEVICE uint32_t CodeLength(uint16_t code) { return (code >> 8) & 15u; }
DF11_HOST_DEVICE bool CodeEscapes(uint16_t code) { return (code & 0x1000u) != 0; }

// Pair table entry, for the 12 bits at the front of a lane's stream: bits 0..3 the two codes'
// length, 7..14 the first code's exponent, 15 set when the first code is the escape, 16..19 the
// first code's length, 23..30 the second code's exponent, 31 set when it is the escape. The
// exponents sit where a BF16 pair has them; the other bits are overwritten by JoinTile. The
// kernels build the table in shared memory from the matrix's 64 codes.
inline constexpr uint32_t kPairEscapes = 0x80008000u;
DF11_HOST_DEVICE uint32_t PairLength(uint32_t entry) { return entry & 15u; }
DF11_HOST_DEVICE uint32_t FirstLength(uint32_t entry) { return (entry >> 16) & 15u; }
DF11_HOST_DEVICE uint32_t FirstExponent(uint32_t entry) { return (entry >> 7) & 0xFFu; }
DF11_HOST_DEVICE bool FirstEscapes(uint32_t entry) { return (entry & 0x8000u) != 0; }
DF11_HOST_DEVICE uint32_t PairEntry(const uint16_t* codes, uint32_t index) {
  const uint16_t first = LoadReadOnly(codes + (index >> kTiledMaxCodeLength));
  const uint32_t n0 = CodeLength(first);
  const uint32_t rest = (index << n0) & (kTiledTableEntries - 1);
  const uint16_t second = LoadReadOnly(codes + (rest >> kTiledMaxCodeLength));
  return (n0 + CodeLength(second)) | CodeExponent(first) << 7 | uint32_t{CodeEscapes(first)} << 15 |
         n0 << 16 | CodeExponent(second) << 23 | uint32_t{CodeEscapes(second)} << 31;
}

// The top 32 bits of (hi:lo) << shift, shift in [0, 32).
DF11_HOST_DEVICE uint32_t FunnelLeft(uint32_t lo, uint32_t hi, uint32_t shift) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_l(lo, hi, shift);
#else
  return shift == 0 ? hi : (hi << shift) | (lo >> (32 - shift));
#endif
}

// 64 bits of a stream from bit `bit` on (MSB-first in 32-bit words): hi holds the first 32.
// `words` may be shared memory (the kernels stage a segment's streams there) or global memory.
struct Window {
  uint32_t hi, lo;
};
template <typename Bit>  // uint64_t, or uint32_t for positions inside a segment
DF11_HOST_DEVICE Window ReadWindow(const uint32_t* words, Bit bit) {
  const Bit w = bit >> 5;
  const uint32_t shift = static_cast<uint32_t>(bit & 31);
  const uint32_t a = words[w], b = words[w + 1], c = words[w + 2];
  return {FunnelLeft(b, a, shift), FunnelLeft(c, b, shift)};
}

// A lane's 8 codes of a tile from its window, two per lookup in `table`: the 4 pair entries into
// `pairs`, and the bits they take. Right unless an entry has an escape bit (kPairEscapes in
// `escapes`): then DecodeCodesOneByOne must redo the tile. `table`: the pair entries of all
// kTiledTableEntries indices (PairEntry). 8 codes take at most 48 bits, so the
// window holds them all.
DF11_HOST_DEVICE uint32_t DecodePairs(const uint32_t* table, Window w, uint32_t (&pairs)[4],
                                      uint32_t& escapes) {
  uint32_t hi = w.hi, lo = w.lo, used = 0, flags = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int p = 0; p < 4; ++p) {
    const uint32_t entry = table[hi >> (32 - kTiledPairBits)];
    const uint32_t n = PairLength(entry);
    hi = FunnelLeft(lo, hi, n);
    lo <<= n;
    used += n;
    pairs[p] = entry;
    flags |= entry;
  }
  escapes = flags & kPairEscapes;
  return used;
}

// The same 8 codes from bit `bit` of `words`, one at a time, escapes included (an escape code is
// followed by the exponent's 8 bits): the pairs' exponents into `pairs` (bits 7..14 and 23..30),
// and the bits taken.
template <typename Bit>
DF11_HOST_DEVICE uint32_t DecodeCodesOneByOne(const uint32_t* table, const uint32_t* words, Bit bit,
                                              uint32_t (&pairs)[4]) {
  uint32_t used = 0;
  for (int p = 0; p < 4; ++p) {
    uint32_t pair = 0;
    for (int h = 0; h < 2; ++h) {
      const Window w = ReadWindow(words, bit + used);
      const uint32_t entry = table[w.hi >> (32 - kTiledPairBits)];
      const uint32_t n = FirstLength(entry);
      uint32_t exponent = FirstExponent(entry);
      used += n;
      if (FirstEscapes(entry)) {
        exponent = FunnelLeft(w.lo, w.hi, n) >> 24;
        used += 8;
      }
      pair |= exponent << (7 + 16 * h);
    }
    pairs[p] = pair;
  }
  return used;
}

// (a & mask) | (b & ~mask): one LOP3.
DF11_HOST_DEVICE uint32_t Mux(uint32_t mask, uint32_t a, uint32_t b) {
  return (a & mask) | (b & ~mask);
}

// The lane's 4 A registers of a tile (two BF16 each, the lower slot in the low half) from its
// 8 sign/mantissa bytes (u0, u1; SlotByte order) and the 4 pair entries.
DF11_HOST_DEVICE void JoinTile(uint32_t u0, uint32_t u1, const uint32_t (&pairs)[4],
                               uint32_t (&a)[4]) {
  constexpr uint32_t kMantissas = 0x007F007Fu, kSigns = 0x80008000u;
  a[0] = Mux(kSigns, u0 << 8, Mux(kMantissas, u0, pairs[0]));
  a[1] = Mux(kSigns, u0, Mux(kMantissas, u0 >> 8, pairs[1]));
  a[2] = Mux(kSigns, u1 << 8, Mux(kMantissas, u1, pairs[2]));
  a[3] = Mux(kSigns, u1, Mux(kMantissas, u1 >> 8, pairs[3]));
}

// The B fragment of mma.m16n8k16 (16 x 8, K x N) for tile `tile` of a band: register r of lane
// l holds X[k][n] and X[k + 1][n] for k = 2 (l & 3) + 8 r and n = l / 4 (low half first), where
// X[k][n] is x[n * ldx + 16 tile + k]: column n of X is row n of `x`. Columns from n_cols on are
// zeros. `x` 4-byte aligned, ldx even.
DF11_HOST_DEVICE void LoadXBf16(const uint16_t* x, uint64_t ldx, int n_cols, uint32_t tile,
                                int lane, uint32_t (&b)[2]) {
  const int n = lane >> 2;
  b[0] = b[1] = 0;
  if (n >= n_cols) return;
  const uint16_t* p = x + n * ldx + uint64_t(tile) * kTileCols + 2 * (lane & 3);
  b[0] = LoadReadOnly(reinterpret_cast<const uint32_t*>(p));
  b[1] = LoadReadOnly(reinterpret_cast<const uint32_t*>(p + 8));
}

// fp32 values as the sum of three BF16 values, exactly (each takes the next 8 significant bits,
// rounded down, so each remainder is exact): the B fragments of fp32 x for three products. Values
// whose remainders fall below BF16's smallest normal lose those bits, as in any fp32 product.
DF11_HOST_DEVICE void LoadXF32(const float* x, uint64_t ldx, int n_cols, uint32_t tile, int lane,
                               uint32_t (&b)[3][2]) {
  const int n = lane >> 2;
  for (int part = 0; part < 3; ++part) b[part][0] = b[part][1] = 0;
  if (n >= n_cols) return;
  const float* p = x + n * ldx + uint64_t(tile) * kTileCols + 2 * (lane & 3);
  for (int r = 0; r < 2; ++r) {
    for (int h = 0; h < 2; ++h) {
      float rest = LoadReadOnly(p + 8 * r + h);
      for (int part = 0; part < 3; ++part) {
        const uint32_t top = FloatBits(rest) & 0xFFFF0000u;
        b[part][r] |= (top >> 16) << (16 * h);
        rest -= BitsFloat(top);
      }
    }
  }
}

// Where accumulator register r (0..3) of lane `lane` sits in the 16 x 8 result of a band: row
// (of the band's 16) and column (of X).
DF11_HOST_DEVICE int AccRow(int lane, int r) { return (lane >> 2) + 8 * (r >> 1); }
DF11_HOST_DEVICE int AccCol(int lane, int r) { return 2 * (lane & 3) + (r & 1); }

// One matrix resident in device memory (host memory in the CPU harness), codec::TiledMatrix's
// arrays. rows and cols are multiples of 16 and 32.
struct TiledView {
  const uint32_t* words;         // the lanes' code streams, kTiledWordsRoom words of room after
  const uint8_t* sign_mantissa;  // kTileBytes per tile, bands in order (SignMantissaOffset)
  const uint64_t* segment_bits;  // first bit of each segment; n_segments + 1 entries
  const uint16_t* lane_bits;     // bits of each lane's stream, 32 per segment
  const uint16_t* codes;         // kTiledCodes entries
  uint32_t rows;
  uint32_t cols;
};

// One matrix of a decode launch (codec/gpu_tiled.h DecodeTiled): W into out[r * ld + c] (device
// memory, BF16).
struct TiledDecodeView {
  TiledView matrix;
  uint16_t* out;
  uint64_t ld;
};

DF11_HOST_DEVICE uint32_t TilesPerBand(const TiledView& v) { return v.cols / kTileCols; }
DF11_HOST_DEVICE uint32_t SegmentsPerBand(uint32_t tiles_per_band) {
  return (tiles_per_band + kTilesPerSegment - 1) / kTilesPerSegment;
}
DF11_HOST_DEVICE uint32_t SegmentsPerBand(const TiledView& v) {
  return SegmentsPerBand(TilesPerBand(v));
}
DF11_HOST_DEVICE uint32_t Bands(const TiledView& v) { return v.rows / kTileRows; }

}  // namespace df11::codec::gpu

#endif  // DF11_CODEC_CUDA_TILED_STEPS_H_
