// The CUDA backend's decodes of resident DF11 units into the two scratch buffers, on a stream of
// their own. Each call enqueues one launch per layout (the DF11 decoder's, the tiled matrices')
// and returns; the launch waits until the forward pass has released the buffer it writes
// (free(buffer)) and marks it decoded when done (ready(buffer)), so that layer l + 1 decodes
// while layer l computes. Each launch has a slot of the workspace for its error flag; Finish waits
// for the stream and reports a corrupt unit as kDataLoss naming the model and what was decoded.
// One caller at a time per call (the engine loop); Forget may come from any thread.
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_DECODE_QUEUE_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_DECODE_QUEUE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "codec/gpu_decoder.h"
#include "codec/gpu_tiled.h"
#include "daemon/runtime/backends/cuda/cuda_arena.h"
#include "daemon/runtime/backends/cuda/cuda_placed_model.h"
#include "daemon/runtime/backends/cuda/gpu_device.h"
#include "daemon/runtime/backends/cuda/gpu_handles.h"

namespace df11::runtime {

// What a launch whose error flag is set found: kDataLoss.
absl::Status CorruptCodes();

class CudaDecodeQueue {
 public:
  // Launches in flight before Finish must have checked them.
  static constexpr size_t kSlots = 64;
  // One launch's workspace: the larger of the two decoders' for a full launch.
  static uint64_t SlotBytes(const GpuDevice& device);

  CudaDecodeQueue(GpuDevice& device, CudaArena& arena, std::string device_name);
  // `workspace`: kSlots slots of SlotBytes(device), at a fixed address.
  absl::Status Init(char* workspace);
  ~CudaDecodeQueue();

  // Recorded when a decode into scratch buffer `buffer` is done; and by the forward pass once it
  // has read the buffer (a decode into it waits for that).
  GpuDevice::Event ready(ScratchBuffer buffer) const { return ready_[IndexOf(buffer)]->get(); }
  GpuDevice::Event free(ScratchBuffer buffer) const { return free_[IndexOf(buffer)]->get(); }

  // Layer `layer` of `m` into scratch buffer `buffer` (all its units, or with `skip_fused` only
  // those a short pass cannot multiply by directly: DF11's layout); then LayerTensorOf gives each
  // tensor.
  absl::Status DecodeLayer(const CudaPlacedModel& m, int64_t layer, ScratchBuffer buffer,
                           bool skip_fused) ABSL_LOCKS_EXCLUDED(mu_);
  // The output head into its buffer (plan.head_buffer); then LmHeadOf gives it.
  absl::Status DecodeHead(const CudaPlacedModel& m) ABSL_LOCKS_EXCLUDED(mu_);
  // The embedding rows of `tokens` (at most RowsPerCall(m)): rows[k] becomes token k's row,
  // hidden_size BF16 values, in kEmbeddingBuffer for a DF11 embedding (only the blocks holding
  // the rows are decoded), else where it is resident. Tokens must be in the vocabulary (checked
  // by the caller); kInvalidArgument for too many tokens or too few rows.
  absl::Status DecodeEmbeddingRows(const CudaPlacedModel& m, std::span<const int32_t> tokens,
                                   std::span<DeviceTensor> rows) ABSL_LOCKS_EXCLUDED(mu_);
  int64_t EmbeddingRowsPerCall(const CudaPlacedModel& m) const;
  // Waits for the stream; kDataLoss naming the model and what was decoded when a unit decoded
  // since the last call is corrupt.
  absl::Status Finish() ABSL_LOCKS_EXCLUDED(mu_);
  // Copies `tensor` of `m` to host memory `out` (tensor.bytes bytes), after Finish.
  absl::Status Read(const CudaPlacedModel& m, const DeviceTensor& tensor,
                    std::span<std::byte> out) ABSL_LOCKS_EXCLUDED(mu_);
  // `m` is going away: waits for its launches and forgets their flags.
  void Forget(const CudaPlacedModel& m) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The layouts a launch decodes: DF11's (the first decoder), tiled matrices, lane streams.
  enum class Layout { kDf11, kTiled, kLane };
  static Layout LayoutOf(const CudaPlacedModel& m, int u);
  // One launch's workspace slot and what it decoded, for errors.
  struct Slot {
    enum class What { kLayer, kHead, kEmbedding };
    uint64_t offset = 0;  // in the workspace
    bool pending = false;
    const CudaPlacedModel* model = nullptr;
    What what = What::kLayer;
    int64_t layer = 0;
  };

  // The next slot; when every slot holds a launch not yet checked, checks them.
  absl::StatusOr<Slot*> NextSlotLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Enqueues one launch into scratch buffer `buffer` with `slot`'s workspace, after free(buffer),
  // and records ready(buffer): the views of `layout` (views_, tiled_views_ or lane_views_) by its
  // decoder.
  absl::Status LaunchLocked(Slot& slot, const Slot& what, ScratchBuffer buffer, Layout layout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) ABSL_SHARED_LOCKS_REQUIRED(arena_.mu());
  // The units of `step` (all, or with `skip_fused` only those in DF11's layout) into scratch
  // buffer `buffer`, one launch per layout.
  absl::Status DecodeStepLocked(const CudaPlacedModel& m, const DecodeStep& step,
                                ScratchBuffer buffer, bool skip_fused, const Slot& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  GpuDevice& device_;
  CudaArena& arena_;
  const std::string device_name_;
  const uint64_t slot_bytes_;
  char* workspace_ = nullptr;
  uint32_t* flags_ = nullptr;  // page-locked: the slots' error flags, read back by Finish
  std::unique_ptr<DeviceStream> stream_;
  std::array<std::unique_ptr<DeviceEvent>, 2> ready_, free_;

  absl::Mutex mu_ ABSL_ACQUIRED_BEFORE(arena_.mu());
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  size_t next_slot_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<codec::gpu::UnitView> views_ ABSL_GUARDED_BY(mu_);  // reused per launch
  std::vector<codec::gpu::TiledDecodeView> tiled_views_ ABSL_GUARDED_BY(mu_);
  std::vector<codec::gpu::LaneView> lane_views_ ABSL_GUARDED_BY(mu_);
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_CUDA_DECODE_QUEUE_H_
