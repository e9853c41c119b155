// How a launch over several views (units, or ranges of them) numbers its work items (DF11 blocks,
// interleaved segments) launch-wide, for the GPU decoders' kernels. Device code only.
#ifndef DF11_CODEC_CUDA_LAUNCH_ITEMS_CUH_
#define DF11_CODEC_CUDA_LAUNCH_ITEMS_CUH_

#include <cstdint>

namespace df11::codec::gpu {

// first[i]: the launch-wide number of view i's first item, `count(view)` items each;
// first[n_views]: the total. Written by thread 0 of the CTA; the caller synchronizes after.
template <typename View, typename Count>
__device__ void NumberItems(const View* views, uint32_t n_views, uint32_t* first, Count count) {
  if (threadIdx.x != 0) return;
  uint32_t total = 0;
  for (uint32_t i = 0; i < n_views; ++i) {
    first[i] = total;
    total += count(views[i]);
  }
  first[n_views] = total;
}

// The view that holds launch-wide item g: the last i with first[i] <= g (binary search).
__device__ __forceinline__ uint32_t ViewOfItem(const uint32_t* first, uint32_t n_views,
                                               uint32_t g) {
  uint32_t lo = 0, hi = n_views;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (first[mid] <= g) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace df11::codec::gpu

#endif  // DF11_CODEC_CUDA_LAUNCH_ITEMS_CUH_
