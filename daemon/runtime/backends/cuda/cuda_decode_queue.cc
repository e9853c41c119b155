#include "daemon/runtime/backends/cuda/cuda_decode_queue.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codec/base/align.h"
#include "codec/base/check.h"
#include "codec/base/status_macros.h"
#include "codec/cuda/decode_steps.h"

namespace df11::runtime {

absl::Status CorruptCodes() { return absl::DataLossError(codec::gpu::kCorruptCodesMessage); }

uint64_t CudaDecodeQueue::SlotBytes(const GpuDevice& device) {
  return base::AlignUp(std::max(device.DecodeWorkspaceBytes(codec::gpu::kMaxUnitsPerLaunch),
                                device.TiledWorkspaceBytes(codec::gpu::kMaxUnitsPerLaunch)),
                       256);
}

CudaDecodeQueue::CudaDecodeQueue(GpuDevice& device, CudaArena& arena, std::string device_name)
    : device_(device),
      arena_(arena),
      device_name_(std::move(device_name)),
      slot_bytes_(SlotBytes(device)) {}

absl::Status CudaDecodeQueue::Init(char* workspace) {
  workspace_ = workspace;
  DF11_ASSIGN_OR_RETURN(stream_, DeviceStream::Create(device_));
  for (int b = 0; b < 2; ++b) {
    DF11_ASSIGN_OR_RETURN(ready_[b], DeviceEvent::Create(device_));
    DF11_ASSIGN_OR_RETURN(free_[b], DeviceEvent::Create(device_));
  }
  arena_.AddStream(stream_->get());
  DF11_ASSIGN_OR_RETURN(void* flags, device_.AllocateHost(kSlots * sizeof(uint32_t)));
  flags_ = static_cast<uint32_t*>(flags);
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < kSlots; ++i) slots_.push_back(Slot{.offset = i * slot_bytes_});
  views_.reserve(codec::gpu::kMaxUnitsPerLaunch);
  return absl::OkStatus();
}

CudaDecodeQueue::~CudaDecodeQueue() {
  if (stream_ != nullptr) device_.StreamSynchronize(stream_->get()).IgnoreError();
  if (flags_ != nullptr) device_.FreeHost(flags_);
}

absl::StatusOr<CudaDecodeQueue::Slot*> CudaDecodeQueue::NextSlotLocked() {
  Slot& slot = slots_[next_slot_];
  if (slot.pending) DF11_RETURN_IF_ERROR(FinishLocked());
  return &slot;
}

absl::Status CudaDecodeQueue::LaunchLocked(Slot& slot, const Slot& what, ScratchBuffer buffer,
                                           Layout layout) {
  const GpuDevice::Stream stream = stream_->get();
  // Not before the forward pass has finished reading what the buffer held; then mark it decoded.
  DF11_RETURN_IF_ERROR(device_.StreamWait(stream, free(buffer)));
  void* workspace = workspace_ + slot.offset;
  switch (layout) {
    case Layout::kDf11:
      DF11_RETURN_IF_ERROR(device_.DecodeUnits(views_, workspace, slot_bytes_, stream));
      break;
    case Layout::kTiled:
      DF11_RETURN_IF_ERROR(device_.DecodeTiled(tiled_views_, workspace, slot_bytes_, stream));
      break;
    case Layout::kLane:
      DF11_RETURN_IF_ERROR(device_.DecodeLanes(lane_views_, workspace, slot_bytes_, stream));
      break;
  }
  DF11_RETURN_IF_ERROR(device_.Record(ready(buffer), stream));
  slot.pending = true;
  slot.model = what.model;
  slot.what = what.what;
  slot.layer = what.layer;
  next_slot_ = (next_slot_ + 1) % slots_.size();
  return absl::OkStatus();
}

CudaDecodeQueue::Layout CudaDecodeQueue::LayoutOf(const CudaPlacedModel& m, int u) {
  if (!m.tiled(u).empty()) return Layout::kTiled;
  return m.lane(u).has_value() ? Layout::kLane : Layout::kDf11;
}

absl::Status CudaDecodeQueue::DecodeStepLocked(const CudaPlacedModel& m, const DecodeStep& step,
                                               ScratchBuffer buffer, bool skip_fused,
                                               const Slot& what) {
  for (const Layout layout : {Layout::kDf11, Layout::kTiled, Layout::kLane}) {
    if (layout != Layout::kDf11 && skip_fused) continue;
    const auto in_layout = [&](int u) { return LayoutOf(m, u) == layout; };
    if (std::none_of(step.units.begin(), step.units.end(), in_layout)) continue;
    DF11_ASSIGN_OR_RETURN(Slot * slot, NextSlotLocked());
    absl::ReaderMutexLock lock(&arena_.mu());
    if (step.scratch_elements > arena_.scratch_elements(buffer)) {
      return absl::InvalidArgumentError(
          absl::StrCat("decoding ", step.scratch_elements, " elements into scratch buffer ",
                       IndexOf(buffer), ", which holds ", arena_.scratch_elements(buffer)));
    }
    const GpuPlacementLayout& plan_layout = m.plan().layout;
    const char* base = arena_.AddressLocked(m.allocation());
    auto* out = reinterpret_cast<uint16_t*>(arena_.AddressLocked(arena_.scratch(buffer)));
    views_.clear();
    tiled_views_.clear();
    lane_views_.clear();
    for (size_t i = 0; i < step.units.size(); ++i) {
      const int u = step.units[i];
      if (!in_layout(u)) continue;
      uint16_t* unit_out = out + step.scratch_offsets[i];
      if (layout == Layout::kDf11) {
        views_.push_back(plan_layout.unit_images[u].View(base + plan_layout.unit_offsets[u],
                                                         m.plan().unit_sizes[u], unit_out));
        continue;
      }
      if (layout == Layout::kLane) {
        lane_views_.push_back(m.lane(u)->View(base, unit_out));
        continue;
      }
      for (const TiledTensor& t : m.tiled(u)) {
        tiled_views_.push_back({.matrix = t.image.View(base + t.offset),
                                .out = unit_out + t.element_offset,
                                .ld = t.image.cols});
      }
    }
    if (tiled_views_.size() > codec::gpu::kMaxUnitsPerLaunch) {
      return absl::InvalidArgumentError(absl::StrCat(tiled_views_.size(),
                                                     " tiled matrices in one decode; at most ",
                                                     codec::gpu::kMaxUnitsPerLaunch));
    }
    DF11_RETURN_IF_ERROR(LaunchLocked(*slot, what, buffer, layout));
  }
  return absl::OkStatus();
}

absl::Status CudaDecodeQueue::Finish() {
  absl::MutexLock lock(&mu_);
  return FinishLocked();
}

absl::Status CudaDecodeQueue::FinishLocked() {
  // Every slot's error flag in one copy, after the launches.
  DF11_RETURN_IF_ERROR(device_.CopyStridedAsync(
      flags_, sizeof(uint32_t), workspace_ + GpuDevice::kDecodeErrorOffset, slot_bytes_,
      sizeof(uint32_t), slots_.size(), stream_->get()));
  DF11_RETURN_IF_ERROR(device_.StreamSynchronize(stream_->get()));
  absl::Status first;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (!slot.pending) continue;
    slot.pending = false;
    if (flags_[i] == 0 || !first.ok()) continue;
    const absl::Status s = CorruptCodes();
    const std::string what = slot.what == Slot::What::kLayer ? absl::StrCat("layer ", slot.layer)
                             : slot.what == Slot::What::kHead ? std::string("the output head")
                                                              : std::string("embedding rows");
    first = absl::Status(s.code(), absl::StrCat("decoding ", what, " of ", slot.model->label(),
                                                " on ", device_name_, ": ", s.message()));
  }
  return first;
}

absl::Status CudaDecodeQueue::DecodeLayer(const CudaPlacedModel& m, int64_t layer,
                                          ScratchBuffer buffer, bool skip_fused) {
  if (layer < 0 || layer >= static_cast<int64_t>(m.plan().layers.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("DecodeLayer: layer ", layer, " of ", m.plan().layers.size()));
  }
  const DecodeStep& step = m.plan().layers[layer].decode;
  if (step.units.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return DecodeStepLocked(m, step, buffer, skip_fused,
                          Slot{.model = &m, .what = Slot::What::kLayer, .layer = layer});
}

absl::Status CudaDecodeQueue::DecodeHead(const CudaPlacedModel& m) {
  const GpuModelPlan& plan = m.plan();
  if (plan.head_decode.units.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return DecodeStepLocked(m, plan.head_decode, plan.head_buffer, /*skip_tiled=*/false,
                          Slot{.model = &m, .what = Slot::What::kHead});
}

int64_t CudaDecodeQueue::EmbeddingRowsPerCall(const CudaPlacedModel& m) const {
  if (m.plan().embedding_unit < 0) return std::numeric_limits<int64_t>::max();
  // A lane-stream row takes the segments that hold it: at most one more than its length needs.
  const uint64_t span =
      m.lane(m.plan().embedding_unit).has_value()
          ? uint64_t{codec::gpu::LanePiecesPerRow(static_cast<uint32_t>(m.config().hidden_size))} *
                codec::gpu::kLaneSegment
          : m.plan().embedding_row_span;
  absl::ReaderMutexLock lock(&arena_.mu());
  return static_cast<int64_t>(std::min<uint64_t>(codec::gpu::kMaxUnitsPerLaunch,
                                                 arena_.scratch_elements(kEmbeddingBuffer) / span));
}

absl::Status CudaDecodeQueue::DecodeEmbeddingRows(const CudaPlacedModel& m,
                                                  std::span<const int32_t> tokens,
                                                  std::span<DeviceTensor> rows) {
  const GpuModelPlan& plan = m.plan();
  const int64_t hidden = m.config().hidden_size;
  if (rows.size() < tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("DecodeEmbeddingRows: ", tokens.size(),
                                                   " tokens, room for ", rows.size(), " rows"));
  }
  DF11_DCHECK(CheckTokenIds(tokens, m.config().vocab_size).ok());  // the caller checked them
  const uint64_t row_bytes = static_cast<uint64_t>(hidden) * sizeof(uint16_t);
  if (plan.embedding_unit < 0) {
    for (size_t k = 0; k < tokens.size(); ++k) {
      rows[k] = DeviceTensor{.space = DeviceTensor::Space::kModel,
                             .offset = plan.embedding.offset + uint64_t(tokens[k]) * row_bytes,
                             .bytes = row_bytes};
    }
    return absl::OkStatus();
  }
  const int64_t per_call = EmbeddingRowsPerCall(m);  // lane rows: at most two segments each
  if (static_cast<int64_t>(tokens.size()) > per_call) {
    return absl::InvalidArgumentError(absl::StrCat("DecodeEmbeddingRows: ", tokens.size(),
                                                   " tokens; at most ", per_call, " per call"));
  }
  if (tokens.empty()) return absl::OkStatus();
  absl::MutexLock decode_lock(&mu_);
  DF11_ASSIGN_OR_RETURN(Slot * slot, NextSlotLocked());
  absl::ReaderMutexLock lock(&arena_.mu());
  const int u = plan.embedding_unit;
  const std::span<const uint32_t> p = m.embedding_positions();
  const char* base = arena_.AddressLocked(m.allocation()) + plan.layout.unit_offsets[u];
  auto* out = reinterpret_cast<uint16_t*>(arena_.AddressLocked(arena_.scratch(kEmbeddingBuffer)));
  uint64_t cursor = 0;
  const Layout layout = m.lane(u).has_value() ? Layout::kLane : Layout::kDf11;
  views_.clear();
  lane_views_.clear();
  if (layout == Layout::kLane) {
    // The segments that hold each row, decoded into their own part of the scratch.
    for (size_t k = 0; k < tokens.size(); ++k) {
      const uint64_t start = plan.embedding_offset + uint64_t(tokens[k]) * hidden;
      const auto cols = static_cast<uint32_t>(hidden);
      const auto row = static_cast<uint32_t>(tokens[k]);
      const uint64_t s0 = codec::gpu::LaneFirstSegmentOfRow(plan.embedding_offset, cols, row);
      const uint64_t s1 = codec::gpu::LaneLastSegmentOfRow(plan.embedding_offset, cols, row);
      codec::gpu::LaneView view = m.lane(u)->View(arena_.AddressLocked(m.allocation()), out + cursor);
      view.first_segment = static_cast<uint32_t>(s0);
      view.n_segments = static_cast<uint32_t>(s1 - s0 + 1);
      lane_views_.push_back(view);
      rows[k] = DeviceTensor{.space = DeviceTensor::Space::kScratch,
                             .buffer = kEmbeddingBuffer,
                             .offset = (cursor + start - s0 * codec::gpu::kLaneSegment) * 2,
                             .bytes = row_bytes};
      cursor += (s1 - s0 + 1) * codec::gpu::kLaneSegment;
    }
  }
  for (size_t k = 0; k < tokens.size() && layout == Layout::kDf11; ++k) {
    // The blocks [b0, b1) that hold the row's elements [start, end).
    const uint64_t start = plan.embedding_offset + uint64_t(tokens[k]) * hidden;
    const uint64_t end = start + hidden;
    const size_t b0 = std::upper_bound(p.begin(), p.end(), start) - p.begin() - 1;
    const size_t b1 = std::lower_bound(p.begin(), p.end(), end) - p.begin();
    codec::gpu::UnitView view =
        plan.layout.unit_images[u].View(base, plan.unit_sizes[u], out + cursor);
    view.first_block = static_cast<uint32_t>(b0);
    view.n_blocks = static_cast<uint32_t>(b1 - b0);
    view.out_first_element = p[b0];
    views_.push_back(view);
    rows[k] = DeviceTensor{.space = DeviceTensor::Space::kScratch,
                           .buffer = kEmbeddingBuffer,
                           .offset = (cursor + start - p[b0]) * sizeof(uint16_t),
                           .bytes = row_bytes};
    cursor += p[b1] - p[b0];
  }
  DF11_CHECK(cursor <= arena_.scratch_elements(kEmbeddingBuffer));
  return LaunchLocked(*slot, Slot{.model = &m, .what = Slot::What::kEmbedding}, kEmbeddingBuffer,
                      layout);
}

absl::Status CudaDecodeQueue::Read(const CudaPlacedModel& m, const DeviceTensor& tensor,
                                   std::span<std::byte> out) {
  if (tensor.space == DeviceTensor::Space::kAbsent) {
    return absl::InvalidArgumentError("Read: an absent tensor");
  }
  if (out.size() != tensor.bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("Read: a tensor of ", tensor.bytes, " bytes into ", out.size()));
  }
  DF11_RETURN_IF_ERROR(Finish());
  absl::MutexLock decode_lock(&mu_);
  absl::ReaderMutexLock lock(&arena_.mu());
  CudaArena::Id id = m.allocation();
  if (tensor.space != DeviceTensor::Space::kModel) {
    id = arena_.scratch(tensor.buffer);
  }
  if (id == 0 || tensor.offset + tensor.bytes > arena_.SizeLocked(id)) {
    return absl::OutOfRangeError(absl::StrCat("Read: bytes [", tensor.offset, ", ",
                                              tensor.offset + tensor.bytes,
                                              ") are outside the buffer"));
  }
  DF11_RETURN_IF_ERROR(device_.CopyAsync(out.data(), arena_.AddressLocked(id) + tensor.offset,
                                         tensor.bytes, stream_->get()));
  return device_.StreamSynchronize(stream_->get());
}

void CudaDecodeQueue::Forget(const CudaPlacedModel& m) {
  absl::MutexLock lock(&mu_);
  device_.StreamSynchronize(stream_->get()).IgnoreError();
  for (Slot& slot : slots_) {
    if (slot.model == &m) slot.pending = false;
  }
}

}  // namespace df11::runtime
