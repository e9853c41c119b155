// The CUDA backend: many models resident in one GPU's memory, DF11 units kept compressed and
// decoded on the GPU, per layer, into scratch shared by every model. Written against GpuDevice
// (gpu_device.h), so it is CUDA-free and its host logic runs in tests on an emulated device.
//
// Memory. At start the backend takes its whole budget from the driver as one arena (plain
// cudaMalloc) and never allocates device memory again; ArenaAllocator carves it into:
//   - each resident model: one allocation (gpu_placement.h: unit images, then plain tensors);
//   - two decode scratch buffers, sized by the largest needs of the models resident (they grow
//     when a model with larger blocks is placed and shrink when it leaves);
//   - the KV pool (KvPagePool), a fixed share of the budget, paged in bytes for every model;
//   - workspace: the decoder's launch slots and the cuBLAS workspace.
// Fragmentation is handled by compaction: when an allocation finds no free range large enough
// although enough bytes are free, every stream is synchronized and the allocations slide down to
// the arena's start (device-to-device copies), under the exclusive lock that every user of a
// device address holds shared while it derives and uses one.
//
// Placement copies each unit's official tensors from the mapped files through page-locked staging
// buffers with asynchronous copies while the host fills the next buffer (reading the files), and
// reports progress in bytes. The decoder's layout (per-segment offsets) is then built on the GPU
// from the copied stream (codec::gpu::BuildSegmentOffsets), and every unit is decoded once without
// output, so that a corrupt unit is kDataLoss at load, naming it. With Options::fused_max_rows, a
// unit of matrices only (the projections, an untied output head) is instead decoded on the host
// (checking it) and re-encoded as tiled matrices (codec::TiledMatrix), copied into the place its
// DF11 image would take; a unit whose tiled images would not fit there keeps DF11's layout. The
// estimate and the accounting are therefore those of DF11's layout either way.
//
// Decoding. DecodeLayer enqueues one launch that decodes every unit of a layer into a scratch
// buffer on the backend's decode stream and records an event, so that the forward pass overlaps
// layer i + 1's decode with layer i's compute; DecodeLmHead and DecodeEmbeddingRows do the same for
// the output head and the rows of a prompt's tokens. FinishDecodes reports a corrupt unit as
// kDataLoss naming the model and the layer; other models are unaffected.
//
// The forward pass. Forward runs the decoder layers of a batch of sequences on the backend's
// compute stream with the device's ForwardOps (forward_ops.h): BF16 activations, matrix products
// from the decoded scratch (or resident BF16 tensors), attention over each sequence's KV pages,
// fp32 logits, an fp32 residual stream. Layer l + 1 decodes on the decode stream while layer l
// computes. A pass of at most Options::fused_max_rows tokens decodes no tiled unit: its layers
// (and the head) multiply by the tiled matrices with ForwardOps::TiledLinear, the products that
// share an input (q, k, v; gate, up) in one launch. Other short passes (up to 64 tokens) compute
// those as one cuBLAS product where the weights are adjacent, and split the result. A pass's
// buffers are one arena allocation (workspace), kept for the next pass and grown when one needs
// more; another allocation that finds no room takes it back between passes. A device without
// ForwardOps answers kFailedPrecondition saying so, never a wrong answer.
//
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<GpuDevice> device, cuda::OpenDevice(0));
//   DF11_ASSIGN_OR_RETURN(auto backend, CudaBackend::Create(std::move(device), {.budget = ...}));
//   DF11_ASSIGN_OR_RETURN(auto host, Model::Load(dir, backend->HostLoadOptions()));
//   DF11_ASSIGN_OR_RETURN(auto model, backend->Place(std::move(host), on_progress));
//   DF11_RETURN_IF_ERROR(backend->DecodeLayer(*model, 0, /*buffer=*/0));
//   DF11_RETURN_IF_ERROR(backend->FinishDecodes());
#ifndef DF11_DAEMON_RUNTIME_CUDA_BACKEND_H_
#define DF11_DAEMON_RUNTIME_CUDA_BACKEND_H_

#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "codec/thread_pool.h"
#include "codec/tiled_matrix.h"
#include "daemon/runtime/arena_allocator.h"
#include "daemon/runtime/backend.h"
#include "daemon/runtime/forward_ops.h"
#include "daemon/runtime/gpu_device.h"
#include "daemon/runtime/gpu_placement.h"
#include "daemon/runtime/kv_page_pool.h"

namespace df11::runtime {

class CudaPlacedModel;

// A tensor of a unit kept as a tiled matrix: where its rows start in the unit (elements), and
// where its image is in the model's allocation.
struct TiledTensor {
  uint64_t element_offset = 0;
  uint64_t offset = 0;
  codec::TiledImage image;
};

// A tensor on the device after a decode: in a scratch buffer, or in a model's own memory.
// Resolved to an address only under the backend's lock (Read).
struct DeviceTensor {
  enum class Space { kAbsent, kScratch0, kScratch1, kModel };
  Space space = Space::kAbsent;
  uint64_t offset = 0;  // bytes from the start of the space
  uint64_t bytes = 0;
};

class CudaBackend final : public Backend {
 public:
  struct Options {
    uint64_t budget = 0;         // the arena taken from the device at start
    uint64_t kv_pool_bytes = 0;  // of the budget: the KV pool
    uint64_t kv_page_bytes = 2 << 20;
    uint64_t granule = 2 << 20;         // arena allocations are multiples of it
    uint64_t staging_bytes = 32 << 20;  // each page-locked staging buffer
    int staging_buffers = 4;
    // Host threads filling the staging buffers; 0: half the CPUs. The fill is bound by host memory
    // bandwidth, which half the CPUs of an H200 machine already reach (50 GB/s with 8 or 16 of
    // its 16); with all of them the load ran at 0.62 of the host-to-device copy, with half 0.79
    // (docs/PERFORMANCE.md).
    int threads = 0;
    uint64_t library_workspace_bytes = 32 << 20;  // cuBLAS's (NVIDIA's advice for Hopper)
    // Tokens of one forward pass at most: a longer prompt runs in several passes, so that a pass's
    // buffers (about 100 KB per token for an 8B model) stay small next to the arena.
    uint64_t max_pass_tokens = 2048;
    // Forward passes of at most this many tokens (0 to ForwardOps::kMaxTiledRows) multiply by
    // the projections and the output head without decoding them: those units are kept as tiled
    // matrices (codec::TiledMatrix, built on the host at Place) and the fused decode + product
    // reads them (codec/gpu_tiled.h); longer passes decode them into scratch for cuBLAS as
    // usual. 0 keeps every unit in DF11's layout, which loads faster (no host decode and
    // re-encode).
    int64_t fused_max_rows = ForwardOps::kMaxTiledRows;
  };

  // The threads that fill the staging buffers under `options` (Options::threads resolved).
  static int StagingThreads(const Options& options);

  // Takes the arena from `device` and carves the KV pool and workspace from it.
  // kInvalidArgument for options that do not fit (the numbers); kResourceExhausted when the
  // device cannot give the budget (the driver's numbers); kInternal for a device error.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(std::unique_ptr<GpuDevice> device,
                                                             const Options& options);
  // Every placed model must have been destroyed.
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  std::string_view device() const override { return device_name_; }
  // DF11 units keep their official layout on the host; the GPU layout is built at Place.
  Model::LoadOptions HostLoadOptions() const override { return {.interleave = false}; }
  bool ReadsFilesAtPlace() const override { return true; }
  // Exact when `estimate` was read from headers (the same layout as Place); from a hub listing,
  // an upper bound. The scratch growth assumes one unit per layer (ScratchElementsFromConfig).
  PlacementEstimate EstimatePlacement(const ModelEstimate& estimate) const override;
  absl::StatusOr<std::unique_ptr<PlacedModel>> Place(std::unique_ptr<Model> model,
                                                     const PlaceProgressFn& progress) override;
  // Pages of the KV pool for `capacity` positions, taken now.
  absl::StatusOr<std::unique_ptr<KvCache>> NewCache(const ModelConfig& config,
                                                    int64_t capacity) override;
  // One step of every sequence of `batch` (Backend::Forward). kFailedPrecondition when the
  // device has no ForwardOps; kResourceExhausted when the arena has no room for the step's
  // buffers; kDataLoss naming the model and layer for a corrupt unit.
  absl::Status Forward(const PlacedModel& model, std::span<const SequenceStep> batch,
                       std::span<float> logits) override;
  BackendMemory Memory() const override;
  // Keys and values of every layer in BF16.
  uint64_t KvBytesPerPosition(const ModelConfig& config) const override;

  // Decoding into scratch. One caller at a time (the engine loop); each call enqueues on the
  // decode stream and returns. `model` must have been placed by this backend.
  // Layer `layer` into scratch buffer `buffer` (0 or 1); then LayerTensor gives each tensor.
  absl::Status DecodeLayer(const PlacedModel& model, int64_t layer, int buffer);
  // The output head into its buffer (plan.head_buffer); then LmHead gives it.
  absl::Status DecodeLmHead(const PlacedModel& model);
  // The embedding rows of `tokens` (at most EmbeddingRowsPerCall(model)): rows[k] becomes token
  // k's row, hidden_size BF16 values, in scratch buffer 1 for a DF11 embedding (only the blocks
  // holding the rows are decoded), else where it is resident. kInvalidArgument for a token
  // outside the vocabulary, too many tokens or too few rows.
  absl::Status DecodeEmbeddingRows(const PlacedModel& model, std::span<const int32_t> tokens,
                                   std::span<DeviceTensor> rows);
  int64_t EmbeddingRowsPerCall(const PlacedModel& model) const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the decode stream; kDataLoss naming the model and what was decoded when a unit
  // decoded since the last call is corrupt.
  absl::Status FinishDecodes() ABSL_LOCKS_EXCLUDED(decode_mu_, mu_);

  // Tensor k (LayerTensorNames order) of `layer` once decoded into `buffer`; the output head.
  DeviceTensor LayerTensor(const PlacedModel& model, int64_t layer, int buffer, size_t k) const;
  DeviceTensor LmHead(const PlacedModel& model) const;
  // Copies `tensor` (of `model`) to host memory `out` (tensor.bytes bytes), after FinishDecodes.
  absl::Status Read(const PlacedModel& model, const DeviceTensor& tensor, std::span<std::byte> out);

  // Units of `model` resident as tiled matrices (Options::fused_max_rows), and whether layer
  // `layer` (-1: the output head) multiplies by any of them in short passes.
  size_t tiled_units(const PlacedModel& model) const;
  bool fused(const PlacedModel& model, int64_t layer) const;

  // For tests: the arena's bookkeeping, and compaction on demand.
  uint64_t arena_allocated_bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t arena_allocations() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CompactForTest() ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t compactions() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class CudaPlacedModel;

  class Stream;
  class Event;
  struct DecodeSlot;

  // Offsets of one forward step's buffers in its arena allocation `id`.
  struct ForwardBuffers {
    ArenaAllocator::Id id = 0;
    uint64_t x = 0, h = 0, tmp = 0, q = 0, k = 0, v = 0, attn = 0, gate = 0, up = 0, last = 0;
    // BF16 outputs of a grouped product (q, k, v or gate, up) before the split, in short passes.
    uint64_t grouped = 0;
    // fp32: x (the residual stream), tmp (a projection into it) and each sequence's last row
    // of x (last_x).
    uint64_t last_x = 0;
    uint64_t logits = 0, pages = 0, row_first_page = 0, row_position = 0;
  };

  CudaBackend(std::unique_ptr<GpuDevice> device, const Options& options);
  absl::Status Init();
  // One pass of Forward over a checked batch (at most max_pass_tokens tokens), under forward_mu_.
  absl::Status ForwardPass(const CudaPlacedModel& m, ForwardOps& ops,
                           std::span<const SequenceStep> batch, std::span<float> logits)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(forward_mu_) ABSL_LOCKS_EXCLUDED(mu_, decode_mu_);
  // One pass's operations: the decoder graph's (decoder_graph.h) on this backend.
  class Pass;
  // Allocates `bytes` in the arena, compacting when that makes room. kResourceExhausted with the
  // numbers otherwise.
  absl::StatusOr<ArenaAllocator::Id> AllocateLocked(uint64_t bytes, const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CompactLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Resizes the two scratch buffers to what the resident models (and `extra`) need.
  absl::Status ResizeScratchLocked(std::array<uint64_t, 2> extra)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::array<uint64_t, 2> ScratchNeedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  char* AddressLocked(ArenaAllocator::Id id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Copies the model's files into its allocation; units that Options::fused_max_rows tiles are
  // decoded on the host, re-encoded and copied as tiled matrices into their place, their images
  // into `tiled` (per unit; empty for a unit kept in DF11's layout).
  absl::Status Upload(const Model& host, const GpuModelPlan& plan, ArenaAllocator::Id allocation,
                      const PlaceProgressFn& progress,
                      std::vector<std::vector<TiledTensor>>& tiled);
  // Per unit of `host`, whether to tile it: it holds a projection or the output head, every
  // tensor in it is a matrix TiledMatrix supports, and it is not the embedding's unit (whose rows
  // are decoded on their own). None when fused_max_rows is 0 or the device has no ForwardOps.
  std::vector<bool> TiledUnits(const Model& host, const GpuModelPlan& plan) const;
  // Frees a placed model's memory (its destructor).
  void Release(CudaPlacedModel& model) ABSL_LOCKS_EXCLUDED(forward_mu_, decode_mu_, mu_);
  // The next decode launch slot; when every slot holds a launch not yet checked, checks them.
  absl::StatusOr<DecodeSlot*> NextSlotLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(decode_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status FinishDecodesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(decode_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Enqueues one decode launch into scratch buffer `buffer` with `slot`'s workspace, after
  // scratch_free_[buffer], and records scratch_ready_[buffer]: views_ by the DF11 decoder, or,
  // with `tiled`, tiled_views_ by the tiled one. `slot` then names what it decoded, for errors.
  absl::Status LaunchLocked(DecodeSlot& slot, const DecodeSlot& what, int buffer, bool tiled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(decode_mu_) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Decodes the units of `step` (all, or with `skip_tiled` only those in DF11's layout) into
  // scratch buffer `buffer`, one launch per layout.
  absl::Status DecodeStepLocked(const CudaPlacedModel& m, const DecodeStep& step, int buffer,
                                bool skip_tiled, const DecodeSlot& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(decode_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status DecodeLayerUnits(const CudaPlacedModel& m, int64_t layer, int buffer,
                                bool skip_tiled) ABSL_LOCKS_EXCLUDED(decode_mu_, mu_);
  const CudaPlacedModel* Mine(const PlacedModel& model) const;

  const std::unique_ptr<GpuDevice> device_;
  const Options options_;
  const std::string device_name_;
  void* base_ = nullptr;  // the arena
  // The workspace allocation (at the arena's start, never moved) and the placement's check slots.
  char* workspace_ = nullptr;
  char* placement_workspace_ = nullptr;

  // Shared: anyone deriving a device address and enqueueing work on it; exclusive: compaction
  // and every change to the arena's layout.
  mutable absl::Mutex mu_;
  ArenaAllocator arena_ ABSL_GUARDED_BY(mu_);
  std::set<CudaPlacedModel*> models_ ABSL_GUARDED_BY(mu_);
  std::array<ArenaAllocator::Id, 2> scratch_ ABSL_GUARDED_BY(mu_) = {0, 0};  // 0: none
  std::array<uint64_t, 2> scratch_elements_ ABSL_GUARDED_BY(mu_) = {0, 0};
  ArenaAllocator::Id kv_pool_id_ ABSL_GUARDED_BY(mu_) = 0;
  ArenaAllocator::Id workspace_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t compactions_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<KvPagePool> kv_pool_;

  // Placement: one upload at a time (they share the copy engine anyway).
  absl::Mutex upload_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<Stream> upload_stream_;
  std::unique_ptr<Stream> check_stream_;  // each unit's layout pass and check, after its copies
  std::unique_ptr<Event> unit_copied_;
  std::vector<void*> staging_;
  std::vector<std::unique_ptr<Event>> staging_done_;
  codec::ThreadPool copy_pool_;  // fills staging buffers
  // Decodes and re-encodes the units tiled at load: compute-bound, so every CPU (the staging's
  // half is for memory bandwidth).
  codec::ThreadPool tile_pool_{0};

  // The forward pass (one step at a time), on its own stream.
  absl::Mutex forward_mu_ ABSL_ACQUIRED_BEFORE(decode_mu_, mu_);
  std::unique_ptr<Stream> compute_stream_;
  // The passes' buffers (0: none), kept between passes; while a pass uses them (busy) no other
  // allocation may take their place.
  ArenaAllocator::Id forward_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool forward_busy_ ABSL_GUARDED_BY(mu_) = false;

  // Decoding (one caller at a time).
  absl::Mutex decode_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  uint64_t slot_bytes_ = 0;
  std::unique_ptr<Stream> decode_stream_;
  std::vector<DecodeSlot> slots_ ABSL_GUARDED_BY(decode_mu_);
  size_t next_slot_ ABSL_GUARDED_BY(decode_mu_) = 0;
  std::vector<codec::gpu::UnitView> views_ ABSL_GUARDED_BY(decode_mu_);  // reused per launch
  std::vector<codec::gpu::TiledDecodeView> tiled_views_ ABSL_GUARDED_BY(decode_mu_);
  // Per scratch buffer: recorded on the decode stream when a decode into it is done (the forward
  // pass's compute stream waits for it before reading), and by the compute stream once it has
  // read the buffer (the next decode into it waits for that), so that layer i + 1 decodes while
  // layer i computes.
  std::array<std::unique_ptr<Event>, 2> scratch_ready_, scratch_free_;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_CUDA_BACKEND_H_
