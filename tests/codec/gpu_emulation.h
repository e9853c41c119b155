// Runs the GPU decoder's steps (codec/cuda/decode_steps.h) on the CPU, thread by thread and block
// by block in the kernel's order, so that their indexing, gap handling and tail logic are tested
// bit-exactly without a GPU.
#ifndef DF11_TESTS_CODEC_GPU_EMULATION_H_
#define DF11_TESTS_CODEC_GPU_EMULATION_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "codec/unit.h"

namespace df11::testing {

// Builds the GPU layout of `unit`, lays out host buffers as the device would hold them (aligned,
// zero-padded stream), and for each block runs DecodeSegment for every thread, then JoinSlice for
// every thread. kDataLoss if the layout cannot be built or a thread reports a mismatch.
absl::Status DecodeWithGpuStepsOnCpu(const codec::Unit& unit, std::span<uint16_t> out);

}  // namespace df11::testing

#endif  // DF11_TESTS_CODEC_GPU_EMULATION_H_
