#include "codec/interleaved.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codec/base/first_error.h"
#include "codec/base/status_macros.h"
#include "codec/exponent_code.h"
#include "codec/format.h"
#include "codec/huffman.h"

// GCC 12's AVX-512 headers pass an undefined vector as the unused source of unmasked intrinsics,
// which -Wall reports as uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace df11::codec {
namespace {

constexpr int kLanes = InterleavedUnit::kLanes;
constexpr int kMaxLength = InterleavedUnit::kMaxCodeLength;

// The words and escape bytes of one segment.
struct SegmentCodes {
  std::vector<uint16_t> words;
  std::vector<uint8_t> escapes;
};

// Codes `count` exponents as one segment: element j in lane j % kLanes, padded to whole steps
// with the most frequent exponent; words in the order the decoder asks for them (two per lane to
// start, then one whenever a lane holds fewer than 16 bits after a code). Both what a lane writes
// and when it asks depend on its own codes only, so each lane is coded alone first (its state in
// registers), noting in which steps it asks; then the asks of each step are served in lane order.
void EncodeSegment(const ExponentCode& book, const uint8_t* exponents, size_t count,
                   SegmentCodes& out) {
  const size_t steps = (count + kLanes - 1) / kLanes;
  thread_local std::vector<uint16_t> lane_words[kLanes];
  thread_local std::vector<uint64_t> asks;  // per step, bit l: lane l asks after its code
  asks.assign(steps, 0);
  out.escapes.clear();
  const uint8_t padding = book.exponents[0];
  for (int lane = 0; lane < kLanes; ++lane) {
    std::vector<uint16_t>& w = lane_words[lane];
    w.resize(steps * kMaxLength / 16 + 2);
    size_t n = 0;
    uint32_t acc = 0;
    int acc_bits = 0, held = 32;
    for (size_t step = 0; step < steps; ++step) {
      const size_t j = step * kLanes + lane;
      const uint8_t e = j < count ? exponents[j] : padding;
      const int length = book.length_of[e];
      acc = acc << length | book.value_of[e];
      acc_bits += length;
      w[n] = static_cast<uint16_t>(acc >> (acc_bits & 15));  // kept only if 16 bits are there
      n += acc_bits >> 4;
      acc_bits &= 15;
      held -= length;
      const uint64_t ask = held < 16;
      asks[step] |= ask << lane;
      held += static_cast<int>(ask << 4);
    }
    if (acc_bits > 0) w[n++] = static_cast<uint16_t>(acc << (16 - acc_bits));
    w.resize(n);
  }
  // Escape bytes in element order (rare).
  for (size_t j = 0; j < count; ++j) {
    if (book.symbol[exponents[j]] == book.m) out.escapes.push_back(exponents[j]);
  }
  size_t next[kLanes] = {};
  auto word = [&](int lane) -> uint16_t {
    const std::vector<uint16_t>& w = lane_words[lane];
    const size_t k = next[lane]++;
    return k < w.size() ? w[k] : 0;  // asks past the lane's last word get zeros
  };
  out.words.clear();
  out.words.reserve(2 * kLanes + steps * kLanes * kMaxLength / 9 + 2 * kLanes);
  for (int round = 0; round < 2; ++round) {
    for (int lane = 0; lane < kLanes; ++lane) out.words.push_back(word(lane));
  }
  for (size_t step = 0; step < steps; ++step) {
    for (uint64_t m = asks[step]; m != 0; m &= m - 1)
      out.words.push_back(word(std::countr_zero(m)));
  }
}

#define DF11_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2,bmi2,popcnt")))

// Sinks of the AVX-512 decoder: each gets the fp32 values of elements [at, at + valid) of the
// segment (valid <= 16, lanes past it undefined), decoded by lane group `group` of the step.
struct Bf16Sink {
  uint16_t* out;
  DF11_AVX512 void operator()(size_t at, __m512 values, int valid, int) const {
    const __m256i bf16 = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(values), 16));
    _mm256_mask_storeu_epi16(out + at, static_cast<__mmask16>((1u << valid) - 1), bf16);
  }
};

// The order in which runtime::MatVecBf16's AVX2 kernel widens 16 BF16 values into two vectors of
// 8 lanes (in-lane unpacks): its lane j of vector v holds value kRunOrder[8v + j].
constexpr int kRunOrder[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

// Dot products of whole rows with x (rows a multiple of 16 long). acc[0] lane q accumulates value
// q of the row's runs 0, 2, 4, ... of 16 values, acc[1] of runs 1, 3, ...: lane for lane the
// fused multiply-adds of MatVecBf16's four 8-lane accumulators, whose reduction Finish repeats.
// With rows a multiple of 64 long, group g of a step always holds a run of parity g % 2 and rows
// end with steps, which the compiler resolves once the group loop is unrolled.
template <bool kRowsOf64>
struct DotSink {
  const float* x;
  int64_t row_length;
  float* y;
  int64_t col = 0;
  __m512 acc[2];

  DF11_AVX512 DotSink(const float* x, int64_t row_length, float* y)
      : x(x), row_length(row_length), y(y), acc{_mm512_setzero_ps(), _mm512_setzero_ps()} {}

  DF11_AVX512 void operator()(size_t, __m512 values, int, int group) {
    const int parity = kRowsOf64 ? group % 2 : static_cast<int>(col / 16 % 2);
    acc[parity] = _mm512_fmadd_ps(values, _mm512_loadu_ps(x + col), acc[parity]);
    col += 16;
    if ((!kRowsOf64 || group == 3) && col == row_length) Finish();
  }
  DF11_AVX512 void Finish() {
    alignas(64) float e[16], o[16];
    _mm512_store_ps(e, acc[0]);
    _mm512_store_ps(o, acc[1]);
    float h[8];
    for (int j = 0; j < 8; ++j) {
      h[j] = (e[kRunOrder[j]] + e[kRunOrder[8 + j]]) + (o[kRunOrder[j]] + o[kRunOrder[8 + j]]);
    }
    float s[4];
    for (int j = 0; j < 4; ++j) s[j] = h[j] + h[j + 4];
    *y++ = (s[0] + s[2]) + (s[1] + s[3]);
    acc[0] = acc[1] = _mm512_setzero_ps();
    col = 0;
  }
};

}  // namespace

bool InterleavedUnit::Supported() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
         __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("bmi2");
}

absl::StatusOr<InterleavedUnit> InterleavedUnit::Build(const UnitDecoder& decoder,
                                                       std::vector<Region> regions,
                                                       ThreadPool* pool, size_t segment_elements) {
  const Unit& unit = decoder.unit();
  const size_t n = unit.num_elements();
  InterleavedUnit u;
  u.sign_mantissa_ = unit.tensors().sign_mantissa;
  size_t at = 0;
  for (const Region& r : regions) {
    if (r.first != at || r.rows < 0 || r.row_length < 1 ||
        r.rows * r.row_length > static_cast<int64_t>(n - std::min(n, at))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "regions of unit ", unit.name(), ": one of ", r.rows, " rows of ", r.row_length,
          " starts at element ", r.first, ", expected ", at, ", in ", n, " elements"));
    }
    u.region_segments_.push_back(u.segments_.size());
    const int64_t per_segment =
        std::max<int64_t>(1, static_cast<int64_t>(segment_elements) / r.row_length);
    for (int64_t row = 0; row < r.rows; row += per_segment) {
      u.segments_.push_back({.first = at + static_cast<size_t>(row * r.row_length),
                             .word = 0,
                             .escape = 0,
                             .region = u.regions_.size()});
    }
    at += static_cast<size_t>(r.rows * r.row_length);
    u.regions_.push_back(r);
  }
  if (at != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("regions of unit ", unit.name(), " cover ", at, " of its ", n, " elements"));
  }
  u.region_segments_.push_back(u.segments_.size());
  u.segments_.push_back({.first = n, .word = 0, .escape = 0, .region = u.regions_.size()});
  const size_t n_segments = u.num_segments();

  // Ranges of segments, their exponents decoded by the DF11 decoder, in parallel.
  base::FirstError errors;
  auto for_segments = [&](const std::function<void(size_t s, const uint8_t* exponents)>& fn) {
    auto range = [&](size_t b, size_t e) {
      thread_local std::vector<uint8_t> exponents;
      const size_t first = u.segments_[b].first, last = u.segments_[e].first;
      exponents.resize(last - first);
      size_t done = 0;
      absl::Status s = decoder.DecodeExponentsInPieces(
          first, last, [&](std::span<const uint8_t> piece, std::span<const uint8_t>) {
            std::memcpy(exponents.data() + done, piece.data(), piece.size());
            done += piece.size();
          });
      if (!s.ok()) {
        errors.Add(std::move(s));
        return;
      }
      for (size_t k = b; k < e; ++k) fn(k, exponents.data() + (u.segments_[k].first - first));
    };
    if (pool == nullptr) {
      range(0, n_segments);
    } else {
      pool->ParallelFor(n_segments, 8, range);
    }
  };

  SharedHistogram histogram;
  for_segments([&](size_t s, const uint8_t* exponents) {
    Histogram h{};
    const size_t count = u.segments_[s + 1].first - u.segments_[s].first;
    for (size_t j = 0; j < count; ++j) ++h[exponents[j]];
    histogram.Add(h);
  });
  DF11_RETURN_IF_ERROR(errors.status());
  const ExponentCode book =
      ExponentCode::Choose(histogram.Total(), kMaxLength, InterleavedUnit::kMaxCodedExponents);
  for (int s = 0; s <= book.m; ++s) {
    const int shift = kMaxLength - book.lengths[s];
    const uint32_t begin = book.values[s] << shift, end = (book.values[s] + 1) << shift;
    for (uint32_t p = begin; p < end; ++p) {
      u.code_.length[p] = static_cast<uint8_t>(book.lengths[s]);
      u.code_.exponent[p] = s < book.m ? book.exponents[s] : 0;
    }
    if (s == book.m) {
      u.code_.escape_begin = static_cast<uint8_t>(begin);
      u.code_.escape_end = static_cast<uint8_t>(end);
    }
  }

  std::vector<SegmentCodes> codes(n_segments);
  for_segments([&](size_t s, const uint8_t* exponents) {
    EncodeSegment(book, exponents, u.segments_[s + 1].first - u.segments_[s].first, codes[s]);
  });
  DF11_RETURN_IF_ERROR(errors.status());
  size_t words = 0, escapes = 0;
  for (size_t s = 0; s < n_segments; ++s) {
    u.segments_[s].word = words;
    u.segments_[s].escape = escapes;
    words += codes[s].words.size();
    escapes += codes[s].escapes.size();
  }
  u.segments_[n_segments].word = words;
  u.segments_[n_segments].escape = escapes;
  u.words_.resize(words + kLanes);
  u.escapes_.resize(escapes + kLanes);
  for (size_t s = 0; s < n_segments; ++s) {
    std::copy(codes[s].words.begin(), codes[s].words.end(), u.words_.begin() + u.segments_[s].word);
    std::copy(codes[s].escapes.begin(), codes[s].escapes.end(),
              u.escapes_.begin() + u.segments_[s].escape);
    codes[s] = {};
  }
  return u;
}

std::vector<uint16_t> InterleavedUnit::GpuTable() const {
  std::vector<uint16_t> table(gpu::kInterleavedTableEntries);
  for (int p = 0; p < gpu::kInterleavedTableEntries; ++p) {
    const bool escape = p >= code_.escape_begin && p < code_.escape_end;
    table[p] = static_cast<uint16_t>((escape ? gpu::kEscapeEntry : 0) | code_.length[p] << 8 |
                                     code_.exponent[p]);
  }
  return table;
}

std::vector<gpu::InterleavedSegment> InterleavedUnit::GpuSegments() const {
  std::vector<gpu::InterleavedSegment> out;
  out.reserve(segments_.size());
  for (const Segment& s : segments_) out.push_back({s.first, s.word, s.escape});
  return out;
}

uint64_t InterleavedUnit::stored_bytes() const {
  return words_.size() * sizeof(uint16_t) + escapes_.size() + segments_.size() * sizeof(Segment) +
         regions_.size() * sizeof(Region) + region_segments_.size() * sizeof(size_t) + sizeof(Code);
}

void InterleavedUnit::DecodeSegmentsPortable(size_t begin, size_t end, uint16_t* out) const {
  const size_t origin = segments_[begin].first;
  for (size_t s = begin; s < end; ++s) {
    const Segment& seg = segments_[s];
    const size_t count = segments_[s + 1].first - seg.first;
    const size_t padded = (count + kLanes - 1) / kLanes * kLanes;
    const uint16_t* in = words_.data() + seg.word;
    const uint8_t* escape = escapes_.data() + seg.escape;
    // Each lane's bits, first bit at bit 31, and how many it holds.
    uint32_t buffer[kLanes];
    int held[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) {
      buffer[lane] = uint32_t{in[lane]} << 16 | in[kLanes + lane];
      held[lane] = 32;
    }
    in += 2 * kLanes;
    for (size_t j = 0; j < padded; ++j) {
      const int lane = static_cast<int>(j % kLanes);
      const uint32_t prefix = buffer[lane] >> (32 - kMaxLength);
      const int length = code_.length[prefix];
      const bool escaped = prefix >= code_.escape_begin && prefix < code_.escape_end;
      const uint8_t exponent = escaped ? *escape++ : code_.exponent[prefix];
      if (j < count) {
        out[seg.first - origin + j] = format::JoinBf16(exponent, sign_mantissa_[seg.first + j]);
      }
      buffer[lane] <<= length;
      held[lane] -= length;
      if (held[lane] < 16) {
        buffer[lane] |= uint32_t{*in++} << (16 - held[lane]);
        held[lane] += 16;
      }
    }
  }
}

// The portable decoder with 16 lanes at a time, four groups of lanes per step. A lane's word
// lands one step late: it is asked for after a code and put in below the lane's bits before the
// next shift, off the chain of dependent operations (peek, table, shift) that bounds the speed.
// The peek never needs it: a lane that asks holds at least 9 bits, and a code takes at most 7.
template <typename Sink>
DF11_AVX512 void InterleavedUnit::DecodeSegmentAvx512(size_t s, Sink& sink) const {
  constexpr int kGroups = kLanes / 16;
  const Segment& seg = segments_[s];
  const size_t count = segments_[s + 1].first - seg.first;
  const uint16_t* in = words_.data() + seg.word;
  const uint8_t* escape = escapes_.data() + seg.escape;
  const uint8_t* sm = sign_mantissa_.data() + seg.first;

  const __m512i length_lo = _mm512_loadu_si512(code_.length.data());
  const __m512i length_hi = _mm512_loadu_si512(code_.length.data() + 64);
  const __m512i exponent_lo = _mm512_loadu_si512(code_.exponent.data());
  const __m512i exponent_hi = _mm512_loadu_si512(code_.exponent.data() + 64);
  const __m512i escape_begin = _mm512_set1_epi8(static_cast<char>(code_.escape_begin));
  const __m512i escape_end = _mm512_set1_epi8(static_cast<char>(code_.escape_end));
  const __m512i sixteen = _mm512_set1_epi32(16);
  // Sign/mantissa byte i (of 16) into bytes 2 and 3 of lane i: bit 31 is the sign, bits 16-22
  // the mantissa; the exponent fills bits 23-30.
  const __m512i sm_bytes =
      _mm512_set_epi8(15, 15, 0, 0, 14, 14, 0, 0, 13, 13, 0, 0, 12, 12, 0, 0, 11, 11, 0, 0, 10, 10,
                      0, 0, 9, 9, 0, 0, 8, 8, 0, 0, 7, 7, 0, 0, 6, 6, 0, 0, 5, 5, 0, 0, 4, 4, 0, 0,
                      3, 3, 0, 0, 2, 2, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0);
  const __m512i sign_and_mantissa = _mm512_set1_epi32(static_cast<int>(0x807F0000u));
  constexpr __mmask64 kByte0 = 0x1111111111111111ull, kBytes23 = 0xCCCCCCCCCCCCCCCCull;

  __m512i buffer[kGroups], held[kGroups], pending[kGroups];
  for (int g = 0; g < kGroups; ++g) {
    const __m512i first =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 16 * g)));
    const __m512i second = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + kLanes + 16 * g)));
    buffer[g] = _mm512_or_si512(_mm512_slli_epi32(first, 16), second);
    held[g] = _mm512_set1_epi32(32);
    pending[g] = _mm512_setzero_si512();
  }
  in += 2 * kLanes;
  for (size_t j = 0; j < count; j += kLanes) {
#pragma GCC unroll 4
    for (int g = 0; g < kGroups; ++g) {
      const __m512i prefix = _mm512_srli_epi32(buffer[g], 32 - kMaxLength);
      const __m512i length = _mm512_maskz_permutex2var_epi8(kByte0, length_lo, prefix, length_hi);
      __m512i exponent = _mm512_maskz_permutex2var_epi8(kByte0, exponent_lo, prefix, exponent_hi);
      const __mmask64 escaped = _mm512_mask_cmplt_epu8_mask(
          _mm512_mask_cmpge_epu8_mask(kByte0, prefix, escape_begin), prefix, escape_end);
      exponent = _mm512_mask_expandloadu_epi8(exponent, escaped, escape);
      escape += _mm_popcnt_u64(escaped);
      const size_t at = j + 16 * g;
      if (at < count) {
        const int valid = static_cast<int>(std::min<size_t>(16, count - at));
        const __m128i sm16 =
            valid == 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(sm + at))
                        : _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << valid) - 1), sm + at);
        const __m512i placed =
            _mm512_maskz_permutexvar_epi8(kBytes23, sm_bytes, _mm512_broadcast_i32x4(sm16));
        const __m512i bits = _mm512_ternarylogic_epi32(sign_and_mantissa, placed,
                                                       _mm512_slli_epi32(exponent, 23), 0xCA);
        sink(at, _mm512_castsi512_ps(bits), valid, g);
      }
      buffer[g] = _mm512_sllv_epi32(_mm512_or_si512(buffer[g], pending[g]), length);
      held[g] = _mm512_sub_epi32(held[g], length);
      const __mmask16 asks = _mm512_cmplt_epi32_mask(held[g], sixteen);
      // The words into the high halves of the asking lanes.
      const __m512i words = _mm512_maskz_expandloadu_epi16(_pdep_u32(asks, 0xAAAAAAAAu), in);
      in += _mm_popcnt_u32(asks);
      pending[g] = _mm512_srlv_epi32(words, held[g]);
      held[g] = _mm512_mask_add_epi32(held[g], asks, held[g], sixteen);
    }
  }
}

DF11_AVX512 void InterleavedUnit::DecodeSegments(size_t begin, size_t end, uint16_t* out) const {
  if (!Supported()) return DecodeSegmentsPortable(begin, end, out);
  for (size_t s = begin; s < end; ++s) {
    Bf16Sink sink{out + (segments_[s].first - segments_[begin].first)};
    DecodeSegmentAvx512(s, sink);
  }
}

DF11_AVX512 void InterleavedUnit::MatVecSegments(size_t begin, size_t end, const float* x,
                                                 float* y) const {
  if (begin == end) return;
  const Region& r = regions_[segments_[begin].region];
  if (r.row_length % 64 == 0) {
    DotSink<true> sink(x, r.row_length, y);
    for (size_t s = begin; s < end; ++s) DecodeSegmentAvx512(s, sink);
  } else {
    DotSink<false> sink(x, r.row_length, y);
    for (size_t s = begin; s < end; ++s) DecodeSegmentAvx512(s, sink);
  }
}

absl::Status InterleavedUnit::Decode(std::span<uint16_t> out, ThreadPool* pool) const {
  if (out.size() != num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the unit has ", num_elements(), " elements; output holds ", out.size()));
  }
  auto range = [&](size_t b, size_t e) { DecodeSegments(b, e, out.data() + segments_[b].first); };
  if (pool == nullptr) {
    range(0, num_segments());
  } else {
    pool->ParallelFor(num_segments(), 8, range);
  }
  return absl::OkStatus();
}

absl::Status InterleavedUnit::DecodeElements(size_t first, std::span<uint16_t> out) const {
  const size_t n = num_elements();
  if (first > n || out.size() > n - first) {
    return absl::InvalidArgumentError(
        absl::StrCat("elements [", first, ", ", first + out.size(), ") of a unit of ", n));
  }
  if (out.empty()) return absl::OkStatus();
  const size_t last = first + out.size();
  auto after = [](size_t e, const Segment& s) { return e < s.first; };
  const size_t begin = std::upper_bound(segments_.begin(), segments_.end() - 1, first, after) -
                       segments_.begin() - 1;
  thread_local std::vector<uint16_t> piece;
  for (size_t s = begin; s < num_segments() && segments_[s].first < last; ++s) {
    const size_t lo = segments_[s].first, hi = segments_[s + 1].first;
    piece.resize(hi - lo);
    DecodeSegments(s, s + 1, piece.data());
    const size_t from = std::max(lo, first), to = std::min(hi, last);
    std::copy(piece.begin() + (from - lo), piece.begin() + (to - lo), out.begin() + (from - first));
  }
  return absl::OkStatus();
}

}  // namespace df11::codec
