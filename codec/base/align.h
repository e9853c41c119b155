// Rounding sizes and offsets up to a multiple: where buffers, images and their parts start.
#ifndef DF11_CODEC_BASE_ALIGN_H_
#define DF11_CODEC_BASE_ALIGN_H_

#include <cstdint>

namespace df11::base {

// `n` rounded up to a multiple of `to` (> 0).
constexpr uint64_t AlignUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace df11::base

#endif  // DF11_CODEC_BASE_ALIGN_H_
