// Runs the GPU kernels' steps (codec/cuda/decode_steps.h) on the CPU, thread by thread and block
// by block in the kernels' order, so that their indexing, gap handling and tail logic are tested
// bit-exactly without a GPU.
#ifndef DF11_TESTS_CODEC_GPU_EMULATION_H_
#define DF11_TESTS_CODEC_GPU_EMULATION_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codec/unit.h"

namespace df11::testing {

// The layout pass (BuildSegmentOffsets): every thread's CountSegment, then each block's
// FinishBlockOffsets. kDataLoss when a block's counts do not add up.
absl::StatusOr<std::vector<uint16_t>> BuildOffsetsWithGpuStepsOnCpu(const codec::Unit& unit);

// Lays out host buffers as the device would hold them (aligned, zero-padded stream) and for each
// block runs DecodeSegment for every thread, then JoinSlice for every thread. The segment offsets
// come from BuildGpuLayout, or with `offsets_from_layout_pass` from the emulated layout pass, which
// must then give BuildGpuLayout's offsets exactly (kInternal naming the first difference
// otherwise). kDataLoss if the layout cannot be built or a thread reports a mismatch.
absl::Status DecodeWithGpuStepsOnCpu(const codec::Unit& unit, std::span<uint16_t> out,
                                     bool offsets_from_layout_pass = false);

}  // namespace df11::testing

#endif  // DF11_TESTS_CODEC_GPU_EMULATION_H_
