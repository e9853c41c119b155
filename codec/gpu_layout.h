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

// Walks `unit`'s stream once, block by block on `pool` (nullptr: the calling thread), counting
// the codes of every segment, and checks the structure on the way as the block-parallel decoder
// does. kDataLoss naming the block for a corrupt stream.
absl::StatusOr<GpuLayout> BuildGpuLayout(const Unit& unit, ThreadPool* pool);

}  // namespace df11::codec

#endif  // DF11_CODEC_GPU_LAYOUT_H_
