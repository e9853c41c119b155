#include "daemon/runtime/backends/cuda/cuda_backend.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codec/base/align.h"
#include "codec/base/check.h"
#include "codec/base/status_macros.h"
#include "codec/gpu_decoder.h"
#include "daemon/runtime/backends/cuda/fused_sources.h"

namespace df11::runtime {
namespace {

// The workspace at the arena's start: the decode queue's slots, the uploader's check slots, the
// matrix library's workspace, in that order.
uint64_t WorkspaceBytes(const GpuDevice& device, const CudaBackend::Options& options) {
  return (CudaDecodeQueue::kSlots + 2 * CudaUploader::kChecks) * CudaDecodeQueue::SlotBytes(device) +
         options.library_workspace_bytes;
}

}  // namespace

CudaBackend::CudaBackend(std::unique_ptr<GpuDevice> device, const Options& options)
    : device_(std::move(device)), options_(options), device_name_(device_->name()) {}

int CudaBackend::StagingThreads(const Options& options) {
  if (options.threads > 0) return options.threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency() / 2));
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(std::unique_ptr<GpuDevice> device,
                                                                 const Options& options) {
  const std::string name = device->name();
  if (options.granule == 0 || (options.granule & (options.granule - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the arena granule must be a power of two, got ", options.granule));
  }
  if (options.max_pass_tokens == 0) {
    return absl::InvalidArgumentError("a forward pass must take at least one token");
  }
  if (options.staging_buffers < 2 || options.staging_bytes < CudaUploader::kFillPiece) {
    return absl::InvalidArgumentError(absl::StrCat("placement needs at least two staging buffers of ",
                                                   CudaUploader::kFillPiece, " bytes"));
  }
  if (options.fused_max_rows < 0 || options.fused_max_rows > ForwardOps::kMaxTiledRows) {
    return absl::InvalidArgumentError(absl::StrCat("fused_max_rows of ", options.fused_max_rows,
                                                   "; 0 to ", ForwardOps::kMaxTiledRows));
  }
  const uint64_t workspace = base::AlignUp(WorkspaceBytes(*device, options), options.granule);
  const uint64_t fixed = workspace + base::AlignUp(options.kv_pool_bytes, options.granule);
  if (options.budget < fixed + options.granule) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": a budget of ", options.budget,
                     " bytes leaves no room for models after the KV pool (", options.kv_pool_bytes,
                     " bytes) and the workspace (", workspace, " bytes)"));
  }
  if (options.kv_pool_bytes > 0 && options.kv_pool_bytes < options.kv_page_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("a KV pool of ", options.kv_pool_bytes,
                                                   " bytes holds no page of ",
                                                   options.kv_page_bytes, " bytes"));
  }
  std::unique_ptr<CudaBackend> backend(new CudaBackend(std::move(device), options));
  DF11_RETURN_IF_ERROR(backend->Init());
  return backend;
}

absl::Status CudaBackend::Init() {
  arena_ = std::make_unique<CudaArena>(*device_, device_name_, options_.budget, options_.granule);
  DF11_RETURN_IF_ERROR(arena_->Init(WorkspaceBytes(*device_, options_), options_.kv_pool_bytes));
  {
    absl::ReaderMutexLock lock(&arena_->mu());
    const CudaArena::Id pool = arena_->kv_pool();
    kv_pool_ = std::make_unique<KvPagePool>(pool != 0 ? arena_->SizeLocked(pool) : 0,
                                            options_.kv_page_bytes);
  }
  const uint64_t slot_bytes = CudaDecodeQueue::SlotBytes(*device_);
  char* workspace = arena_->workspace();
  queue_ = std::make_unique<CudaDecodeQueue>(*device_, *arena_, device_name_);
  DF11_RETURN_IF_ERROR(queue_->Init(workspace));
  workspace += CudaDecodeQueue::kSlots * slot_bytes;
  // Units of projections and heads are tiled only where short passes can multiply by them; the
  // lane-stream layout serves every pass.
  using Layout = CudaUploader::Options::Layout;
  Layout layout = Layout::kDf11;
  if (options_.layout == GpuLayout::kLane) {
    layout = Layout::kLane;
  } else if (options_.fused_max_rows > 0 && device_->forward_ops() != nullptr) {
    layout = Layout::kTiled;
  }
  uploader_ = std::make_unique<CudaUploader>(
      *device_, *arena_,
      CudaUploader::Options{.staging_bytes = options_.staging_bytes,
                            .staging_buffers = options_.staging_buffers,
                            .threads = StagingThreads(options_),
                            .layout = layout});
  DF11_RETURN_IF_ERROR(uploader_->Init(workspace, slot_bytes));
  workspace += 2 * CudaUploader::kChecks * slot_bytes;
  if (ForwardOps* ops = device_->forward_ops(); ops != nullptr) {
    DF11_RETURN_IF_ERROR(ops->UseWorkspace(workspace, options_.library_workspace_bytes));
  }
  runner_ = std::make_unique<CudaModelRunner>(
      *device_, *arena_, *queue_, *kv_pool_,
      CudaModelRunner::Options{.max_pass_tokens = options_.max_pass_tokens,
                               .fused_max_rows = options_.fused_max_rows},
      device_name_);
  return runner_->Init();
}

CudaBackend::~CudaBackend() {
  if (arena_ != nullptr) {
    absl::ReaderMutexLock lock(&arena_->mu());
    DF11_CHECK(models_.empty());
  }
}

std::array<uint64_t, 2> CudaBackend::ScratchNeedLocked() const {
  std::array<uint64_t, 2> need = {0, 0};
  for (const CudaPlacedModel* m : models_) {
    for (int b = 0; b < 2; ++b) need[b] = std::max(need[b], m->plan().scratch_elements[b]);
  }
  return need;
}

PlacementEstimate CudaBackend::EstimatePlacement(const ModelEstimate& estimate) const {
  PlacementEstimate e;
  if (estimate.from_headers) {
    const GpuPlacementLayout layout =
        LayOutGpuPlacement(estimate.units, estimate.plain_tensors, options_.granule);
    e.unit_bytes = layout.unit_bytes;
    e.plain_bytes = layout.plain_bytes;
  } else {
    // Sizes from a hub listing: each unit's decoder layout adds at most 1/16 of its stream, plus
    // a table and alignment per unit (one per layer, the embedding and the head); every tensor is
    // aligned to 256 bytes.
    const uint64_t units = static_cast<uint64_t>(estimate.config.num_layers) + 2;
    const uint64_t tensors = units * kLayerTensors + 3;
    e.unit_bytes = estimate.unit_bytes + estimate.unit_bytes / 16 +
                   units * (codec::gpu::kTableEntries * sizeof(uint32_t) + 8 * 256);
    e.plain_bytes =
        base::AlignUp(estimate.plain_bytes + tensors * 256, options_.granule) + options_.granule;
  }
  const std::array<uint64_t, 2> need = ScratchElementsFromConfig(estimate.config, estimate.df11);
  absl::ReaderMutexLock lock(&arena_->mu());
  e.shared_growth_bytes = arena_->ScratchGrowthLocked(need);
  return e;
}

absl::StatusOr<std::unique_ptr<PlacedModel>> CudaBackend::Place(std::unique_ptr<Model> host,
                                                                const PlaceProgressFn& progress) {
  if (host == nullptr) return absl::InvalidArgumentError("Place: no model");
  DF11_ASSIGN_OR_RETURN(GpuModelPlan plan, PlanGpuModel(*host, options_.granule));
  std::vector<uint32_t> embedding_positions;
  if (plan.embedding_unit >= 0) {
    const auto p = host->units()[plan.embedding_unit]->unit->positions();
    embedding_positions.assign(p.begin(), p.end());
  }
  // The allocation, the scratch growth and the model's entry in models_ (which keeps the scratch
  // from shrinking under it) in one step. From then on the model owns its allocation: destroying
  // it (on an error below) frees it.
  std::unique_ptr<CudaPlacedModel> placed;
  ArenaAllocator::Id allocation = 0;
  {
    // No pass is in flight while scratch moves: a pass derives scratch addresses layer by layer.
    absl::MutexLock forward_lock(&runner_->mu());
    absl::MutexLock lock(&arena_->mu());
    DF11_ASSIGN_OR_RETURN(allocation,
                          arena_->AllocateLocked(plan.layout.bytes(),
                                                 absl::StrCat("model ", host->directory())));
    std::array<uint64_t, 2> need = ScratchNeedLocked();
    for (int b = 0; b < 2; ++b) need[b] = std::max(need[b], plan.scratch_elements[b]);
    if (absl::Status s = arena_->ResizeScratchLocked(need); !s.ok()) {
      arena_->FreeLocked(allocation);
      arena_->ResizeScratchLocked(ScratchNeedLocked()).IgnoreError();  // what the others need
      return s;
    }
    placed = std::make_unique<CudaPlacedModel>(this, host->config(), host->is_df11(),
                                               host->directory(), std::move(plan), allocation,
                                               std::move(embedding_positions));
    models_.insert(placed.get());
  }
  DF11_ASSIGN_OR_RETURN(CudaUploader::Layouts kept,
                        uploader_->Upload(*host, placed->plan(), allocation, progress));
  // A file truncated or rewritten while it was copied gave the device other bytes than the
  // validated ones (the mapping guard turns reads past a truncation into zeros).
  DF11_RETURN_IF_ERROR(host->CheckFiles());
  FusedSources fused = FindFusedSources(*host, kept);
  placed->SetFused(std::move(kept.tiled), std::move(kept.lanes), std::move(fused.layers),
                   std::move(fused.head), std::move(fused.lane_head), fused.lane_workspace);
  const int64_t rotary_dim = host->config().rotary_dim;
  placed->SetRope(RopeTable::Of(host->rotary(false), rotary_dim),
                  RopeTable::Of(host->rotary(true), rotary_dim));
  return std::unique_ptr<PlacedModel>(std::move(placed));
}

void CudaBackend::Release(CudaPlacedModel& model) {
  // As in Place: scratch shrinks only between passes.
  absl::MutexLock forward_lock(&runner_->mu());
  // A decode of this model may still be running.
  queue_->Forget(model);
  absl::MutexLock lock(&arena_->mu());
  models_.erase(&model);
  arena_->FreeLocked(model.allocation());
  // Shrinking never fails: its ranges were just freed.
  arena_->ResizeScratchLocked(ScratchNeedLocked()).IgnoreError();
}

absl::StatusOr<std::unique_ptr<KvCache>> CudaBackend::NewCache(const ModelConfig& config,
                                                               int64_t capacity) {
  if (kv_pool_->pages() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(device_name_, " has no KV pool (memory.kv_cache is 0)"));
  }
  DF11_ASSIGN_OR_RETURN(KvPageTable table, kv_pool_->Reserve(KvBytesPerPosition(config), capacity));
  return std::make_unique<CudaKvCache>(*kv_pool_, std::move(table), capacity);
}

absl::Status CudaBackend::Forward(const PlacedModel& model, std::span<const SequenceStep> batch,
                                  std::span<float> logits) {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Forward: the model is placed on ", std::string(model.device()), ", not ", device_name_));
  }
  ForwardOps* ops = device_->forward_ops();
  if (ops == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "generation on ", device_name_,
        " is not available yet: the CUDA backend holds this model and decodes its blocks, but its "
        "forward-pass kernels are not built; serve the model from a node with devices: [cpu]"));
  }
  const ModelConfig& c = m->config();
  const int64_t V = c.vocab_size;
  const int64_t S = static_cast<int64_t>(batch.size());
  if (batch.empty()) return absl::InvalidArgumentError("Forward: empty batch");
  if (logits.size() < static_cast<size_t>(S * V)) {
    return absl::InvalidArgumentError(absl::StrCat("Forward: logits hold ", logits.size(),
                                                   " values; ", S, " sequences need ", S * V));
  }
  for (const SequenceStep& s : batch) {
    const auto* cache = dynamic_cast<const CudaKvCache*>(s.cache);
    if (cache == nullptr || &cache->pool() != kv_pool_.get()) {
      return absl::InvalidArgumentError("Forward: a KV cache made by another backend");
    }
    if (s.tokens.empty()) return absl::InvalidArgumentError("Forward: a sequence without tokens");
    if (s.cache->length() + static_cast<int64_t>(s.tokens.size()) > s.cache->capacity()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the KV cache holds ", s.cache->capacity(), " positions; ",
                       s.cache->length(), " are used and ", s.tokens.size(), " more were given"));
    }
    DF11_RETURN_IF_ERROR(CheckTokenIds(s.tokens, V));
  }
  return runner_->Forward(*m, *ops, batch, logits);
}

size_t CudaBackend::tiled_units(const PlacedModel& model) const {
  const CudaPlacedModel* m = Mine(model);
  return m == nullptr ? 0 : m->tiled_units();
}

bool CudaBackend::fused(const PlacedModel& model, int64_t layer) const {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr) return false;
  return layer < 0 ? m->fused_head().has_value() || m->lane_head().has_value()
                   : m->fused_layer(layer) != nullptr;
}

size_t CudaBackend::lane_units(const PlacedModel& model) const {
  const CudaPlacedModel* m = Mine(model);
  return m == nullptr ? 0 : m->lane_units();
}

BackendMemory CudaBackend::Memory() const {
  BackendMemory m;
  if (absl::StatusOr<GpuDevice::MemoryInfo> info = device_->GetMemoryInfo(); info.ok()) {
    m.device_total = info->total;
    m.device_free = info->free;
  }
  const CudaArena::Usage u = arena_->usage();
  m.arena = u.capacity;
  m.scratch = u.scratch;
  m.workspace = u.workspace;
  m.kv_pool = u.kv_pool;
  m.kv_cache = kv_pool_->used_bytes();
  m.kv_pool_free = m.kv_pool - m.kv_cache;
  return m;
}

uint64_t CudaBackend::KvBytesPerPosition(const ModelConfig& config) const {
  return 2 * static_cast<uint64_t>(config.num_layers * config.num_kv_heads * config.head_dim) *
         sizeof(uint16_t);
}

const CudaPlacedModel* CudaBackend::Mine(const PlacedModel& model) const {
  const auto* m = dynamic_cast<const CudaPlacedModel*>(&model);
  return m != nullptr && m->backend() == this ? m : nullptr;
}

absl::Status CudaBackend::DecodeLayer(const PlacedModel& model, int64_t layer) {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr) return absl::InvalidArgumentError("DecodeLayer: a model of another backend");
  return queue_->DecodeLayer(*m, layer, ScratchBufferOf(layer), /*skip_fused=*/false);
}

absl::Status CudaBackend::DecodeLmHead(const PlacedModel& model) {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr) return absl::InvalidArgumentError("DecodeLmHead: a model of another backend");
  return queue_->DecodeHead(*m);
}

int64_t CudaBackend::EmbeddingRowsPerCall(const PlacedModel& model) const {
  const CudaPlacedModel* m = Mine(model);
  return m == nullptr ? 0 : queue_->EmbeddingRowsPerCall(*m);
}

absl::Status CudaBackend::DecodeEmbeddingRows(const PlacedModel& model,
                                              std::span<const int32_t> tokens,
                                              std::span<DeviceTensor> rows) {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr) {
    return absl::InvalidArgumentError("DecodeEmbeddingRows: a model of another backend");
  }
  DF11_RETURN_IF_ERROR(CheckTokenIds(tokens, m->config().vocab_size));
  return queue_->DecodeEmbeddingRows(*m, tokens, rows);
}

absl::Status CudaBackend::FinishDecodes() { return queue_->Finish(); }

DeviceTensor CudaBackend::LayerTensor(const PlacedModel& model, int64_t layer, size_t k) const {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr || layer < 0 || layer >= static_cast<int64_t>(m->plan().layers.size()) ||
      k >= kLayerTensors) {
    return DeviceTensor{};
  }
  return LayerTensorOf(m->plan(), layer, k);
}

DeviceTensor CudaBackend::LmHead(const PlacedModel& model) const {
  const CudaPlacedModel* m = Mine(model);
  return m == nullptr ? DeviceTensor{} : LmHeadOf(m->plan());
}

absl::Status CudaBackend::Read(const PlacedModel& model, const DeviceTensor& tensor,
                               std::span<std::byte> out) {
  const CudaPlacedModel* m = Mine(model);
  if (m == nullptr) return absl::InvalidArgumentError("Read: a model of another backend");
  return queue_->Read(*m, tensor, out);
}

DeviceWork CudaBackend::Work() const {
  const GpuDevice::Counters c = device_->counters();
  return DeviceWork{.launches = c.launches,
                    .event_ops = c.event_ops,
                    .host_syncs = c.host_syncs,
                    .enqueue_seconds = runner_->enqueue_seconds(),
                    .ops = runner_->profile()};
}

uint64_t CudaBackend::arena_allocated_bytes() const { return arena_->usage().allocated; }

size_t CudaBackend::arena_allocations() const { return arena_->usage().allocations; }

absl::Status CudaBackend::CompactForTest() {
  absl::MutexLock lock(&arena_->mu());
  return arena_->CompactLocked();
}

uint64_t CudaBackend::compactions() const { return arena_->compactions(); }

}  // namespace df11::runtime
