// Paged decode attention by FlashInfer: its batch decode kernel (a query-head group per KV head,
// the KV split across blocks by a plan when the batch is too small to fill the GPU) reading the
// KV pool's pages in place. For the head sizes this build instantiates (flashinfer_decode_<D>.cu,
// with and without logit soft-capping) and query groups of 1, 2, 3, 4 or 8 heads per KV head;
// CudaForwardOps leaves the rest, and sliding-window layers (FlashInfer's decode masks the
// positions outside the window but still reads them), to the project's kernel.
// Compiled only when FlashInfer's headers are (tools/install-flashinfer.sh; DF11_HAVE_FLASHINFER).
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FLASHINFER_DECODE_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FLASHINFER_DECODE_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "daemon/runtime/backends/cuda/forward_ops.h"

namespace df11::runtime::cuda {

// FlashInfer's working memory: the split KV's partial outputs (float_buffer) and the plan's
// arrays (int_buffer) on the device; the plan is written into page-locked host memory of the same
// size (pinned) and copied from there on the pass's stream.
struct FlashInferBuffers {
  void* float_buffer = nullptr;
  uint64_t float_bytes = 0;
  void* int_buffer = nullptr;
  void* pinned = nullptr;
  uint64_t int_bytes = 0;
};

// Whether FlashInfer's decode serves heads of head_dim with `group` query heads per KV head.
bool FlashInferDecodes(int64_t head_dim, int64_t group);

// One decode step's plan, made once before its layers (every layer of a model attends over the
// same pages) and used by each layer's Run.
class FlashInferDecode {
 public:
  // The step's sequences (sequence i is row i of q; their page offsets on the host); the plan's
  // arrays are copied on `stream` from the page-locked buffer, which must not change until the
  // pass is done. kResourceExhausted when the buffers are too small for the plan.
  absl::Status Plan(const FlashInferBuffers& buffers, const DecodeBatch& batch,
                    const AttentionShape& shape, int64_t positions_per_page, cudaStream_t stream);
  // The layer's attention: kv's page_indptr and last_page_length are the step's.
  absl::Status Run(const uint16_t* q, const AttentionShape& shape, const PagedKv& kv, uint16_t* out,
                   cudaStream_t stream);
  // Kernel launches of each Run under the current plan: the decode, and the merge of its KV
  // split when it has one.
  int launches() const { return split_kv_ ? 2 : 1; }

 private:
  FlashInferBuffers buffers_;
  std::vector<int64_t> plan_;  // FlashInfer's DecodePlanInfo
  AttentionShape planned_for_;
  int64_t sequences_ = 0;
  bool split_kv_ = false;
};

}  // namespace df11::runtime::cuda

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_DEVICE_FLASHINFER_DECODE_H_
