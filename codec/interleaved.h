// A DF11 unit's exponents re-encoded, in memory, for AVX-512 decoding: the layout the CPU backend
// keeps instead of the official bitstream on CPUs that have AVX-512 VBMI2.
//
// DF11's bitstream is one Huffman stream per 2 KB block, decoded one code after another: a chain
// of dependent table lookups that no CPU runs faster than about 2.5 G exponents/s per core. Here
// the same exponents are coded so that 64 lanes decode side by side:
//   - the unit is cut into segments of whole rows (about 32K elements);
//   - in a segment, element j is coded in lane j % 64, so one step of the 64 lanes yields 64
//     consecutive exponents;
//   - one prefix code per unit, at most 7 bits long, so a lane's next code is resolved by a
//     128-entry table (one AVX-512 byte permutation for 16 lanes); the 31 most frequent exponents
//     (fewer when cheaper) have codes, the others are an escape code followed by the exponent's
//     byte in a separate escape stream;
//   - the lanes' 16-bit words are stored in the order the decoder asks for them (a lane whose
//     buffer holds fewer than 16 bits after a code asks for one), so 16 lanes refill from one
//     stream with one expanding load.
// The sign/mantissa bytes stay the unit's own. On LLM weights the codes take about 2.63 bits per
// exponent against DF11's 2.8 (whose 5-bit gaps cost 0.2), so the re-encoded unit is smaller.
//
//   DF11_ASSIGN_OR_RETURN(InterleavedUnit u, InterleavedUnit::Build(decoder, regions, &pool));
//   std::vector<uint16_t> bf16(u.num_elements());
//   DF11_RETURN_IF_ERROR(u.Decode(bf16, &pool));
#ifndef DF11_CODEC_INTERLEAVED_H_
#define DF11_CODEC_INTERLEAVED_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/cuda/interleaved_steps.h"
#include "codec/decoder.h"
#include "codec/thread_pool.h"

namespace df11::codec {

class InterleavedUnit {
 public:
  static constexpr int kLanes = 64;
  static constexpr int kMaxCodeLength = 7;
  static constexpr int kMaxCodedExponents = 31;  // plus the escape code
  // Segments hold whole rows, this many elements or the next whole row above it (by default).
  static constexpr size_t kSegmentElements = 32768;

  // Rows of one tensor of the unit: elements [first, first + rows * row_length).
  struct Region {
    size_t first = 0;
    int64_t rows = 0;
    int64_t row_length = 0;
  };

  // Whether this CPU runs the AVX-512 decoder (AVX-512 F, BW, VL, VBMI, VBMI2 and BMI2). Without it
  // there is no reason to re-encode: the DF11 decoder is faster than the portable one here.
  static bool Supported();

  // Re-encodes the unit of `decoder`, decoding it twice (a histogram, then the codes) on `pool`
  // (nullptr: this thread); the DF11 decoder checks the bitstream on the way. `regions` must
  // cover the unit in order (kInvalidArgument otherwise); kDataLoss from the DF11 decoder.
  // Segments hold `segment_elements` elements or the next whole row above it: shorter segments
  // give a GPU more of them to decode side by side, at about 16 bits of padding per lane each.
  static absl::StatusOr<InterleavedUnit> Build(const UnitDecoder& decoder,
                                               std::vector<Region> regions, ThreadPool* pool,
                                               size_t segment_elements = kSegmentElements);

  size_t num_elements() const { return sign_mantissa_.size(); }
  size_t num_regions() const { return regions_.size(); }
  const Region& region(size_t r) const { return regions_[r]; }
  // Region r's segments are [first_segment(r), first_segment(r + 1)).
  size_t first_segment(size_t r) const { return region_segments_[r]; }
  size_t num_segments() const { return segments_.size() - 1; }
  // The first element of segment s (s <= num_segments(): the last is num_elements()).
  size_t segment_first(size_t s) const { return segments_[s].first; }
  // Bytes this object holds: codes, escapes, segment index and tables. The sign/mantissa bytes
  // are the unit's and not counted.
  uint64_t stored_bytes() const;
  // Mean stored bits per exponent (codes, escapes and index).
  double bits_per_exponent() const { return 8.0 * stored_bytes() / num_elements(); }

  // Whole unit into `out` (num_elements() values, else kInvalidArgument), segments split over
  // `pool`'s threads (nullptr: this thread).
  absl::Status Decode(std::span<uint16_t> out, ThreadPool* pool) const;
  // Elements [first, first + out.size()) (kInvalidArgument outside the unit), on this thread.
  absl::Status DecodeElements(size_t first, std::span<uint16_t> out) const;
  // BF16 values of segments [begin, end) into out[0 ..): the AVX-512 decoder where Supported(),
  // else DecodeSegmentsPortable.
  void DecodeSegments(size_t begin, size_t end, uint16_t* out) const;
  // The same values by plain C++, lane by lane: the definition of the layout, and the reference
  // the AVX-512 decoder is tested against.
  void DecodeSegmentsPortable(size_t begin, size_t end, uint16_t* out) const;

  // y[k] = W[k] · x for the k-th row of segments [begin, end), which must lie in one region
  // whose rows are a multiple of 16 long (FusedMatVecSupported). Sums in the order of
  // runtime::MatVecBf16 (32 lanes, fused multiply-adds, the same reduction), so the results are
  // bit-identical to it on the decoded rows. `x` is the region's row_length values in natural
  // order. Requires Supported().
  void MatVecSegments(size_t begin, size_t end, const float* x, float* y) const;
  bool FusedMatVecSupported(size_t r) const { return regions_[r].row_length % 16 == 0; }

  // The layout's parts, for decoders outside this class (the GPU decoder copies them):
  // segment s's words start at words()[segment_word(s)] and its escape bytes at
  // escapes()[segment_escape(s)] (s <= num_segments(): the last are the ends); both arrays end
  // with kLanes entries of room. Prefix p (the top 7 bits of a lane) is the code of length
  // code_length(p) of exponent code_exponent(p), or the escape code for p in
  // [escape_begin(), escape_end()).
  std::span<const uint16_t> words() const { return words_; }
  std::span<const uint8_t> escapes() const { return escapes_; }
  std::span<const uint8_t> sign_mantissa() const { return sign_mantissa_; }
  size_t segment_word(size_t s) const { return segments_[s].word; }
  size_t segment_escape(size_t s) const { return segments_[s].escape; }
  int code_length(int prefix) const { return code_.length[prefix]; }
  uint8_t code_exponent(int prefix) const { return code_.exponent[prefix]; }
  int escape_begin() const { return code_.escape_begin; }
  int escape_end() const { return code_.escape_end; }
  // The code table and the segment starts in the GPU decoder's formats
  // (codec/cuda/interleaved_steps.h): kInterleavedTableEntries entries, num_segments() + 1 starts.
  std::vector<uint16_t> GpuTable() const;
  std::vector<gpu::InterleavedSegment> GpuSegments() const;

 private:
  struct Segment {
    size_t first = 0;   // first element
    size_t word = 0;    // first 16-bit word in words_
    size_t escape = 0;  // first byte in escapes_
    size_t region = 0;
  };
  // Length and exponent of each 7-bit prefix; prefixes in [escape_begin_, escape_end_) are the
  // escape code.
  struct Code {
    std::array<uint8_t, 128> length{};
    std::array<uint8_t, 128> exponent{};
    uint8_t escape_begin = 0, escape_end = 0;
  };

  template <typename Sink>
  void DecodeSegmentAvx512(size_t s, Sink& sink) const;

  Code code_;
  std::span<const uint8_t> sign_mantissa_;
  std::vector<Region> regions_;
  std::vector<size_t> region_segments_;  // num_regions() + 1 entries
  std::vector<Segment> segments_;        // num_segments() + 1 entries, the last a sentinel
  std::vector<uint16_t> words_;          // with kLanes words of room past the end
  std::vector<uint8_t> escapes_;         // with kLanes bytes of room past the end
};

}  // namespace df11::codec

#endif  // DF11_CODEC_INTERLEAVED_H_
