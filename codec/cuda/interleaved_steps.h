// The GPU decoder of codec::InterleavedUnit, the lane-interleaved layout: its per-thread steps,
// written once for the kernel (codec/cuda/interleaved_decode.cu) and for the CPU harness that
// runs them thread by thread (tests/codec/interleaved_test.cc). Plain C++ without
// CUDA; __host__ __device__ under nvcc.
//
// Design: one warp decodes one segment (about 32K elements); thread t holds the layout's lanes
// 2t and 2t + 1, so one step of the warp decodes the segment's next 64 elements and thread t
// owns elements 2t and 2t + 1 of them (one 32-bit store of two BF16 values). Per step:
//   1. each lane resolves its next code with one lookup in the unit's 128-entry table (the top
//      7 bits of its buffer), consumes it, and says whether it needs a word (fewer than 16 bits
//      left) and whether the code was the escape;
//   2. two ballots per question number the lanes that need a word, and those that escaped, in
//      lane order, which is the order the encoder stored words and escape bytes in: every lane
//      reads its word or escape byte at base + its rank, so a step's reads are consecutive; a
//      word goes in one step later (LaneBits), so that its load has a step to arrive;
//   3. exponents join the sign/mantissa bytes (loaded a step ahead) and go out.
// No shared memory, no barrier, no staging: the two lanes of a thread are two independent chains
// of dependent operations, and the warps of an SM hide each other's latency. A segment's reads
// stop at its own words and escape bytes; a stream that asks for more, or ends elsewhere than
// where the next segment starts, is inconsistent, which raises the launch's error flag.
#ifndef DF11_CODEC_CUDA_INTERLEAVED_STEPS_H_
#define DF11_CODEC_CUDA_INTERLEAVED_STEPS_H_

#include <cstdint>

#include "codec/lut_walk.h"

namespace df11::codec::gpu {

inline constexpr int kInterleavedLanes = 64;
inline constexpr int kInterleavedPrefixBits = 7;
inline constexpr int kInterleavedTableEntries = 1 << kInterleavedPrefixBits;

// Table entry: the exponent in bits 0..7, the code length in bits 8..11, bit 15 for the escape.
inline constexpr uint16_t kEscapeEntry = 0x8000;
DF11_HOST_DEVICE uint32_t EntryExponent(uint16_t e) { return e & 0xFFu; }
DF11_HOST_DEVICE int EntryLength(uint16_t e) { return (e >> 8) & 15; }
DF11_HOST_DEVICE bool EntryEscapes(uint16_t e) { return (e & kEscapeEntry) != 0; }

// Where segment s starts: its first element, word and escape byte. An array of n_segments + 1,
// the last holding the ends.
struct InterleavedSegment {
  uint64_t first;
  uint64_t word;
  uint64_t escape;
};

// One resident interleaved unit, or a range of its segments: pointers into device memory (host
// memory in the CPU harness). out[0] holds element segments[0].first.
struct InterleavedView {
  const uint16_t* words;               // the unit's words
  const uint8_t* escapes;              // the unit's escape bytes
  const uint8_t* sign_mantissa;        // the unit's sign/mantissa bytes
  const InterleavedSegment* segments;  // n_segments + 1 entries
  const uint16_t* table;               // kInterleavedTableEntries entries
  uint16_t* out;                       // nullptr: decode and check only
  uint32_t n_segments;
};

// One lane's bits: the next at bit 31, `held` of them valid; and the word it asked for in the
// last step, if it did, which goes in below them after this step's code. The word is read one
// step before it is needed, so its load is off the chain of dependent operations (look up,
// shift) that bounds the speed: a lane that asks still holds at least 9 bits, and a code takes
// at most 7.
struct LaneBits {
  uint32_t buffer;
  int held;
  uint32_t pending;
  bool has_pending;
};

// What step 1 found for a thread's two lanes.
struct LaneCodes {
  uint32_t exponent[2];
  bool escaped[2];
  bool asks[2];
};

// Step 1 for lanes 2t and 2t + 1: look up, consume, take in the word asked for in the last step,
// and say what each needs. `table` is the unit's table (in shared memory on the device).
DF11_HOST_DEVICE LaneCodes DecodeLanes(LaneBits (&lanes)[2], const uint16_t* table) {
  LaneCodes c;
  for (int k = 0; k < 2; ++k) {
    LaneBits& lane = lanes[k];
    const uint16_t entry = table[lane.buffer >> (32 - kInterleavedPrefixBits)];
    const int length = EntryLength(entry);
    c.exponent[k] = EntryExponent(entry);
    c.escaped[k] = EntryEscapes(entry);
    lane.buffer <<= length;
    lane.held -= length;
    if (lane.has_pending) {
      lane.buffer |= lane.pending << (16 - lane.held);
      lane.held += 16;
      lane.has_pending = false;
    }
    c.asks[k] = lane.held < 16;
  }
  return c;
}

DF11_HOST_DEVICE uint32_t Popcount(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __popc(x);
#else
  return static_cast<uint32_t>(__builtin_popcount(x));
#endif
}

// The ranks of thread t's lanes 2t and 2t + 1 among the lanes of the step that said yes, in lane
// order, from the warp's two ballots (bit t of `first`: lane 2t said yes; of `second`: lane 2t +
// 1), and how many said yes in all.
struct Ranks {
  uint32_t rank[2];
  uint32_t total;
};
DF11_HOST_DEVICE Ranks RankLanes(uint32_t first, uint32_t second, int t) {
  const uint32_t below = t == 0 ? 0u : (0xFFFFFFFFu >> (32 - t));
  Ranks r;
  r.rank[0] = Popcount(first & below) + Popcount(second & below);
  r.rank[1] = r.rank[0] + ((first >> t) & 1u);
  r.total = Popcount(first) + Popcount(second);
  return r;
}

// Step 2 for a lane that asked: its word at `index`, taken in after the next step's code, if the
// segment has it (else false, and the lane gets zeros).
DF11_HOST_DEVICE bool AskWord(LaneBits& lane, const uint16_t* words, uint64_t index, uint64_t end) {
  const bool inside = index < end;
  lane.pending = inside ? LoadReadOnly(words + index) : 0u;
  lane.has_pending = true;
  return inside;
}

// A thread's two lanes at the start of a segment: the encoder asked two words for every lane,
// lanes 0..63, twice.
DF11_HOST_DEVICE void StartLanes(LaneBits (&lanes)[2], const uint16_t* words, uint64_t first_word,
                                 int t) {
  for (int k = 0; k < 2; ++k) {
    const int lane = 2 * t + k;
    lanes[k].buffer = uint32_t{LoadReadOnly(words + first_word + lane)} << 16 |
                      LoadReadOnly(words + first_word + kInterleavedLanes + lane);
    lanes[k].held = 32;
    lanes[k].pending = 0;
    lanes[k].has_pending = false;
  }
}

// BF16 from an exponent and its sign/mantissa byte (codec/format.h JoinBf16).
DF11_HOST_DEVICE uint32_t JoinExponent(uint32_t exponent, uint32_t sign_mantissa) {
  return ((sign_mantissa & 0x80u) << 8) | (exponent << 7) | (sign_mantissa & 0x7Fu);
}

}  // namespace df11::codec::gpu

#endif  // DF11_CODEC_CUDA_INTERLEAVED_STEPS_H_
