#include "codec/decoder.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

// Up to four multi-symbol table steps from one window load (48 of its 57 valid bits), then a LUT
// walk if a code is longer than the table resolves. Needs 4 * 6 exponents of room before s.end.
inline void TableSteps(const Unit& unit, const MultiSymbolTable& table, Stream& s) {
  uint64_t w = Window(unit.tensors().encoded_exponent.data(), unit.num_bytes(), s.bitpos);
  for (int step = 0; step < 4; ++step) {
    const uint64_t e = table[w >> (64 - kTableBits)];
    const uint32_t n = (e >> 48) & 0xFF;
    if (n == 0) {
      WalkStep(unit, s);
      return;
    }
    std::memcpy(s.out, &e, 8);
    s.out += n;
    const uint32_t bits = static_cast<uint32_t>(e >> 56);
    w <<= bits;
    s.bitpos += bits;
  }
}

constexpr ptrdiff_t kRoomForTableSteps = 4 * kMaxSymbolsPerEntry;

void Finish(const Unit& unit, const MultiSymbolTable& table, Stream& s) {
  while (s.end - s.out >= kRoomForTableSteps) TableSteps(unit, table, s);
  while (s.out < s.end) WalkStep(unit, s);
}

// Decodes N blocks' streams in lockstep: each is a serial chain of dependent table loads, so
// interleaving several keeps the core busy while each waits for a load.
template <int N>
void DecodeLockstep(const Unit& unit, const MultiSymbolTable& table, Stream* s) {
  while (true) {
    bool room = true;
    for (int i = 0; i < N; ++i) room &= s[i].end - s[i].out >= kRoomForTableSteps;
    if (!room) break;
    for (int i = 0; i < N; ++i) TableSteps(unit, table, s[i]);
  }
  for (int i = 0; i < N; ++i) Finish(unit, table, s[i]);
}

// BF16 from exponents and sign/mantissa bytes; a loop the compiler vectorises.
void JoinBf16(const uint8_t* exps, const uint8_t* sign_mantissa, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = format::JoinBf16(exps[i], sign_mantissa[i]);
}

// Where block b's codes start and how many it holds; an empty stream for a tail block in which
// no code starts.
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

// Checks that block b's codes ended where the next block's start (or the stream's end), then
// joins its exponents with the sign/mantissa bytes into its slice of `out`, whose first value is
// element `origin` of the unit.
absl::Status CloseBlock(const Unit& unit, size_t b, const Stream& s, const uint8_t* exps,
                        std::span<uint16_t> out, size_t origin) {
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
  JoinBf16(exps, unit.tensors().sign_mantissa.data() + p[b], out.data() + (p[b] - origin), count);
  return absl::OkStatus();
}

// Blocks decoded in lockstep by one thread.
constexpr int kLockstep = 4;

// Decodes blocks [begin, end) kLockstep at a time into `out`, whose first value is element `origin`.
absl::Status DecodeBlocks(const Unit& unit, const MultiSymbolTable& table, size_t begin,
                          size_t end, std::span<uint16_t> out, size_t origin = 0) {
  // The largest block decodes 32768 exponents; 8 bytes of slack for whole-entry stores.
  constexpr size_t kRoom = format::kBitsPerBlock + 8;
  // Per thread, kept across calls: a range of blocks is too short to pay for a fresh buffer.
  thread_local std::vector<uint8_t> scratch(kLockstep * kRoom);
  // Blocks kLockstep at a time, then the rest one by one.
  auto decode = [&]<int N>(size_t b) -> absl::Status {
    Stream streams[N];
    for (int i = 0; i < N; ++i) {
      DF11_ASSIGN_OR_RETURN(streams[i], OpenBlock(unit, b + i, scratch.data() + i * kRoom));
    }
    DecodeLockstep<N>(unit, table, streams);
    for (int i = 0; i < N; ++i) {
      DF11_RETURN_IF_ERROR(
          CloseBlock(unit, b + i, streams[i], scratch.data() + i * kRoom, out, origin));
    }
    return absl::OkStatus();
  };
  size_t b = begin;
  for (; b + kLockstep <= end; b += kLockstep) {
    DF11_RETURN_IF_ERROR(decode.template operator()<kLockstep>(b));
  }
  for (; b < end; ++b) DF11_RETURN_IF_ERROR(decode.template operator()<1>(b));
  return absl::OkStatus();
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
  std::mutex mu;
  absl::Status first_error;
  auto decode_range = [&](size_t begin, size_t end) {
    absl::Status s = DecodeBlocks(unit, *table_, begin, end, out);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.ok()) first_error = std::move(s);
    }
  };
  if (pool == nullptr) {
    decode_range(0, unit.num_blocks());
  } else {
    // Ranges of 64 blocks (about 1.5 MB of output): small enough to balance uneven cores, large
    // enough that claiming one costs nothing.
    pool->ParallelFor(unit.num_blocks(), /*grain=*/64, decode_range);
  }
  return first_error;
}

absl::Status UnitDecoder::DecodeInPieces(
    size_t first, size_t last,
    const std::function<void(std::span<const uint16_t> values)>& sink) const {
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
  // kLockstep blocks at a time (decoded in lockstep), into a buffer kept per thread.
  thread_local std::vector<uint16_t> piece;
  for (size_t b = begin; b < end; b += kLockstep) {
    const size_t b_end = std::min<size_t>(b + kLockstep, end);
    piece.resize(p[b_end] - p[b]);
    DF11_RETURN_IF_ERROR(DecodeBlocks(unit, *table_, b, b_end, piece, p[b]));
    const size_t lo = std::max<size_t>(first, p[b]), hi = std::min<size_t>(last, p[b_end]);
    if (lo < hi) sink(std::span<const uint16_t>(piece).subspan(lo - p[b], hi - lo));
  }
  return absl::OkStatus();
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
