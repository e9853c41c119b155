#include "codec/unit.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codec/format.h"

namespace df11::codec {
namespace {

absl::Status Corrupt(absl::string_view unit, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("DF11 unit ", unit, ": ", what));
}

uint32_t LoadLe32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

int Unit::gap(size_t chunk) const {
  // The official kernel's read: a big-endian 16-bit window over the two bytes holding the field.
  const size_t bit = chunk * format::kGapBits;
  const uint8_t* g = tensors_.gaps.data();
  const uint32_t hi = g[bit / 8];
  const uint32_t lo = bit / 8 + 1 < tensors_.gaps.size() ? g[bit / 8 + 1] : 0;
  return static_cast<int>((((hi << 8) | lo) >> (16 - format::kGapBits - bit % 8)) & 0x1F);
}

absl::StatusOr<Unit> Unit::Validate(const UnitTensors& t, std::string name) {
  const uint64_t n_elements = t.sign_mantissa.size();
  const uint64_t n_bytes = t.encoded_exponent.size();

  // Tables.
  if (t.lut_rows < format::kMinLutRows || t.lut_rows > format::kMaxLutRows) {
    return Corrupt(name, absl::StrCat("luts has ", t.lut_rows, " rows; DF11 allows ",
                                      format::kMinLutRows, " to ", format::kMaxLutRows));
  }
  if (t.luts.size() != static_cast<uint64_t>(t.lut_rows) * format::kLutRowBytes) {
    return Corrupt(name, absl::StrCat("luts holds ", t.luts.size(), " bytes, not ", t.lut_rows,
                                      " rows of 256"));
  }
  const int decode_rows = static_cast<int>(t.lut_rows) - 1;
  const uint8_t* lengths = t.luts.data() + size_t{256} * decode_rows;
  for (int v = 0; v < 256; ++v) {
    if (lengths[v] > format::kMaxCodeLength) {
      return Corrupt(name, absl::StrCat("code length ", int{lengths[v]}, " for exponent ", v,
                                        " exceeds ", format::kMaxCodeLength));
    }
    if (v >= format::kFirstPointerValue && lengths[v] != 0) {
      return Corrupt(name, absl::StrCat("code length set for pointer value ", v));
    }
  }
  for (int r = 0; r < decode_rows; ++r) {
    for (int key = 0; key < 256; ++key) {
      const int v = t.luts[size_t{256} * r + key];
      if (v < format::kFirstPointerValue) continue;  // a symbol; a zero length is caught at decode
      const int target = 256 - v;
      if (target < 1 || target > decode_rows - 1) {
        return Corrupt(name, absl::StrCat("LUT row ", r, " key ", key, " points to row ", target,
                                          " of ", decode_rows, " decode rows"));
      }
    }
  }

  // Sizes. Codes are 1..32 bits, so the stream holds between n/8 and 4n (+1 tail) bytes.
  if (n_elements == 0 || n_elements > format::kMaxUnitElements) {
    return Corrupt(name, absl::StrCat("sign_mantissa holds ", n_elements,
                                      " elements; DF11 units hold 1 to 2^31 - 1"));
  }
  if (n_bytes < (n_elements + 7) / 8 || n_bytes > 4 * n_elements + 1) {
    return Corrupt(name, absl::StrCat("encoded_exponent holds ", n_bytes, " bytes for ", n_elements,
                                      " elements; codes of 1 to 32 bits need ",
                                      (n_elements + 7) / 8, " to ", 4 * n_elements + 1));
  }
  const uint64_t n_blocks = format::NumBlocks(n_bytes);
  if (t.gaps.size() != n_blocks * format::kGapBytesPerBlock) {
    return Corrupt(name, absl::StrCat("gaps holds ", t.gaps.size(), " bytes; ", n_blocks,
                                      " blocks need ", n_blocks * format::kGapBytesPerBlock));
  }

  // Block start positions: n_blocks + 1 little-endian u32, or n_blocks (official missing entry).
  const uint64_t n_positions = t.output_positions.size() / 4;
  if (t.output_positions.size() % 4 != 0 ||
      (n_positions != n_blocks + 1 && n_positions != n_blocks)) {
    return Corrupt(name, absl::StrCat("output_positions holds ", t.output_positions.size(),
                                      " bytes; ", n_blocks, " blocks need ", 4 * (n_blocks + 1)));
  }
  Unit unit;
  unit.positions_.resize(n_blocks + 1, static_cast<uint32_t>(n_elements));
  for (uint64_t b = 0; b < n_positions; ++b) {
    unit.positions_[b] = LoadLe32(t.output_positions.data() + 4 * b);
  }
  if (unit.positions_[0] != 0) {
    return Corrupt(name, absl::StrCat("output_positions[0] is ", unit.positions_[0], ", not 0"));
  }
  for (uint64_t b = 0; b < n_blocks; ++b) {
    const uint32_t first = unit.positions_[b];
    const uint32_t next = unit.positions_[b + 1];
    if (next < first || next - first > format::kBitsPerBlock) {
      return Corrupt(name, absl::StrCat("block ", b, " spans elements ", first, " to ", next,
                                        "; a block decodes 0 to 32768"));
    }
  }
  if (unit.positions_[n_blocks] != n_elements) {
    return Corrupt(name, absl::StrCat("output_positions ends at ", unit.positions_[n_blocks],
                                      ", not at the ", n_elements, " elements"));
  }

  // The first code starts at bit 0, so chunk 0's gap is 0. Later block starts are pinned by the
  // end of the block before them; this pins block 0.
  unit.tensors_ = t;
  if (unit.gap(0) != 0) {
    return Corrupt(name, absl::StrCat("the gap of chunk 0 is ", unit.gap(0),
                                      "; the first code starts at bit 0"));
  }

  // Split points between the concatenated weights.
  int64_t previous = 0;
  for (size_t i = 0; i < t.split_positions.size(); ++i) {
    const int64_t s = t.split_positions[i];
    if (s <= previous || s >= static_cast<int64_t>(n_elements)) {
      return Corrupt(name, absl::StrCat("split_positions[", i, "] = ", s,
                                        " is not increasing inside (0, ", n_elements, ")"));
    }
    previous = s;
  }

  unit.name_ = std::move(name);
  return unit;
}

}  // namespace df11::codec
