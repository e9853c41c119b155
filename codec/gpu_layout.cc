#include "codec/gpu_layout.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codec/base/first_error.h"
#include "codec/base/status_macros.h"
#include "codec/cuda/decode_steps.h"
#include "codec/format.h"
#include "codec/prefix_decode.h"

namespace df11::codec {
namespace {

constexpr uint64_t kSegmentBits = gpu::kSegmentBytes * 8;
// The CPU walk uses the same 12-bit, 6-code table shape as the CPU decoder.
constexpr int kWalkTableBits = 12;

absl::Status Corrupt(const Unit& unit, size_t block, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("DF11 unit ", unit.name(), ": block ", block, ": ", what));
}

// Counts the codes of block b per segment into offsets[0..127] (offsets from the block's first
// element) and checks where the codes end.
absl::Status WalkBlock(const Unit& unit, const std::vector<uint64_t>& table, size_t b,
                       uint16_t* offsets) {
  const std::span<const uint32_t> p = unit.positions();
  const uint32_t count = p[b + 1] - p[b];
  const uint8_t* data = unit.tensors().encoded_exponent.data();
  const size_t n_bytes = unit.num_bytes();
  const uint64_t block_bit = b * format::kBitsPerBlock;
  uint64_t bitpos = block_bit + unit.gap(b * format::kThreadsPerBlock);
  uint32_t decoded = 0;
  offsets[0] = 0;
  for (int s = 1; s <= gpu::kSegmentsPerBlock; ++s) {
    // Codes that start before the boundary belong to segments < s.
    const uint64_t boundary = block_bit + s * kSegmentBits;
    while (decoded < count && bitpos < boundary) {
      const uint64_t w = Window(data, n_bytes, bitpos);
      const uint64_t e = table[w >> (64 - kWalkTableBits)];
      const uint32_t n = (e >> 48) & 0xFF;
      const uint32_t bits = static_cast<uint32_t>(e >> 56);
      // A whole entry is used when its codes all start before the boundary and do not overrun
      // the block's count; otherwise one code at a time.
      if (n > 0 && bitpos + bits <= boundary && decoded + n <= count) {
        decoded += n;
        bitpos += bits;
        continue;
      }
      int symbol;
      const int length = WalkLut(unit, w, symbol);
      if (length == 0) return Corrupt(unit, b, "the lookup tables give no valid code");
      ++decoded;
      bitpos += length;
    }
    if (s < gpu::kSegmentsPerBlock) offsets[s] = static_cast<uint16_t>(decoded);
  }
  if (decoded != count) {
    return Corrupt(unit, b, absl::StrCat(decoded, " codes start in the block; output_positions says ",
                                         count));
  }
  if (count == 0) return absl::OkStatus();
  if (p[b + 1] < unit.num_elements()) {
    const uint64_t next = (b + 1) * format::kBitsPerBlock + unit.gap((b + 1) * format::kThreadsPerBlock);
    if (bitpos != next) {
      return Corrupt(unit, b, absl::StrCat("codes end at bit ", bitpos, ", the next block starts at ", next));
    }
  } else if ((bitpos + 7) / 8 != n_bytes) {
    return Corrupt(unit, b, absl::StrCat("the last code ends at bit ", bitpos, " of a ", n_bytes,
                                         "-byte stream"));
  }
  return absl::OkStatus();
}

}  // namespace

UnitSizes UnitSizes::Of(const Unit& unit) {
  const UnitTensors& t = unit.tensors();
  return UnitSizes{.elements = t.sign_mantissa.size(),
                   .stream_bytes = t.encoded_exponent.size(),
                   .gaps_bytes = t.gaps.size(),
                   .lut_bytes = t.luts.size()};
}

GpuUnitImage GpuUnitImage::Of(const UnitSizes& s) {
  GpuUnitImage image;
  uint64_t size = 0;
  auto section = [&size](uint64_t bytes) {
    const uint64_t at = size;
    size = (size + bytes + kAlignment - 1) / kAlignment * kAlignment;
    return at;
  };
  image.stream = section(s.stream_bytes + gpu::kStreamPadBytes);
  image.sign_mantissa = section(s.elements);
  image.gaps = section(s.gaps_bytes + 1);
  image.positions = section((s.blocks() + 1) * sizeof(uint32_t));
  image.segment_offsets = section(s.blocks() * gpu::kSegmentsPerBlock * sizeof(uint16_t));
  image.table = section(gpu::kTableEntries * sizeof(uint32_t));
  image.luts = section(s.lut_bytes);
  image.bytes = size;
  return image;
}

gpu::UnitView GpuUnitImage::View(const void* base, const UnitSizes& sizes, uint16_t* out) const {
  const auto* b = static_cast<const char*>(base);
  return gpu::UnitView{reinterpret_cast<const uint32_t*>(b + stream),
                       reinterpret_cast<const uint8_t*>(b + sign_mantissa),
                       reinterpret_cast<const uint8_t*>(b + gaps),
                       reinterpret_cast<const uint32_t*>(b + positions),
                       reinterpret_cast<const uint16_t*>(b + segment_offsets),
                       reinterpret_cast<const uint32_t*>(b + table),
                       reinterpret_cast<const uint8_t*>(b + luts),
                       out,
                       static_cast<uint32_t>(sizes.elements),
                       static_cast<uint32_t>(sizes.stream_bytes),
                       static_cast<uint32_t>(sizes.blocks()),
                       static_cast<uint32_t>(sizes.lut_bytes / 256)};
}

std::vector<uint32_t> BuildDecodeTable(const Unit& unit) {
  std::vector<uint32_t> table(gpu::kTableEntries);
  for (uint32_t prefix = 0; prefix < gpu::kTableEntries; ++prefix) {
    const PrefixCodes c = DecodePrefix(unit, prefix, gpu::kTableBits, gpu::kMaxSymbolsPerEntry);
    uint32_t e = uint32_t(c.count) << 24 | uint32_t(c.bits) << 26;
    for (int i = 0; i < c.count; ++i) e |= uint32_t{c.symbols[i]} << (8 * i);
    table[prefix] = e;
  }
  return table;
}

absl::StatusOr<GpuLayout> BuildGpuLayout(const Unit& unit, ThreadPool* pool) {
  GpuLayout layout;
  layout.table = BuildDecodeTable(unit);
  std::vector<uint64_t> walk_table(size_t{1} << kWalkTableBits);
  for (uint32_t prefix = 0; prefix < walk_table.size(); ++prefix) {
    const PrefixCodes c = DecodePrefix(unit, prefix, kWalkTableBits, 6);
    walk_table[prefix] = uint64_t(c.count) << 48 | uint64_t(c.bits) << 56;
  }
  layout.segment_offsets.resize(unit.num_blocks() * gpu::kSegmentsPerBlock);
  base::FirstError errors;
  auto walk = [&](size_t begin, size_t end) {
    for (size_t b = begin; b < end; ++b) {
      absl::Status s = WalkBlock(unit, walk_table, b,
                                 layout.segment_offsets.data() + b * gpu::kSegmentsPerBlock);
      if (!s.ok()) {
        errors.Add(std::move(s));
        return;
      }
    }
  };
  if (pool == nullptr) {
    walk(0, unit.num_blocks());
  } else {
    pool->ParallelFor(unit.num_blocks(), /*grain=*/64, walk);
  }
  DF11_RETURN_IF_ERROR(errors.status());
  return layout;
}

}  // namespace df11::codec
