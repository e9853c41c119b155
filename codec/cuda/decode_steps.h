// The GPU decoder's per-thread and per-block steps, written once for the kernel
// (codec/cuda/huffman_decode.cu) and for the CPU harness that runs them thread by thread
// (tests/codec/gpu_emulation.cc, run by decoder_equivalence_test and official_fixtures_test). Plain C++ without CUDA; __host__ __device__ under nvcc.
//
// Design (one CTA per 4096-byte DF11 block, one thread per 32-byte segment of it):
//   - The resident layout adds, per segment, the element offset of its first code inside the
//     block (u16, built at load by BuildGpuLayout). Segment starts come from the official gaps
//     (every 64-bit chunk has a code start), so each thread knows where to start and how many
//     codes to decode: one decode pass, no count pass, no block-wide scan.
//   - A thread decodes its codes with an 11-bit multi-symbol table (up to 3 exponents a lookup)
//     in shared memory, falling back to the official LUT walk for long codes, and stores the
//     exponents in the CTA's shared staging buffer at their element offsets.
//   - After a barrier the CTA joins exponents with the sign/mantissa bytes and writes BF16 with
//     consecutive threads on consecutive elements (coalesced).
//   - Each thread checks that its codes end exactly where the next segment's first code starts
//     (or inside the stream, for the last code); a failure raises an error flag.
#ifndef DF11_CODEC_CUDA_DECODE_STEPS_H_
#define DF11_CODEC_CUDA_DECODE_STEPS_H_

#include <cstdint>

#include "codec/lut_walk.h"

namespace df11::codec::gpu {

inline constexpr int kSegmentBytes = 32;                   // stream bytes a thread decodes
inline constexpr int kSegmentsPerBlock = 4096 / kSegmentBytes;  // threads per CTA: 128
inline constexpr int kChunksPerSegment = kSegmentBytes / 8;
inline constexpr int kTableBits = 11;                      // multi-symbol table index bits
inline constexpr int kTableEntries = 1 << kTableBits;

// What a raised error flag of a DF11 decode launch means.
inline constexpr const char* kCorruptCodesMessage =
    "GPU decode: a thread's codes did not end where its unit's metadata says the next code "
    "starts (corrupt stream or layout)";
inline constexpr int kMaxSymbolsPerEntry = 3;
inline constexpr int kStreamPadBytes = 16;  // zero bytes after the stream: 3-word window loads
inline constexpr int kMaxBlockElements = 32768;
inline constexpr int kMaxLutRows = 18;

// Multi-symbol table entry: exponents in bits 0..23, count (0..3) in 24..25, bits used in 26..29.
DF11_HOST_DEVICE uint32_t EntryCount(uint32_t e) { return (e >> 24) & 3; }
DF11_HOST_DEVICE uint32_t EntryBits(uint32_t e) { return (e >> 26) & 15; }

// One resident unit, or the blocks [first_block, first_block + n_blocks) of it: pointers into
// device memory (host memory in the CPU harness). Blocks are numbered in the whole unit, so every
// pointer but `out` is the unit's own; out[0] holds element `out_first_element` (0 for a whole
// unit, positions[first_block] or less for a range).
struct UnitView {
  const uint32_t* stream;            // encoded_exponent, 4-byte aligned, + kStreamPadBytes zeros
  const uint8_t* sign_mantissa;      // n_elements
  const uint8_t* gaps;               // official packed 5-bit gaps, + 1 zero byte
  const uint32_t* positions;         // P[0..n_blocks]
  const uint16_t* segment_offsets;   // n_blocks * kSegmentsPerBlock (BuildGpuLayout)
  const uint32_t* table;             // kTableEntries multi-symbol entries (BuildGpuLayout)
  const uint8_t* luts;               // lut_rows * 256: decode rows, then the length row
  uint16_t* out;                     // BF16 values of the decoded blocks' elements
  uint32_t n_elements;               // of the whole unit
  uint32_t n_bytes;                  // of the whole unit's stream
  uint32_t n_blocks;                 // blocks to decode
  uint32_t lut_rows;
  uint32_t first_block = 0;
  uint32_t out_first_element = 0;
};

DF11_HOST_DEVICE uint32_t ByteSwap32(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, 0, 0x0123);
#else
  return __builtin_bswap32(x);
#endif
}

// 64 stream bits from bit `bitpos`, MSB-first, from three aligned 32-bit words. The stream's zero
// padding makes every read inside the allocation for bitpos < 8 n_bytes.
DF11_HOST_DEVICE uint64_t LoadWindow(const uint32_t* stream, uint64_t bitpos) {
  const uint64_t word = bitpos >> 5;
  const uint32_t shift = static_cast<uint32_t>(bitpos & 31);
  const uint64_t hi = (uint64_t{ByteSwap32(stream[word])} << 32) | ByteSwap32(stream[word + 1]);
  if (shift == 0) return hi;
  return (hi << shift) | (ByteSwap32(stream[word + 2]) >> (32 - shift));
}

// The 5-bit gap of chunk `chunk` (MSB-first fields; the array carries one byte of padding).
DF11_HOST_DEVICE uint32_t Gap(const uint8_t* gaps, uint64_t chunk) {
  const uint64_t bit = chunk * 5;
  const uint32_t two = (uint32_t{gaps[bit / 8]} << 8) | gaps[bit / 8 + 1];
  return (two >> (11 - bit % 8)) & 0x1F;
}

// First bit of segment `segment` (global index): its chunk's first code start.
DF11_HOST_DEVICE uint64_t SegmentStart(const UnitView& u, uint64_t segment) {
  return segment * (kSegmentBytes * 8) + Gap(u.gaps, segment * kChunksPerSegment);
}

// Per-thread step: decodes the codes of segment `s` of block `b` into `exps` (the block's staging,
// indexed from the block's first element), with the table and LUT rows at `table` and `luts`
// (shared memory on the GPU). Returns false if the codes do not end where the next code starts.
DF11_HOST_DEVICE bool DecodeSegment(const UnitView& u, const uint32_t* table, const uint8_t* luts,
                                    uint32_t b, uint32_t s, uint8_t* exps) {
  const uint64_t segment = uint64_t{b} * kSegmentsPerBlock + s;
  const uint32_t block_count = u.positions[b + 1] - u.positions[b];
  const uint32_t first = u.segment_offsets[segment];
  const uint32_t last = s + 1 < kSegmentsPerBlock ? u.segment_offsets[segment + 1] : block_count;
  if (last <= first) return last == first;
  const uint8_t* lengths = luts + 256 * (u.lut_rows - 1);
  uint64_t bitpos = SegmentStart(u, segment);
  uint8_t* out = exps + first;
  uint32_t remaining = last - first;
  const uint64_t total_bits = 8 * uint64_t{u.n_bytes};
  while (remaining >= kMaxSymbolsPerEntry) {
    if (bitpos >= total_bits) return false;  // corrupt: never read past the padding
    const uint64_t w = LoadWindow(u.stream, bitpos);
    const uint32_t e = table[w >> (64 - kTableBits)];
    const uint32_t n = EntryCount(e);
    if (n == 0) {
      int symbol = 0;
      const int length = WalkLutRows(luts, lengths, w, &symbol);
      if (length == 0) return false;
      *out++ = static_cast<uint8_t>(symbol);
      bitpos += length;
      --remaining;
      continue;
    }
    out[0] = static_cast<uint8_t>(e);  // up to three; the ones past n are rewritten later
    out[1] = static_cast<uint8_t>(e >> 8);
    out[2] = static_cast<uint8_t>(e >> 16);
    out += n;
    remaining -= n;
    bitpos += EntryBits(e);
  }
  while (remaining > 0) {
    if (bitpos >= total_bits) return false;
    int symbol = 0;
    const int length = WalkLutRows(luts, lengths, LoadWindow(u.stream, bitpos), &symbol);
    if (length == 0) return false;
    *out++ = static_cast<uint8_t>(symbol);
    bitpos += length;
    --remaining;
  }
  // The next code (of this block or a later one) starts at the next segment's first code.
  const uint32_t next_element = u.positions[b] + last;
  if (next_element < u.n_elements) return bitpos == SegmentStart(u, segment + 1);
  return bitpos <= total_bits && (bitpos + 7) / 8 == u.n_bytes;
}

// The layout pass (BuildSegmentOffsets), which builds GpuLayout::segment_offsets on the device from
// the uploaded stream, gaps and positions: one thread per segment counts the codes that start in
// it, then the block turns the counts into offsets.
//
// Per-thread step: the codes that start in segment `s` of block `b`, walking from the segment's
// first code start (its gap) to its end or the stream's end, whole table entries where all their
// codes end inside, else one LUT code at a time. Bits the tables do not decode stop the walk: the
// block step then finds the counts short.
DF11_HOST_DEVICE uint32_t CountSegment(const UnitView& u, const uint32_t* table,
                                       const uint8_t* luts, uint32_t b, uint32_t s) {
  const uint64_t segment = uint64_t{b} * kSegmentsPerBlock + s;
  const uint64_t boundary = (segment + 1) * (kSegmentBytes * 8);
  const uint64_t total_bits = 8 * uint64_t{u.n_bytes};
  const uint64_t end = boundary < total_bits ? boundary : total_bits;
  const uint8_t* lengths = luts + 256 * (u.lut_rows - 1);
  uint64_t bitpos = SegmentStart(u, segment);
  uint32_t count = 0;
  while (bitpos < end) {
    const uint64_t w = LoadWindow(u.stream, bitpos);
    const uint32_t e = table[w >> (64 - kTableBits)];
    if (EntryCount(e) > 0 && bitpos + EntryBits(e) <= end) {
      count += EntryCount(e);
      bitpos += EntryBits(e);
      continue;
    }
    int symbol = 0;
    const int length = WalkLutRows(luts, lengths, w, &symbol);
    if (length == 0) break;
    ++count;
    bitpos += length;
  }
  return count;
}

// Per-block step: block b's segment offsets (an exclusive sum of its segments' counts, written to
// `offsets`, kSegmentsPerBlock values). The counts must add up to the block's element count, except
// in a block that ends the unit, where codes read from the padding bits after the last element
// are dropped. Returns false when they do not add up.
DF11_HOST_DEVICE bool FinishBlockOffsets(const UnitView& u, uint32_t b, const uint32_t* counts,
                                         uint16_t* offsets) {
  const uint32_t block_count = u.positions[b + 1] - u.positions[b];
  uint32_t sum = 0;
  for (int s = 0; s < kSegmentsPerBlock; ++s) {
    offsets[s] = static_cast<uint16_t>(sum < block_count ? sum : block_count);
    sum += counts[s];
  }
  return u.positions[b + 1] == u.n_elements ? sum >= block_count : sum == block_count;
}

// Per-block step for thread `t` of `threads`: BF16 values of block b from the staged exponents.
DF11_HOST_DEVICE void JoinSlice(const UnitView& u, uint32_t b, const uint8_t* exps, uint32_t t,
                                uint32_t threads) {
  const uint32_t begin = u.positions[b];
  const uint32_t count = u.positions[b + 1] - begin;
  const uint8_t* sm = u.sign_mantissa + begin;
  uint16_t* out = u.out + (begin - u.out_first_element);
  for (uint32_t i = t; i < count; i += threads) {
    out[i] = static_cast<uint16_t>(((sm[i] & 0x80u) << 8) | (uint32_t{exps[i]} << 7) |
                                   (sm[i] & 0x7Fu));
  }
}

}  // namespace df11::codec::gpu

#endif  // DF11_CODEC_CUDA_DECODE_STEPS_H_
