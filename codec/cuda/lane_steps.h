// The GPU decoder of codec::LaneUnit, the lane-stream layout: its per-lane steps, written once for
// the kernel (codec/cuda/lane_decode.cu) and for the CPU harness that runs them lane by lane
// (tests/codec/lane_unit_test.cc). Plain C++ without CUDA; __host__ __device__ under nvcc.
//
// Design (docs/PERFORMANCE.md, "Decoder v3"): a unit is cut into segments of 8192 weights; one warp
// decodes one segment. Lane l of the warp owns, in each group of 256 consecutive weights, the 8
// weights [8l, 8l + 8): one 8-byte load of their sign/mantissa bytes and one 16-byte store of
// their BF16 values, and a warp instruction covers 256 consecutive weights. Each lane has a bit
// stream of its own: its 256 exponents' codes (a prefix code of at most 8 bits, resolved by one
// lookup of the top 8 bits of its buffer in a 256-entry table; rare exponents are an escape code
// followed by their 8 raw bits). The segment's streams are stored as rows of 32 words, lane l's
// k-th word in column l of row k, every lane padded to the segment's longest, so the warp's k-th
// words are one 128-byte row. A lane's buffer holds 64 bits and the word after them, refilled
// once per 4 codes (4 codes take at most 32 bits), so no load is on the chain of lookups.
//
// Bounds: a lane reads rows of its own segment only (past the last row it reads the last again),
// so a corrupt stream never reads outside the unit; it then consumes more bits than its segment
// holds, or its longest lane ends before the last row, and the launch's error flag is raised.
#ifndef DF11_CODEC_CUDA_LANE_STEPS_H_
#define DF11_CODEC_CUDA_LANE_STEPS_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "codec/lut_walk.h"

namespace df11::codec::gpu {

inline constexpr int kLaneWarp = 32;                            // lanes of a segment
inline constexpr int kLaneWeights = 8;                          // a lane's weights per group
inline constexpr int kLaneSteps = 256;                          // codes per lane per segment
inline constexpr int kLaneGroup = kLaneWarp * kLaneWeights;     // 256 weights
inline constexpr int kLaneSegment = kLaneWarp * kLaneSteps;     // 8192 weights
inline constexpr int kLaneGroups = kLaneSteps / kLaneWeights;   // 32 groups per segment
inline constexpr int kLaneCodeBits = 8;
inline constexpr int kLaneTableEntries = 1 << kLaneCodeBits;
// Table entry: the code's length << 16 | the exponent << 7 (where a BF16 holds it), or, for the
// escape code, length << 16 | kLaneEscape (the exponent's 8 raw bits follow the code).
inline constexpr uint32_t kLaneEscape = 0x8000;

DF11_HOST_DEVICE uint32_t LaneEntry(int length, uint32_t exponent) {
  return uint32_t(length) << 16 | exponent << 7;
}

// One resident lane-stream unit, or a range of its segments: pointers into device memory (host
// memory in the CPU harness).
struct LaneView {
  const uint32_t* words;          // the unit's words
  const uint32_t* segment_words;  // n_segments_total + 1: each segment's first word; then the end
  const uint8_t* sign_mantissa;   // the unit's bytes, readable up to the segments' end + 256
  const uint32_t* table;          // kLaneTableEntries entries
  uint16_t* out;                  // element first_segment * kLaneSegment; nullptr: check only
  uint64_t n_elements;            // of the whole unit: stores stop there
  uint32_t first_segment;
  uint32_t n_segments;
};

// Views one decode launch takes at most (they are the kernel's parameters), and the bytes of
// device workspace it needs: its error flag.
inline constexpr size_t kMaxLaneViews = 64;
constexpr size_t LaneWorkspaceBytes() { return 16; }

// `a` and `b`'s bytes picked by the selector `s`, as the PRMT instruction does (__byte_perm).
DF11_HOST_DEVICE uint32_t BytePerm(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(a, b, s);
#else
  const uint64_t x = uint64_t{b} << 32 | a;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= uint32_t((x >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
  return r;
#endif
}

// Two BF16 values in one word: sign/mantissa bytes picked from `sm4` by `sel` (0x1100: bytes 0
// and 1; 0x3322: bytes 2 and 3), each spread to both bytes of its half and masked to sign and
// mantissa, joined with the exponents of entries `a` (low half) and `b` (high half).
DF11_HOST_DEVICE uint32_t JoinPair(uint32_t sm4, uint32_t sel, uint32_t a, uint32_t b) {
  return (BytePerm(sm4, 0, sel) & 0x807F807Fu) | BytePerm(a, b, 0x5410);
}

// A lane's bits: the next at bit 63 of `buffer`, `held` of them valid; `next`, the word after
// them; `row`, the row of the word to load after that. `consumed` counts the bits of its codes.
struct LaneState {
  uint64_t buffer;
  int held;
  uint32_t next;
  uint32_t row;
  uint32_t consumed;
};

// Lane `lane`'s word of row `row` of a segment of `rows` rows at `segment` (the last row past the
// end).
DF11_HOST_DEVICE uint32_t LaneWord(const uint32_t* segment, uint32_t rows, uint32_t row, int lane) {
  const uint32_t r = row < rows ? row : rows - 1;
  return LoadReadOnly(segment + uint64_t{r} * kLaneWarp + lane);
}

DF11_HOST_DEVICE void LaneStart(LaneState& s, const uint32_t* segment, uint32_t rows, int lane) {
  s.buffer = uint64_t{LaneWord(segment, rows, 0, lane)} << 32 | LaneWord(segment, rows, 1, lane);
  s.held = 64;
  s.next = LaneWord(segment, rows, 2, lane);
  s.row = 3;
  s.consumed = 0;
}

// Before each 4 codes: at least 32 bits afterwards.
DF11_HOST_DEVICE void LaneRefill(LaneState& s, const uint32_t* segment, uint32_t rows, int lane) {
  if (s.held < 32) {
    s.buffer |= uint64_t{s.next} << (32 - s.held);
    s.held += 32;
    s.next = LaneWord(segment, rows, s.row, lane);
    ++s.row;
  }
}

// One code: its table entry, an escape resolved to its raw exponent (which refills first: an
// escape takes up to 16 bits, and the refill keeps 8 per code left for the others of the 4).
DF11_HOST_DEVICE uint32_t LaneCode(LaneState& s, const uint32_t* table, const uint32_t* segment,
                                   uint32_t rows, int lane) {
  uint32_t e = table[uint32_t(s.buffer >> 56)];
  const int length = int(e >> 16);
  s.buffer <<= length;
  s.held -= length;
  s.consumed += length;
  if (e & kLaneEscape) {
    LaneRefill(s, segment, rows, lane);
    e = uint32_t(s.buffer >> 56) << 7;
    s.buffer <<= 8;
    s.held -= 8;
    s.consumed += 8;
  }
  return e;
}

// A lane's 8 weights of one group: their 8 codes and their sign/mantissa bytes (`sm`, byte i the
// i-th weight's) into 4 words, two BF16 values each, weight 2i in the low half of word i.
DF11_HOST_DEVICE void LaneGroup(LaneState& s, const uint32_t* table, const uint32_t* segment,
                                uint32_t rows, int lane, uint32_t sm_low, uint32_t sm_high,
                                uint32_t out[4]) {
  uint32_t e[8];
  LaneRefill(s, segment, rows, lane);
  for (int k = 0; k < 4; ++k) e[k] = LaneCode(s, table, segment, rows, lane);
  LaneRefill(s, segment, rows, lane);
  for (int k = 4; k < 8; ++k) e[k] = LaneCode(s, table, segment, rows, lane);
  out[0] = JoinPair(sm_low, 0x1100, e[0], e[1]);
  out[1] = JoinPair(sm_low, 0x3322, e[2], e[3]);
  out[2] = JoinPair(sm_high, 0x1100, e[4], e[5]);
  out[3] = JoinPair(sm_high, 0x3322, e[6], e[7]);
}

// Whether a segment's words [start, end) can be its rows: whole rows, at least the 8 that 256
// codes of at least one bit take. Checked before decoding it.
DF11_HOST_DEVICE bool LaneSegmentSound(uint32_t start, uint32_t end) {
  return end >= start && (end - start) % kLaneWarp == 0 &&
         (end - start) / kLaneWarp >= kLaneSteps / 32;
}

// What a raised error flag of a lane-stream launch means.
inline constexpr const char* kLaneCorruptMessage =
    "a lane's codes did not fit its segment's rows (corrupt lane-stream unit)";

// After a segment: whether this lane's codes fit in the segment's rows.
DF11_HOST_DEVICE bool LaneFits(const LaneState& s, uint32_t rows) {
  return s.consumed <= rows * 32u;
}
// Whether the segment's longest lane (its bits `longest`) ends in its last row, as the encoder
// sizes a segment.
DF11_HOST_DEVICE bool LaneRowsTight(uint32_t longest, uint32_t rows) {
  return rows > 0 && longest > (rows - 1) * 32u;
}

// ---------------------------------------------------------------------------------------------
// The fused product y = x · Wᵀ on the same layout, for passes of a few columns of x (tokens): a
// matrix W [rows][cols] of a unit (its first weight a multiple of 256 into the unit, cols a
// multiple of 256, so a group of 256 weights is in one row), decoded into registers and
// multiplied there. Each lane accumulates, per column of x, its 8 weights times the 8 inputs they
// meet, in fp32 FMAs in weight order, over the groups of one row; when the row ends (or the
// segment does) the warp sums its 32 lanes in a fixed tree and writes that row's piece. A row's
// pieces (one per segment it touches) are then summed in segment order with the bias (a second,
// small launch): deterministic, and each column independent of the others.

inline constexpr int kLaneMaxColumns = 8;
// Products one launch takes at most (they are the kernels' parameters).
inline constexpr size_t kMaxLaneProducts = 8;

// One product of a launch: W, rows x cols weights from `first_element` of the unit of `unit`
// (whose first_segment, n_segments and out are unused), times the launch's x, plus `bias` (rows
// BF16 values; nullptr: none), into y [columns][rows] (fp32 or BF16, as the launch says).
struct LaneProduct {
  LaneView unit;
  uint64_t first_element;
  uint32_t rows;
  uint32_t cols;
  const uint16_t* bias;
  void* y;
};

// The segments that hold a product's weights: [first, first + count).
DF11_HOST_DEVICE uint64_t LaneProductFirstSegment(const LaneProduct& p) {
  return p.first_element / kLaneSegment;
}
DF11_HOST_DEVICE uint64_t LaneProductSegments(const LaneProduct& p) {
  const uint64_t last = (p.first_element + uint64_t{p.rows} * p.cols - 1) / kLaneSegment;
  return last + 1 - LaneProductFirstSegment(p);
}

// The most segments a row of `cols` weights touches: where its pieces go.
DF11_HOST_DEVICE uint32_t LanePiecesPerRow(uint32_t cols) {
  return (cols + kLaneSegment - 1) / kLaneSegment + 1;
}
// The segment that holds row `row`'s first weight.
DF11_HOST_DEVICE uint64_t LaneFirstSegmentOfRow(uint64_t first_element, uint32_t cols,
                                                uint32_t row) {
  return (first_element + uint64_t{row} * cols) / kLaneSegment;
}
// The segment that holds row `row`'s last weight.
DF11_HOST_DEVICE uint64_t LaneLastSegmentOfRow(uint64_t first_element, uint32_t cols,
                                               uint32_t row) {
  return (first_element + uint64_t{row + 1} * cols - 1) / kLaneSegment;
}

// 8 BF16 values at `p` (16-byte aligned) as floats: one 16-byte load on the device.
DF11_HOST_DEVICE void LoadBf16x8(const uint16_t* p, float out[8]) {
  uint32_t w[4];
#if defined(__CUDA_ARCH__)
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
  w[0] = v.x;
  w[1] = v.y;
  w[2] = v.z;
  w[3] = v.w;
#else
  for (int i = 0; i < 4; ++i) w[i] = uint32_t{p[2 * i]} | uint32_t{p[2 * i + 1]} << 16;
#endif
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = BitsFloat(w[i] << 16);
    out[2 * i + 1] = BitsFloat(w[i] & 0xFFFF0000u);
  }
}

// acc[c] += the lane's 8 weights (pairs, as LaneGroup gives them) · x[c][col .. col + 8), for the
// `columns` columns of x (row c at x + c * ldx).
DF11_HOST_DEVICE void LaneMultiply(const uint32_t pairs[4], const uint16_t* x, uint32_t ldx,
                                   uint32_t col, int columns, float acc[kLaneMaxColumns]) {
  float w[8];
  for (int i = 0; i < 4; ++i) {
    w[2 * i] = BitsFloat(pairs[i] << 16);
    w[2 * i + 1] = BitsFloat(pairs[i] & 0xFFFF0000u);
  }
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int c = 0; c < kLaneMaxColumns; ++c) {
    if (c >= columns) break;
    float in[8];
    LoadBf16x8(x + uint64_t(c) * ldx + col, in);
    float a = acc[c];
    for (int i = 0; i < 8; ++i) a = fmaf(w[i], in[i], a);
    acc[c] = a;
  }
}

// A launch's workspace: its error flag (16 bytes, where CheckDecoded reads it), then each
// product's pieces (rows x pieces per row x columns floats, 16-byte aligned).
inline constexpr uint64_t kLanePiecesOffset = 16;
DF11_HOST_DEVICE uint64_t LanePieceFloats(const LaneProduct& p, int columns) {
  return (uint64_t{p.rows} * LanePiecesPerRow(p.cols) * uint64_t(columns) + 3) / 4 * 4;
}
// The bytes of workspace a launch of `products` needs.
inline uint64_t LaneGemvWorkspaceBytes(std::span<const LaneProduct> products, int columns) {
  uint64_t floats = 0;
  for (const LaneProduct& p : products) floats += LanePieceFloats(p, columns);
  return kLanePiecesOffset + floats * sizeof(float);
}

// A row's pieces summed in segment order, plus its bias: the second launch's arithmetic.
DF11_HOST_DEVICE float LaneSumPieces(const float* pieces, uint32_t n_pieces, uint32_t stride,
                                     float bias) {
  float sum = 0;
  for (uint32_t k = 0; k < n_pieces; ++k) sum += pieces[uint64_t{k} * stride];
  return sum + bias;
}

}  // namespace df11::codec::gpu

#endif  // DF11_CODEC_CUDA_LANE_STEPS_H_
