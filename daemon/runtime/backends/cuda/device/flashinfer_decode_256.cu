// FlashInfer's paged decode for heads of 256 (flashinfer_decode.h).
#include "daemon/runtime/backends/cuda/device/flashinfer_decode_impl.cuh"

namespace df11::runtime::cuda::flashinfer_decode {
DF11_FLASHINFER_DECODE_INSTANCE(256)
}  // namespace df11::runtime::cuda::flashinfer_decode
