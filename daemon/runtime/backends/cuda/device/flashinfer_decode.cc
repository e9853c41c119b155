#include "daemon/runtime/backends/cuda/device/flashinfer_decode.h"

#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"

namespace df11::runtime::cuda {
namespace flashinfer_decode {
// Defined by flashinfer_decode_<D>.cu.
#define DF11_DECLARE(D)                                                                        \
  absl::Status PlanDecode##D(const FlashInferBuffers& b, const DecodeBatch& batch,             \
                             const AttentionShape& s, int64_t positions_per_page,              \
                             cudaStream_t stream, std::vector<int64_t>& plan, bool& split_kv); \
  absl::Status RunDecode##D(const FlashInferBuffers& b, const std::vector<int64_t>& plan,      \
                            const uint16_t* q, const AttentionShape& s, const PagedKv& kv,     \
                            int64_t sequences, uint16_t* out, cudaStream_t stream);
DF11_DECLARE(128)
DF11_DECLARE(256)
#undef DF11_DECLARE
}  // namespace flashinfer_decode

bool FlashInferDecodes(int64_t head_dim, int64_t group) {
  const bool instantiated = head_dim == 128 || head_dim == 256;
  return instantiated && (group == 1 || group == 2 || group == 3 || group == 4 || group == 8);
}

absl::Status FlashInferDecode::Plan(const FlashInferBuffers& buffers, const DecodeBatch& batch,
                                    const AttentionShape& shape, int64_t positions_per_page,
                                    cudaStream_t stream) {
  plan_.clear();
  sequences_ = 0;
  if (!FlashInferDecodes(shape.head_dim, shape.heads / shape.kv_heads) ||
      shape.heads % shape.kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("FlashInfer's decode takes no heads of ",
                                                   shape.head_dim, " in groups of ", shape.heads,
                                                   " / ", shape.kv_heads));
  }
  buffers_ = buffers;
  if (shape.head_dim == 128) {
    DF11_RETURN_IF_ERROR(flashinfer_decode::PlanDecode128(buffers, batch, shape, positions_per_page,
                                                          stream, plan_, split_kv_));
  } else {
    DF11_RETURN_IF_ERROR(flashinfer_decode::PlanDecode256(buffers, batch, shape, positions_per_page,
                                                          stream, plan_, split_kv_));
  }
  planned_for_ = shape;
  sequences_ = batch.sequences;
  return absl::OkStatus();
}

absl::Status FlashInferDecode::Run(const uint16_t* q, const AttentionShape& shape,
                                   const PagedKv& kv, uint16_t* out, cudaStream_t stream) {
  // A plan is for one model's heads and one step's sequences.
  if (plan_.empty() || shape.heads != planned_for_.heads ||
      shape.kv_heads != planned_for_.kv_heads || shape.head_dim != planned_for_.head_dim ||
      (shape.softcap > 0) != (planned_for_.softcap > 0)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "FlashInfer's decode of ", shape.heads, " heads of ", shape.head_dim, " without its plan"));
  }
  if (shape.head_dim == 128) {
    return flashinfer_decode::RunDecode128(buffers_, plan_, q, shape, kv, sequences_, out, stream);
  }
  return flashinfer_decode::RunDecode256(buffers_, plan_, q, shape, kv, sequences_, out, stream);
}

}  // namespace df11::runtime::cuda
