// The GPU decoder's resident layout of a DF11 unit: what the load path adds to the official
// tensors so that the kernel decodes in one pass (codec/cuda/decode_steps.h). Built on the CPU
// from a validated unit; lossless (the official tensors stay as they are).
//
//   DF11_ASSIGN_OR_RETURN(GpuLayout layout, BuildGpuLayout(unit));
//   ... upload unit tensors + layout.segment_offsets + layout.table, fill a gpu::UnitView ...
#ifndef DF11_CODEC_GPU_LAYOUT_H_
#define DF11_CODEC_GPU_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/cuda/decode_steps.h"
#include "codec/format.h"
#include "codec/thread_pool.h"
#include "codec/unit.h"

namespace df11::codec {

struct GpuLayout {
  // Per 32-byte segment of the stream (kSegmentsPerBlock per block): the first element whose code
  // starts in it, counted from its block's first element.
  std::vector<uint16_t> segment_offsets;
  // The 11-bit multi-symbol table (gpu::kTableEntries entries).
  std::vector<uint32_t> table;

  // Device bytes beyond the official tensors (and their padding).
  uint64_t extra_bytes() const {
    return segment_offsets.size() * sizeof(uint16_t) + table.size() * sizeof(uint32_t);
  }
};

// The sizes that fix a unit's device image. All of them follow from the shapes of its tensors, so
// an estimate reads them from the safetensors headers without the data.
struct UnitSizes {
  uint64_t elements = 0;      // sign_mantissa bytes
  uint64_t stream_bytes = 0;  // encoded_exponent bytes
  uint64_t gaps_bytes = 0;    // 320 per block
  uint64_t lut_bytes = 0;
  uint64_t blocks() const { return gaps_bytes / format::kGapBytesPerBlock; }
  static UnitSizes Of(const Unit& unit);
};

// A unit resident on a GPU as the decoder reads it (gpu::UnitView): the official tensors, the
// stream with kStreamPadBytes zero bytes after it and the gaps with one, positions as n_blocks + 1
// u32, and the GpuLayout. Byte offsets from the image's start; every section starts on a 256-byte
// boundary. Padding bytes must read as zero.
struct GpuUnitImage {
  static constexpr uint64_t kAlignment = 256;
  uint64_t stream = 0, sign_mantissa = 0, gaps = 0, positions = 0, segment_offsets = 0, table = 0,
           luts = 0;
  uint64_t bytes = 0;  // the whole image, a multiple of kAlignment

  static GpuUnitImage Of(const UnitSizes& sizes);
  // The decoder's view of the whole unit whose image (laid out by Of(sizes)) starts at `base`,
  // writing its elements to `out`.
  gpu::UnitView View(const void* base, const UnitSizes& sizes, uint16_t* out) const;
};

// The 11-bit multi-symbol table of `unit` (GpuLayout::table), from its LUT rows alone.
std::vector<uint32_t> BuildDecodeTable(const Unit& unit);

// Walks `unit`'s stream once, block by block on `pool` (nullptr: the calling thread), counting
// the codes of every segment, and checks the structure on the way as the block-parallel decoder
// does. kDataLoss naming the block for a corrupt stream.
absl::StatusOr<GpuLayout> BuildGpuLayout(const Unit& unit, ThreadPool* pool);

}  // namespace df11::codec

#endif  // DF11_CODEC_GPU_LAYOUT_H_
