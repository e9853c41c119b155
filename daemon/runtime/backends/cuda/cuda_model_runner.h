// The CUDA backend's forward passes: a batch of sequences of one resident model through the
// decoder graph (decoder_graph.h), its operations enqueued on a compute stream with the device's
// ForwardOps. Activations are BF16 beside an fp32 residual stream; products use the decoded
// scratch (or resident BF16 tensors) through cuBLAS, attention reads each sequence's KV pages,
// logits are fp32. Layer l + 1 decodes on the decode queue's stream while layer l computes. A pass
// of at most fused_max_rows tokens decodes no tiled unit: its layers (and the head) multiply by the
// tiled matrices with ForwardOps::TiledLinear, the products that share an input (q, k, v; gate, up)
// in one launch. Other short passes (up to 64 tokens) compute those as one cuBLAS product where
// the weights are adjacent, and split the result. A pass's buffers are one arena allocation
// (CudaArena::AcquirePassBuffersLocked). A long prompt runs in passes of at most max_pass_tokens.
//
// One pass at a time: mu() is held for a whole Forward, and placement takes it too, so that the
// scratch never moves under a pass.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_MODEL_RUNNER_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_MODEL_RUNNER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/runtime/backends/cuda/cuda_arena.h"
#include "daemon/runtime/backends/cuda/cuda_decode_queue.h"
#include "daemon/runtime/backends/cuda/cuda_placed_model.h"
#include "daemon/runtime/backends/cuda/forward_ops.h"
#include "daemon/runtime/backends/cuda/gpu_device.h"
#include "daemon/runtime/backends/cuda/gpu_handles.h"
#include "daemon/runtime/backends/cuda/kv_page_pool.h"
#include "daemon/runtime/engine/backend.h"
#include "daemon/runtime/engine/decoder_graph.h"

namespace df11::runtime {

class CudaModelRunner {
 public:
  struct Options {
    uint64_t max_pass_tokens = 2048;
    int64_t fused_max_rows = ForwardOps::kMaxTiledRows;
  };

  CudaModelRunner(GpuDevice& device, CudaArena& arena, CudaDecodeQueue& queue,
                  const KvPagePool& kv_pool, const Options& options, std::string device_name);
  absl::Status Init();
  ~CudaModelRunner();

  absl::Mutex& mu() const ABSL_LOCK_RETURNED(mu_) { return mu_; }

  // Device time per decoder operation, summed over the passes run while profiling was on.
  void SetProfiling(bool on) { profiling_ = on; }
  std::map<std::string, DeviceWork::OpTime> profile() const ABSL_LOCKS_EXCLUDED(profile_mu_);
  // The host's time from each pass's start until its logits' copy was issued, summed.
  double enqueue_seconds() const { return enqueue_nanoseconds_.load() * 1e-9; }

  // Backend::Forward for a batch already checked (the caches are this backend's, with room; the
  // tokens are in the vocabulary), with `ops`.
  absl::Status Forward(const CudaPlacedModel& m, ForwardOps& ops,
                       std::span<const SequenceStep> batch, std::span<float> logits)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One pass's operations: the decoder graph's on this backend.
  class Pass;
  // The activations kept in fp32: the residual stream and a block's output before it joins it.
  static bool IsF32(Activations a) {
    return a == Activations::kResidual || a == Activations::kBranch;
  }
  // Offsets of one pass's buffers in its arena allocation `id`.
  struct PassBuffers {
    CudaArena::Id id = 0;
    // Each of the pass's activations (by Activations), [rows][width]: fp32 where IsF32, else
    // BF16.
    std::array<uint64_t, kActivationKinds> activations{};
    // BF16: each sequence's last row of x, normed.
    uint64_t last = 0;
    // BF16 outputs of a grouped product (q, k, v or gate, up) before the split, in short passes.
    uint64_t grouped = 0;
    // fp32: each sequence's last row of x.
    uint64_t last_x = 0;
    uint64_t logits = 0;
    // Short passes over lane-stream units: the fused products' error flag and pieces.
    uint64_t lane_workspace = 0;
    // Written by the host (copied from the runner's pinned buffer): the KV pages each sequence
    // uses, each row's sequence's first page and its position, each sequence's last row of x
    // (byte offsets from the buffers' start), each sequence's pages in the list (S + 1 offsets)
    // and its last page's positions (a decode step's DecodeBatch), and the embedding rows'
    // offsets (bytes, in their space).
    uint64_t pages = 0, row_first_page = 0, row_position = 0, last_rows = 0;
    uint64_t page_indptr = 0, last_page_length = 0, embedding_rows = 0;
    // The allocation's bytes.
    uint64_t bytes = 0;
  };
  // Where, in the page-locked buffer, a short pass's lane products' error flag comes back: just
  // past the mirrored metadata.
  uint32_t* LaneFlagCopy(const PassBuffers& b) const {
    return reinterpret_cast<uint32_t*>(static_cast<char*>(pinned_) + (b.bytes - b.pages));
  }
  // One pass over at most max_pass_tokens tokens.
  absl::Status RunPass(const CudaPlacedModel& m, ForwardOps& ops,
                       std::span<const SequenceStep> batch, std::span<float> logits)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  GpuDevice& device_;
  CudaArena& arena_;
  CudaDecodeQueue& queue_;
  const KvPagePool& kv_pool_;
  const Options options_;
  const std::string device_name_;
  mutable absl::Mutex mu_ ABSL_ACQUIRED_BEFORE(arena_.mu());
  std::unique_ptr<DeviceStream> stream_;
  // Reused from pass to pass (under mu_), so a step allocates nothing once warm: the rows'
  // tokens, the embedding rows of one decode call, and page-locked memory mirroring the pass
  // buffers' metadata (PassBuffers::pages on).
  std::vector<int32_t> tokens_;
  std::vector<DeviceTensor> embedded_;
  void* pinned_ = nullptr;
  uint64_t pinned_bytes_ = 0;
  std::atomic<bool> profiling_{false};
  std::atomic<uint64_t> enqueue_nanoseconds_{0};
  std::chrono::steady_clock::time_point pass_start_;         // under mu_
  std::vector<std::unique_ptr<DeviceEvent>> timing_events_;  // profiling's, under mu_
  mutable absl::Mutex profile_mu_;
  std::map<std::string, DeviceWork::OpTime> profile_ ABSL_GUARDED_BY(profile_mu_);
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_MODEL_RUNNER_H_
