#include "codec/decoder.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codec/base/first_error.h"
#include "codec/base/status_macros.h"
#include "codec/format.h"
#include "codec/prefix_decode.h"

namespace df11::codec {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the bit readers assume a little-endian host");

absl::Status Corrupt(const Unit& unit, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("DF11 unit ", unit.name(), ": ", what));
}

absl::Status CheckOutput(const Unit& unit, std::span<uint16_t> out) {
  if (out.size() == unit.num_elements()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("DF11 unit ", unit.name(), " has ",
                                                 unit.num_elements(), " elements; output holds ",
                                                 out.size()));
}

// Multi-symbol table: entry i decodes the codes that lie wholly inside the 12-bit prefix i
// (DecodePrefix). Bytes 0..5 hold up to six exponents, byte 6 their count, byte 7 the bits they
// use; a count of 0 sends the decoder to the LUT walk itself.
constexpr int kMaxSymbolsPerEntry = 6;
constexpr int kTableBits = UnitDecoder::kTableBits;
using MultiSymbolTable = std::array<uint64_t, 1 << kTableBits>;
// Table steps per window load: each reads kTableBits bits after those used before it, all within
// the window's 57 valid bits.
constexpr int kStepsPerWindow = (57 - kTableBits) / kTableBits + 1;

void BuildMultiSymbolTable(const Unit& unit, MultiSymbolTable& table) {
  for (uint32_t prefix = 0; prefix < table.size(); ++prefix) {
    const PrefixCodes codes = DecodePrefix(unit, prefix, kTableBits, kMaxSymbolsPerEntry);
    uint64_t entry = uint64_t(codes.count) << 48 | uint64_t(codes.bits) << 56;
    for (int i = 0; i < codes.count; ++i) entry |= uint64_t{codes.symbols[i]} << (8 * i);
    table[prefix] = entry;
  }
}

// One block's exponent stream being decoded: the next bit, where the next exponent goes, and the
// end of the block's exponents (with 8 bytes of room past it for whole-entry stores).
struct Stream {
  uint64_t bitpos;
  uint8_t* out;
  uint8_t* end;
  bool failed = false;  // the lookup tables gave no valid code
};

// Decodes one symbol by the LUT walk.
inline void WalkStep(const Unit& unit, Stream& s) {
  int symbol;
  const int length = WalkLut(unit, Window(unit.tensors().encoded_exponent.data(), unit.num_bytes(),
                                          s.bitpos), symbol);
  if (length == 0) {
    s.failed = true;
    s.out = s.end;  // stop
    return;
  }
  *s.out++ = static_cast<uint8_t>(symbol);
  s.bitpos += length;
}

// Room a round of table steps needs before a stream's end: the last whole-entry store starts at
// most (kStepsPerWindow - 1) * 6 exponents in and writes 8 bytes, so no store passes the end and
// blocks can be decoded side by side into one buffer.
constexpr ptrdiff_t kRoomForTableSteps = (kStepsPerWindow - 1) * kMaxSymbolsPerEntry + 8;

// Up to kStepsPerWindow multi-symbol table steps from one window load, then a LUT walk if a code
// is longer than the table resolves. Needs kRoomForTableSteps before s.end.
// The stream is copied into locals: the exponent stores are byte stores, which the compiler must
// assume may alias anything in memory, so fields kept in memory would be reloaded after each one.
inline void TableSteps(const Unit& unit, const uint8_t* data, size_t n_bytes,
                       const MultiSymbolTable& table, Stream& s) {
  uint64_t bitpos = s.bitpos;
  uint8_t* out = s.out;
  uint64_t w = Window(data, n_bytes, bitpos);
  for (int step = 0; step < kStepsPerWindow; ++step) {
    const uint64_t e = table[w >> (64 - kTableBits)];
    const uint32_t n = (e >> 48) & 0xFF;
    if (n == 0) {
      s.bitpos = bitpos;
      s.out = out;
      WalkStep(unit, s);
      return;
    }
    std::memcpy(out, &e, 8);
    out += n;
    const uint32_t bits = static_cast<uint32_t>(e >> 56);
    w <<= bits;
    bitpos += bits;
  }
  s.bitpos = bitpos;
  s.out = out;
}

void Finish(const Unit& unit, const MultiSymbolTable& table, Stream& s) {
  const uint8_t* data = unit.tensors().encoded_exponent.data();
  const size_t n_bytes = unit.num_bytes();
  while (s.end - s.out >= kRoomForTableSteps) TableSteps(unit, data, n_bytes, table, s);
  while (s.out < s.end) WalkStep(unit, s);
}

// Decodes N blocks' streams in lockstep: each is a serial chain of dependent table loads (index,
// load, shift by the entry's bits), so step k runs for every stream before step k + 1 and the
// chains overlap. The steps have no branch: an entry with no code (count 0) uses no bits and
// stores nothing, so a stream that meets one stays on it, and the LUT walk resolves it after the
// round. The state lives in locals (see TableSteps).
//
// Each round also prefetches two cache lines of [prefetch, prefetch_end): the blocks' sign/mantissa
// bytes, which the consumer of the exponents reads next. A round decodes about 60 exponents, so the
// prefetch keeps ahead, and the memory bus, idle while the decoder computes, does that work then.
template <int N>
void DecodeLockstep(const Unit& unit, const MultiSymbolTable& table, Stream* s,
                    const uint8_t* prefetch, const uint8_t* prefetch_end) {
  const uint8_t* data = unit.tensors().encoded_exponent.data();
  const size_t n_bytes = unit.num_bytes();
  uint64_t bitpos[N];
  uint8_t* out[N];
  for (int i = 0; i < N; ++i) {
    bitpos[i] = s[i].bitpos;
    out[i] = s[i].out;
  }
  while (true) {
    bool room = true;
    for (int i = 0; i < N; ++i) room &= s[i].end - out[i] >= kRoomForTableSteps;
    if (!room) break;
    if (prefetch < prefetch_end) {
      __builtin_prefetch(prefetch);
      __builtin_prefetch(prefetch + 64);
      prefetch += 128;
    }
    uint64_t w[N];
    for (int i = 0; i < N; ++i) w[i] = Window(data, n_bytes, bitpos[i]);
    for (int step = 0; step < kStepsPerWindow; ++step) {
      for (int i = 0; i < N; ++i) {
        const uint64_t e = table[w[i] >> (64 - kTableBits)];
        std::memcpy(out[i], &e, 8);
        out[i] += static_cast<uint8_t>(e >> 48);
        const uint32_t bits = static_cast<uint32_t>(e >> 56);
        w[i] <<= bits;
        bitpos[i] += bits;
      }
    }
    for (int i = 0; i < N; ++i) {
      if ((table[w[i] >> (64 - kTableBits)] >> 48 & 0xFF) != 0) continue;
      s[i].bitpos = bitpos[i];
      s[i].out = out[i];
      WalkStep(unit, s[i]);
      bitpos[i] = s[i].bitpos;
      out[i] = s[i].out;
    }
  }
  for (int i = 0; i < N; ++i) {
    s[i].bitpos = bitpos[i];
    s[i].out = out[i];
    Finish(unit, table, s[i]);
  }
}

// BF16 from exponents and sign/mantissa bytes; a loop the compiler vectorises.
void JoinBf16(const uint8_t* exps, const uint8_t* sign_mantissa, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = format::JoinBf16(exps[i], sign_mantissa[i]);
}

// Where block b's codes start and where its exponents go; an empty stream for a tail block in
// which no code starts.
absl::StatusOr<Stream> OpenBlock(const Unit& unit, size_t b, uint8_t* exps) {
  const std::span<const uint32_t> p = unit.positions();
  const size_t count = p[b + 1] - p[b];
  if (count == 0 && p[b] != unit.num_elements()) {
    return Corrupt(unit, absl::StrCat("block ", b, " decodes no element but starts at element ",
                                      p[b], " of ", unit.num_elements()));
  }
  return Stream{b * format::kBitsPerBlock + unit.gap(b * format::kThreadsPerBlock), exps,
                exps + count};
}

// Checks that block b's codes ended where the next block's start (or the stream's end).
absl::Status CheckBlockEnd(const Unit& unit, size_t b, const Stream& s) {
  const std::span<const uint32_t> p = unit.positions();
  const size_t count = p[b + 1] - p[b];
  if (count == 0) return absl::OkStatus();
  if (s.failed) {
    return Corrupt(unit, absl::StrCat("block ", b, ": the lookup tables give no valid code"));
  }
  if (p[b + 1] < unit.num_elements()) {
    const size_t next = b + 1;
    const uint64_t next_start =
        next * format::kBitsPerBlock + unit.gap(next * format::kThreadsPerBlock);
    if (s.bitpos != next_start) {
      return Corrupt(unit, absl::StrCat("block ", b, ": ", count, " codes end at bit ", s.bitpos,
                                        ", but block ", next, " starts at bit ", next_start));
    }
  } else if (s.bitpos > 8 * uint64_t{unit.num_bytes()} ||
             (s.bitpos + 7) / 8 != unit.num_bytes()) {
    return Corrupt(unit, absl::StrCat("the last code ends at bit ", s.bitpos, " of a ",
                                      unit.num_bytes(), "-byte stream"));
  }
  return absl::OkStatus();
}

// Blocks decoded in lockstep by one thread.
constexpr int kLockstep = 4;

// The exponents of blocks [begin, end) (at most kLockstep) into exps, which holds the blocks'
// elements side by side: exps[0] is element positions()[begin].
template <int N>
absl::Status DecodeExponents(const Unit& unit, const MultiSymbolTable& table, size_t begin,
                             uint8_t* exps) {
  const std::span<const uint32_t> p = unit.positions();
  Stream streams[N];
  for (int i = 0; i < N; ++i) {
    DF11_ASSIGN_OR_RETURN(streams[i], OpenBlock(unit, begin + i, exps + (p[begin + i] - p[begin])));
  }
  const uint8_t* sign_mantissa = unit.tensors().sign_mantissa.data();
  DecodeLockstep<N>(unit, table, streams, sign_mantissa + p[begin], sign_mantissa + p[begin + N]);
  for (int i = 0; i < N; ++i) DF11_RETURN_IF_ERROR(CheckBlockEnd(unit, begin + i, streams[i]));
  return absl::OkStatus();
}

absl::Status DecodeExponents(const Unit& unit, const MultiSymbolTable& table, size_t begin,
                             size_t end, uint8_t* exps) {
  switch (end - begin) {
    case 4: return DecodeExponents<4>(unit, table, begin, exps);
    case 3: return DecodeExponents<3>(unit, table, begin, exps);
    case 2: return DecodeExponents<2>(unit, table, begin, exps);
    case 1: return DecodeExponents<1>(unit, table, begin, exps);
  }
  return absl::InternalError(absl::StrCat("DecodeExponents of ", end - begin, " blocks"));
}
static_assert(kLockstep == 4, "DecodeExponents dispatches up to four blocks");

// Hands the exponents of blocks [begin, end) to `group`, kLockstep blocks at a time, decoded into
// a buffer kept per thread (a range of blocks is too short to pay for a fresh one).
absl::Status ForEachBlockGroup(
    const Unit& unit, const MultiSymbolTable& table, size_t begin, size_t end,
    const std::function<void(size_t first_block, size_t end_block, const uint8_t* exps)>& group) {
  const std::span<const uint32_t> p = unit.positions();
  thread_local std::vector<uint8_t> exps;
  for (size_t b = begin; b < end; b += kLockstep) {
    const size_t b_end = std::min<size_t>(b + kLockstep, end);
    exps.resize(p[b_end] - p[b]);
    DF11_RETURN_IF_ERROR(DecodeExponents(unit, table, b, b_end, exps.data()));
    group(b, b_end, exps.data());
  }
  return absl::OkStatus();
}

// Decodes blocks [begin, end) into `out`, whose first value is element `origin`.
absl::Status DecodeBlocks(const Unit& unit, const MultiSymbolTable& table, size_t begin,
                          size_t end, std::span<uint16_t> out, size_t origin = 0) {
  const std::span<const uint32_t> p = unit.positions();
  const uint8_t* sign_mantissa = unit.tensors().sign_mantissa.data();
  return ForEachBlockGroup(unit, table, begin, end, [&](size_t b, size_t b_end, const uint8_t* e) {
    JoinBf16(e, sign_mantissa + p[b], out.data() + (p[b] - origin), p[b_end] - p[b]);
  });
}

}  // namespace

absl::Status DecodeReference(const Unit& unit, std::span<uint16_t> out) {
  if (absl::Status s = CheckOutput(unit, out); !s.ok()) return s;
  const uint8_t* data = unit.tensors().encoded_exponent.data();
  const uint8_t* sign_mantissa = unit.tensors().sign_mantissa.data();
  const size_t n_bytes = unit.num_bytes();
  const uint64_t total_bits = 8 * uint64_t{n_bytes};
  const size_t n = unit.num_elements();
  const std::span<const uint32_t> p = unit.positions();
  const size_t n_chunks = unit.num_blocks() * format::kThreadsPerBlock;

  uint64_t bitpos = 0;
  size_t next_chunk = 0;  // chunks before this one have had their first code start checked
  size_t next_block = 0;
  // A code (or, at the tail, the EOF padding) starts at `bitpos` as element `element`: if it is the
  // first in its chunk or block, the gap and the block's first element must say so.
  auto check_start = [&](size_t element) -> absl::Status {
    const size_t chunk = bitpos / format::kBitsPerChunk;
    if (chunk >= next_chunk) {
      if (unit.gap(chunk) != static_cast<int>(bitpos % format::kBitsPerChunk)) {
        return Corrupt(unit, absl::StrCat("gap of chunk ", chunk, " is ", unit.gap(chunk),
                                          ", but its first code starts at bit ",
                                          bitpos % format::kBitsPerChunk));
      }
      next_chunk = chunk + 1;
    }
    const size_t block = bitpos / format::kBitsPerBlock;
    if (block >= next_block) {
      if (p[block] != element) {
        return Corrupt(unit, absl::StrCat("output_positions[", block, "] is ", p[block],
                                          ", but the block's first code is element ", element));
      }
      next_block = block + 1;
    }
    return absl::OkStatus();
  };

  for (size_t i = 0; i < n; ++i) {
    if (bitpos >= total_bits) {
      return Corrupt(unit, absl::StrCat("the stream ends after ", i, " of ", n, " codes"));
    }
    if (absl::Status s = check_start(i); !s.ok()) return s;
    int symbol;
    const int length = WalkLut(unit, Window(data, n_bytes, bitpos), symbol);
    if (length == 0) {
      return Corrupt(unit, absl::StrCat("no valid code at bit ", bitpos, " (element ", i, ")"));
    }
    if (bitpos + length > total_bits) {
      return Corrupt(unit, absl::StrCat("code of element ", i, " ends at bit ", bitpos + length,
                                        " of ", total_bits));
    }
    out[i] = format::JoinBf16(static_cast<uint8_t>(symbol), sign_mantissa[i]);
    bitpos += length;
  }
  // The official tail: a stream that does not end on a byte boundary gets one padding byte, and
  // the padding start is marked like a code start.
  if ((bitpos + 7) / 8 != n_bytes) {
    return Corrupt(unit, absl::StrCat("the codes end at bit ", bitpos, ", but the stream has ",
                                      n_bytes, " bytes"));
  }
  if (bitpos % 8 != 0) {
    if (absl::Status s = check_start(n); !s.ok()) return s;
  }
  for (size_t chunk = next_chunk; chunk < n_chunks; ++chunk) {
    if (unit.gap(chunk) != 0) {
      return Corrupt(unit, absl::StrCat("padding gap of chunk ", chunk, " is ", unit.gap(chunk)));
    }
  }
  for (size_t block = next_block; block < unit.num_blocks(); ++block) {
    if (p[block] != n) {
      return Corrupt(unit, absl::StrCat("output_positions[", block, "] is ", p[block],
                                        ", but no code starts in that block"));
    }
  }
  return absl::OkStatus();
}

UnitDecoder::UnitDecoder(const Unit& unit) : unit_(&unit) {
  table_ = std::make_unique<std::array<uint64_t, 1 << kTableBits>>();
  BuildMultiSymbolTable(unit, *table_);
}

absl::Status UnitDecoder::Decode(std::span<uint16_t> out, ThreadPool* pool) const {
  const Unit& unit = *unit_;
  if (absl::Status s = CheckOutput(unit, out); !s.ok()) return s;
  base::FirstError errors;
  auto decode_range = [&](size_t begin, size_t end) {
    errors.Add(DecodeBlocks(unit, *table_, begin, end, out));
  };
  if (pool == nullptr) {
    decode_range(0, unit.num_blocks());
  } else {
    // Ranges of 64 blocks (about 1.5 MB of output): small enough to balance uneven cores, large
    // enough that claiming one costs nothing.
    pool->ParallelFor(unit.num_blocks(), /*grain=*/64, decode_range);
  }
  return errors.status();
}

absl::Status UnitDecoder::DecodeExponentsInPieces(size_t first, size_t last,
                                                  const ExponentSink& sink) const {
  const Unit& unit = *unit_;
  const size_t n = unit.num_elements();
  if (first > last || last > n) {
    return absl::InvalidArgumentError(absl::StrCat("elements [", first, ", ", last, ") of unit ",
                                                   unit.name(), ", which has ", n));
  }
  if (first == last) return absl::OkStatus();
  // The blocks whose element ranges meet [first, last): from the last block starting at or
  // before `first` through the last block starting before `last`.
  const std::span<const uint32_t> p = unit.positions();
  const size_t begin = std::upper_bound(p.begin(), p.end() - 1, first) - p.begin() - 1;
  const size_t end = std::lower_bound(p.begin() + begin, p.end() - 1, last) - p.begin();
  const uint8_t* sign_mantissa = unit.tensors().sign_mantissa.data();
  return ForEachBlockGroup(unit, *table_, begin, end, [&](size_t b, size_t b_end, const uint8_t* e) {
    const size_t lo = std::max<size_t>(first, p[b]), hi = std::min<size_t>(last, p[b_end]);
    if (lo < hi) {
      sink(std::span<const uint8_t>(e + (lo - p[b]), hi - lo),
           std::span<const uint8_t>(sign_mantissa + lo, hi - lo));
    }
  });
}

absl::Status UnitDecoder::DecodeInPieces(size_t first, size_t last, const Bf16Sink& sink) const {
  thread_local std::vector<uint16_t> piece;
  return DecodeExponentsInPieces(
      first, last, [&](std::span<const uint8_t> exps, std::span<const uint8_t> sign_mantissa) {
        piece.resize(exps.size());
        JoinBf16(exps.data(), sign_mantissa.data(), piece.data(), exps.size());
        sink(piece);
      });
}

absl::Status UnitDecoder::DecodeElements(size_t first, std::span<uint16_t> out) const {
  if (first > unit_->num_elements() || out.size() > unit_->num_elements() - first) {
    return absl::InvalidArgumentError(absl::StrCat(
        "elements [", first, ", ", first + out.size(), ") of unit ", unit_->name(),
        ", which has ", unit_->num_elements()));
  }
  size_t done = 0;
  return DecodeInPieces(first, first + out.size(), [&](std::span<const uint16_t> values) {
    std::memcpy(out.data() + done, values.data(), values.size() * sizeof(uint16_t));
    done += values.size();
  });
}

absl::Status DecodeParallel(const Unit& unit, std::span<uint16_t> out, ThreadPool* pool) {
  if (absl::Status s = CheckOutput(unit, out); !s.ok()) return s;
  return UnitDecoder(unit).Decode(out, pool);
}

absl::Status DecodeElements(const Unit& unit, size_t first, std::span<uint16_t> out) {
  return UnitDecoder(unit).DecodeElements(first, out);
}

}  // namespace df11::codec
