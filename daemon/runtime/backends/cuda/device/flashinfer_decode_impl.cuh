// FlashInferDecode's work for one head size and soft-capping choice: included by the translation
// unit that instantiates it (flashinfer_decode_<D>.cu), so FlashInfer's templates compile once per
// head size.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FLASHINFER_DECODE_IMPL_CUH_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FLASHINFER_DECODE_IMPL_CUH_

#include <cuda_bf16.h>

#include <exception>
#include <flashinfer/attention/decode.cuh>
#include <flashinfer/attention/default_decode_params.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "codec/cuda/cuda_status.h"
#include "daemon/runtime/backends/cuda/device/flashinfer_decode.h"

namespace df11::runtime::cuda::flashinfer_decode {

using Params = flashinfer::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int32_t>;
// No custom mask, a sliding window (window_left -1 when there is none), soft-capping or not, no
// ALiBi.
template <bool kSoftCap>
using Variant = flashinfer::DefaultAttention<false, true, kSoftCap, false>;
constexpr auto kNoRope = flashinfer::PosEncodingMode::kNone;

template <uint32_t kHeadDim, bool kSoftCap>
absl::Status Plan(const FlashInferBuffers& b, const DecodeBatch& batch, const AttentionShape& s,
                  int64_t positions_per_page, cudaStream_t stream, std::vector<int64_t>& plan,
                  bool& split_kv) {
  try {
    flashinfer::DecodePlanInfo info;
    cudaError_t e = cudaErrorInvalidValue;
    DISPATCH_GQA_GROUP_SIZE(s.heads / s.kv_heads, kGroup, {
      e = flashinfer::DecodePlan<kHeadDim, kNoRope, Variant<kSoftCap>, Params>(
          b.float_buffer, b.float_bytes, b.int_buffer, b.pinned, b.int_bytes, info,
          const_cast<int32_t*>(batch.page_indptr), static_cast<uint32_t>(batch.sequences),
          static_cast<uint32_t>(s.heads), static_cast<uint32_t>(positions_per_page),
          /*enable_cuda_graph=*/false, stream,
          flashinfer::BatchDecodeWithPagedKVCacheWorkEstimationDispatched<
              kGroup, kHeadDim, kNoRope, Variant<kSoftCap>, Params>);
    });
    DF11_RETURN_IF_ERROR(::df11::cuda::CudaStatus(e, "FlashInfer decode plan"));
    plan = info.ToVector();
    split_kv = info.split_kv;
    return absl::OkStatus();
  } catch (const std::exception& x) {
    // FlashInfer throws when its buffers are too small or a group size is not instantiated.
    return absl::ResourceExhaustedError(absl::StrCat(
        "FlashInfer's decode plan for ", batch.sequences, " sequences of ", s.heads, " heads: ",
        x.what(), " (float buffer ", b.float_bytes, " bytes, int buffer ", b.int_bytes, ")"));
  }
}

template <uint32_t kHeadDim, bool kSoftCap>
absl::Status Run(const FlashInferBuffers& b, const std::vector<int64_t>& plan, const uint16_t* q,
                 const AttentionShape& s, const PagedKv& kv, int64_t sequences, uint16_t* out,
                 cudaStream_t stream) {
  flashinfer::DecodePlanInfo info;
  info.FromVector(plan);
  // The pool's layout (KvPagePool): a page holds every layer, [layer][keys | values][position]
  // [kv head][dim]; this layer's keys start KeyOffset(0) bytes into a page, its values one plane
  // later.
  const uint64_t plane = (kv.ValueOffset(0) - kv.KeyOffset(0)) / 2;
  auto* keys = reinterpret_cast<__nv_bfloat16*>(kv.pool + kv.KeyOffset(0));
  const int64_t strides[3] = {static_cast<int64_t>(kv.page_bytes / 2), kv.kv_heads * kv.head_dim,
                              kv.head_dim};
  flashinfer::paged_kv_t<__nv_bfloat16, int32_t> paged(
      static_cast<uint32_t>(kv.kv_heads), static_cast<uint32_t>(kv.positions_per_page), kHeadDim,
      static_cast<uint32_t>(sequences), flashinfer::QKVLayout::kNHD, keys, keys + plane, strides,
      reinterpret_cast<int32_t*>(const_cast<uint32_t*>(kv.pages)),
      const_cast<int32_t*>(kv.page_indptr), const_cast<int32_t*>(kv.last_page_length));
  Params p;
  p.q = reinterpret_cast<__nv_bfloat16*>(const_cast<uint16_t*>(q));
  p.paged_kv = paged;
  p.o = reinterpret_cast<__nv_bfloat16*>(out);
  p.num_qo_heads = static_cast<uint32_t>(s.heads);
  p.q_stride_n = static_cast<int32_t>(s.heads * kHeadDim);
  p.q_stride_h = static_cast<int32_t>(kHeadDim);
  // FlashInfer attends to positions kv_len - 1 - window_left .. kv_len - 1.
  p.window_left = s.window > 0 ? static_cast<int32_t>(s.window - 1) : -1;
  p.logits_soft_cap = s.softcap;
  p.sm_scale = s.scale;
  p.rope_rcp_scale = 1.0f;
  p.rope_rcp_theta = 1.0f;
  p.request_indices =
      flashinfer::GetPtrFromBaseOffset<int32_t>(b.int_buffer, info.request_indices_offset);
  p.kv_tile_indices =
      flashinfer::GetPtrFromBaseOffset<int32_t>(b.int_buffer, info.kv_tile_indices_offset);
  p.o_indptr = flashinfer::GetPtrFromBaseOffset<int32_t>(b.int_buffer, info.o_indptr_offset);
  p.kv_chunk_size_ptr =
      flashinfer::GetPtrFromBaseOffset<int32_t>(b.int_buffer, info.kv_chunk_size_ptr_offset);
  p.padded_batch_size = static_cast<uint32_t>(info.padded_batch_size);
  __nv_bfloat16* tmp_v = nullptr;
  float* tmp_s = nullptr;
  if (info.split_kv) {
    tmp_v = flashinfer::GetPtrFromBaseOffset<__nv_bfloat16>(b.float_buffer, info.v_offset);
    tmp_s = flashinfer::GetPtrFromBaseOffset<float>(b.float_buffer, info.s_offset);
  }
  try {
    return ::df11::cuda::CudaStatus(
        flashinfer::BatchDecodeWithPagedKVCacheDispatched<kHeadDim, kNoRope, Variant<kSoftCap>>(
            p, tmp_v, tmp_s, /*enable_pdl=*/false, stream),
        "FlashInfer batch decode");
  } catch (const std::exception& x) {
    return absl::InternalError(absl::StrCat("FlashInfer's batch decode: ", x.what()));
  }
}

// The two functions a head size's translation unit defines (declared in flashinfer_decode.cc).
#define DF11_FLASHINFER_DECODE_INSTANCE(D)                                                      \
  absl::Status PlanDecode##D(const FlashInferBuffers& b, const DecodeBatch& batch,              \
                             const AttentionShape& s, int64_t positions_per_page,               \
                             cudaStream_t stream, std::vector<int64_t>& plan, bool& split_kv) { \
    return s.softcap > 0                                                                        \
               ? Plan<D, true>(b, batch, s, positions_per_page, stream, plan, split_kv)         \
               : Plan<D, false>(b, batch, s, positions_per_page, stream, plan, split_kv);       \
  }                                                                                             \
  absl::Status RunDecode##D(const FlashInferBuffers& b, const std::vector<int64_t>& plan,       \
                            const uint16_t* q, const AttentionShape& s, const PagedKv& kv,      \
                            int64_t sequences, uint16_t* out, cudaStream_t stream) {            \
    return s.softcap > 0 ? Run<D, true>(b, plan, q, s, kv, sequences, out, stream)              \
                         : Run<D, false>(b, plan, q, s, kv, sequences, out, stream);            \
  }

}  // namespace df11::runtime::cuda::flashinfer_decode

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FLASHINFER_DECODE_IMPL_CUH_
