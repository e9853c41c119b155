#include "daemon/runtime/backends/cuda/cuda_model_runner.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "codec/base/align.h"
#include "codec/base/status_macros.h"
#include "daemon/runtime/backends/cuda/profiled_decoder_ops.h"
#include "daemon/runtime/engine/decoder_graph.h"

namespace df11::runtime {
namespace {

// Passes of at most this many tokens compute the products that share an input (q, k, v; gate,
// up) as one cuBLAS product where their weights are adjacent: at small batch, separate k and v
// products use a fraction of the GPU (0.30 TB/s on an H100, against 1.9 for gate and up;
// docs/PERFORMANCE.md, the fused product). Longer passes keep them apart, sparing the split's copy.
constexpr int64_t kGroupedMaxRows = 64;

// The KV pages a sequence uses once `tokens` more positions are stored.
uint64_t UsedPages(const CudaKvCache& cache, size_t tokens) {
  const uint64_t length = static_cast<uint64_t>(cache.length()) + tokens;
  const uint64_t per_page = cache.table().positions_per_page;
  return (length + per_page - 1) / per_page;
}

}  // namespace

CudaModelRunner::CudaModelRunner(GpuDevice& device, CudaArena& arena, CudaDecodeQueue& queue,
                                 const KvPagePool& kv_pool, const Options& options,
                                 std::string device_name)
    : device_(device),
      arena_(arena),
      queue_(queue),
      kv_pool_(kv_pool),
      options_(options),
      device_name_(std::move(device_name)) {}

absl::Status CudaModelRunner::Init() {
  DF11_ASSIGN_OR_RETURN(stream_, DeviceStream::Create(device_));
  arena_.AddStream(stream_->get());
  return absl::OkStatus();
}

CudaModelRunner::~CudaModelRunner() {
  if (stream_ != nullptr) device_.StreamSynchronize(stream_->get()).IgnoreError();
  if (pinned_ != nullptr) device_.FreeHost(pinned_);
}

absl::Status CudaModelRunner::Forward(const CudaPlacedModel& m, ForwardOps& ops,
                                      std::span<const SequenceStep> batch,
                                      std::span<float> logits) {
  const int64_t V = m.config().vocab_size;
  int64_t rows = 0;
  for (const SequenceStep& s : batch) rows += static_cast<int64_t>(s.tokens.size());
  absl::MutexLock forward_lock(&mu_);
  const int64_t limit = static_cast<int64_t>(options_.max_pass_tokens);
  if (rows <= limit) return RunPass(m, ops, batch, logits);
  // Long prompts in passes of at most `limit` tokens, each sequence's tokens in order: a pass
  // writes its keys and values before the next reads them. A sequence's logits are those of the
  // pass that holds its last token.
  std::vector<size_t> done(batch.size(), 0);
  std::vector<SequenceStep> pass;
  std::vector<size_t> owner;
  std::vector<float> pass_logits;
  while (true) {
    pass.clear();
    owner.clear();
    int64_t room = limit;
    for (size_t i = 0; i < batch.size() && room > 0; ++i) {
      const size_t left = batch[i].tokens.size() - done[i];
      if (left == 0) continue;
      const size_t take = std::min<size_t>(left, static_cast<size_t>(room));
      pass.push_back({batch[i].cache, batch[i].tokens.subspan(done[i], take)});
      owner.push_back(i);
      room -= static_cast<int64_t>(take);
    }
    if (pass.empty()) return absl::OkStatus();
    pass_logits.resize(pass.size() * V);
    DF11_RETURN_IF_ERROR(RunPass(m, ops, pass, pass_logits));
    for (size_t k = 0; k < pass.size(); ++k) {
      const size_t i = owner[k];
      done[i] += pass[k].tokens.size();
      if (done[i] == batch[i].tokens.size()) {
        std::copy_n(pass_logits.begin() + k * V, V, logits.begin() + i * V);
      }
    }
  }
}


// The CUDA backend's DecoderOps: one pass of one model, its operations enqueued on the compute
// stream with the device's ForwardOps. Activations are BF16 in the pass's buffers, except the
// fp32 residual stream (kResidual) and the projections into it (kBranch). Layer l + 1 decodes
// on the decode stream while layer l computes, into the other scratch buffer; in a pass of at most
// fused_max_rows tokens, tiled projections are multiplied by without decoding them.
//
// Each operation derives the device addresses it uses under mu_ held shared (compaction, which
// takes it exclusively, waits for every stream first), so an address never outlives the lock
// that made it.
class CudaModelRunner::Pass final : public DecoderOps {
 public:
  Pass(CudaModelRunner& runner, const CudaPlacedModel& m, ForwardOps& ops,
       std::span<const SequenceStep> batch, std::span<const int32_t> tokens,
       uint64_t positions_per_page, const PassBuffers& buffers, std::span<float> logits)
      : b_(runner),
        m_(m),
        c_(m.config()),
        ops_(ops),
        batch_(batch),
        tokens_(tokens),
        positions_per_page_(positions_per_page),
        buffers_(buffers),
        logits_(logits),
        rows_(static_cast<int64_t>(tokens.size())),
        stream_(runner.stream_->get()),
        short_pass_(rows_ <= runner.options_.fused_max_rows) {}

  // The pass's metadata in one copy from page-locked memory (RunPass filled it); then the
  // embedding rows of the tokens, a launch's worth at a time, gathered into kNormed in one launch
  // each and widened into the residual stream with the config's scale.
  absl::Status Embed() override {
    {
      absl::ReaderMutexLock lock(&b_.arena_.mu());
      DF11_RETURN_IF_ERROR(b_.device_.CopyAsync(Base() + buffers_.pages, b_.pinned_,
                                                 buffers_.embedding_rows - buffers_.pages, stream_));
      // The fused lane products' error flag, read after the pass.
      if (short_pass_ && m_.lane_workspace_bytes() > 0) {
        DF11_RETURN_IF_ERROR(
            b_.device_.MemsetAsync(LaneWorkspace(), 0, codec::gpu::kLanePiecesOffset, stream_));
      }
      // A decode step's attention may be planned once for all its layers (from the host's copy
      // of the sequences' page offsets, which stays until the pass ends).
      DecodeBatch decode;
      if (rows_ == static_cast<int64_t>(batch_.size())) {  // a decode step: a row per sequence
        decode = DecodeBatch{
            .sequences = static_cast<int64_t>(batch_.size()),
            .page_indptr = reinterpret_cast<const int32_t*>(
                static_cast<const char*>(b_.pinned_) + (buffers_.page_indptr - buffers_.pages))};
      }
      DF11_RETURN_IF_ERROR(ops_.PlanAttention(decode, Shape(0), positions_per_page_, stream_));
    }
    const int64_t H = c_.hidden_size;
    const int64_t per_call = std::max<int64_t>(1, b_.queue_.EmbeddingRowsPerCall(m_));
    std::vector<DeviceTensor>& embedded = b_.embedded_;
    embedded.resize(std::min(per_call, rows_));
    // The rows' offsets go to the pinned buffer's last region, each call's to its own part of it,
    // so a copy still in flight never sees them change.
    auto* offsets = reinterpret_cast<uint64_t*>(static_cast<char*>(b_.pinned_) +
                                                buffers_.embedding_rows - buffers_.pages);
    for (int64_t first = 0; first < rows_; first += per_call) {
      const int64_t n = std::min(per_call, rows_ - first);
      DF11_RETURN_IF_ERROR(b_.queue_.DecodeEmbeddingRows(m_, tokens_.subspan(first, n), embedded));
      for (int64_t k = 0; k < n; ++k) {
        if (embedded[k].space != embedded[0].space || embedded[k].buffer != embedded[0].buffer) {
          return absl::InternalError("embedding rows of one call in two places");
        }
        offsets[first + k] = embedded[k].offset;
      }
      absl::ReaderMutexLock lock(&b_.arena_.mu());
      DF11_RETURN_IF_ERROR(b_.device_.StreamWait(stream_, b_.queue_.ready(kEmbeddingBuffer)));
      auto* rows = reinterpret_cast<uint64_t*>(Base() + buffers_.embedding_rows) + first;
      DF11_RETURN_IF_ERROR(
          b_.device_.CopyAsync(rows, offsets + first, n * sizeof(uint64_t), stream_));
      const char* space = reinterpret_cast<const char*>(
          Tensor(DeviceTensor{.space = embedded[0].space, .buffer = embedded[0].buffer}));
      DF11_RETURN_IF_ERROR(ops_.GatherRows(space, rows, n, H * 2,
                                           Bf16(Activations::kNormed) + first * H, stream_));
      DF11_RETURN_IF_ERROR(b_.device_.Record(b_.queue_.free(kEmbeddingBuffer), stream_));
    }
    absl::ReaderMutexLock lock(&b_.arena_.mu());
    return ops_.Widen(Bf16(Activations::kNormed), rows_ * H, c_.embedding_scale,
                      F32(Activations::kResidual), stream_);
  }

  // Layer l computes from its scratch buffer while layer l + 1 decodes into the other.
  absl::Status BeginLayer(int64_t l) override {
    if (l == 0) {
      DF11_RETURN_IF_ERROR(b_.queue_.DecodeLayer(m_, 0, ScratchBufferOf(0), SkipFused(0)));
    }
    if (l + 1 < c_.num_layers) {
      DF11_RETURN_IF_ERROR(
          b_.queue_.DecodeLayer(m_, l + 1, ScratchBufferOf(l + 1), SkipFused(l + 1)));
    }
    layer_ = l;
    tiled_ = short_pass_ ? m_.fused_layer(l) : nullptr;
    absl::ReaderMutexLock lock(&b_.arena_.mu());
    return b_.device_.StreamWait(stream_, b_.queue_.ready(ScratchBufferOf(l)));
  }

  absl::Status Norm(Activations in, LayerWeight weight, Activations out) override {
    if (!IsF32(in)) return Unsupported("a norm of BF16 rows of the hidden size");
    absl::ReaderMutexLock lock(&b_.arena_.mu());
    return ops_.FloatRmsNorm(F32(in), Weight(weight), rows_, c_.hidden_size, Eps(),
                             c_.norm_weight_offset, Address(out), IsF32(out), stream_);
  }

  absl::Status Project(Activations in, std::span<const Product> products) override {
    if (IsF32(in)) return Unsupported("a product of fp32 rows");
    absl::ReaderMutexLock lock(&b_.arena_.mu());
    const bool y_fp32 = IsF32(products.front().out);
    for (const Product& p : products) {
      if (IsF32(p.out) != y_fp32) return Unsupported("products of one input into mixed types");
    }
    const uint16_t* x = Bf16(in);
    const char* allocation = b_.arena_.AddressLocked(m_.allocation());
    auto is_tiled = [&](const Product& p) {
      return tiled_ != nullptr && tiled_->projections[Index(p.weight)].has_value();
    };
    auto tiled_product = [&](const Product& p) ABSL_SHARED_LOCKS_REQUIRED(b_.arena_.mu()) {
      return ForwardOps::TiledProduct{.w = tiled_->projections[Index(p.weight)]->View(allocation),
                                      .bias = Weight(BiasOf(p.weight)),
                                      .y = Address(p.out)};
    };
    auto is_lane = [&](const Product& p) {
      return tiled_ != nullptr && tiled_->lanes[Index(p.weight)].has_value();
    };
    // Every weight lane-stream: one fused launch (two kernels) for all of them.
    if (std::all_of(products.begin(), products.end(), is_lane)) {
      absl::InlinedVector<codec::gpu::LaneProduct, 3> lanes;
      for (const Product& p : products) {
        lanes.push_back(LaneProductOf(*tiled_->lanes[Index(p.weight)], Weight(BiasOf(p.weight)),
                                      Address(p.out)));
      }
      return ops_.LaneLinear(x, rows_, lanes, y_fp32, LaneWorkspace(),
                             m_.lane_workspace_bytes(), stream_);
    }
    // Every weight tiled: one launch for all of them.
    if (std::all_of(products.begin(), products.end(), is_tiled)) {
      absl::InlinedVector<ForwardOps::TiledProduct, 3> tiled;
      for (const Product& p : products) tiled.push_back(tiled_product(p));
      return ops_.TiledLinear(x, rows_, tiled, y_fp32, stream_);
    }
    // Adjacent weights in a short pass: one product, split into the outputs.
    if (products.size() > 1 && Adjacent(products.front().weight) && rows_ <= kGroupedMaxRows &&
        std::none_of(products.begin(), products.end(), is_tiled) &&
        std::none_of(products.begin(), products.end(), is_lane)) {
      int64_t width = 0;
      absl::InlinedVector<ForwardOps::ColumnRange, 3> split;
      for (const Product& p : products) {
        split.push_back({width, Width(p.out), static_cast<uint16_t*>(Address(p.out))});
        width += Width(p.out);
      }
      const LayerWeight first = products.front().weight;
      uint16_t* grouped = reinterpret_cast<uint16_t*>(Base() + buffers_.grouped);
      DF11_RETURN_IF_ERROR(ops_.Linear(x, Weight(first), Weight(BiasOf(first)), rows_, Width(in),
                                       width, grouped, false, stream_));
      return ops_.SplitColumns(grouped, rows_, width, split, stream_);
    }
    for (const Product& p : products) {
      if (is_tiled(p)) {
        const ForwardOps::TiledProduct one[] = {tiled_product(p)};
        DF11_RETURN_IF_ERROR(ops_.TiledLinear(x, rows_, one, y_fp32, stream_));
      } else if (is_lane(p)) {
        const codec::gpu::LaneProduct one[] = {LaneProductOf(
            *tiled_->lanes[Index(p.weight)], Weight(BiasOf(p.weight)), Address(p.out))};
        DF11_RETURN_IF_ERROR(ops_.LaneLinear(x, rows_, one, y_fp32, LaneWorkspace(),
                                             m_.lane_workspace_bytes(), stream_));
      } else {
        DF11_RETURN_IF_ERROR(ops_.Linear(x, Weight(p.weight), Weight(BiasOf(p.weight)), rows_,
                                         Width(in), Width(p.out), Address(p.out), y_fp32,
                                         stream_));
      }
    }
    return absl::OkStatus();
  }

  // q and k normalised per head (where the layer has q/k norms) and rotated, and the new keys
  // and values stored in the pages, in one launch: a sliding layer's pages hold every position,
  // and attention reads only the window.
  absl::Status PrepareHeads() override {
    const bool sliding = c_.SlidingWindow(layer_) > 0;
    const absl::StatusOr<RopeTable>& rope = m_.rope(sliding);
    if (!rope.ok()) return rope.status();
    absl::ReaderMutexLock lock(&b_.arena_.mu());
    return ops_.PrepareHeadsAndStoreKv(
        Bf16(Activations::kQuery), Bf16(Activations::kKey), Bf16(Activations::kValue), rows_,
        c_.num_heads, Weight(LayerWeight::kQNorm), Weight(LayerWeight::kKNorm), Eps(),
        c_.norm_weight_offset, *rope, Kv(), stream_);
  }

  absl::Status Attend() override {
    absl::ReaderMutexLock lock(&b_.arena_.mu());
    return ops_.Attention(Bf16(Activations::kQuery), rows_, Shape(c_.SlidingWindow(layer_)), Kv(),
                          Bf16(Activations::kAttention), stream_);
  }

  absl::Status AddBranchAndNorm(LayerWeight norm, Activations out) override {
    if (IsF32(out)) return Unsupported("an fp32 norm after an add");
    absl::ReaderMutexLock lock(&b_.arena_.mu());
    return ops_.AddRmsNorm(F32(Activations::kResidual), F32(Activations::kBranch), Weight(norm),
                           rows_, c_.hidden_size, Eps(), c_.norm_weight_offset, Bf16(out),
                           stream_);
  }

  absl::Status GatedDown() override {
    {
      absl::ReaderMutexLock lock(&b_.arena_.mu());
      uint16_t* gate = Bf16(Activations::kGate);
      DF11_RETURN_IF_ERROR(ops_.GatedActivation(gate, Bf16(Activations::kUp),
                                                rows_ * c_.intermediate_size, c_.activation, gate,
                                                stream_));
    }
    const Product down[] = {{LayerWeight::kDown, Activations::kBranch}};
    return Project(Activations::kGate, down);
  }

  absl::Status AddBranch() override {
    absl::ReaderMutexLock lock(&b_.arena_.mu());
    return ops_.Add(F32(Activations::kResidual), F32(Activations::kBranch),
                    rows_ * c_.hidden_size, stream_);
  }

  // The layer's reads of its scratch buffer are enqueued: the next decode into it may follow.
  absl::Status EndLayer(int64_t l) override {
    absl::ReaderMutexLock lock(&b_.arena_.mu());
    return b_.device_.Record(b_.queue_.free(ScratchBufferOf(l)), stream_);
  }

  // Each sequence's last row: the final norm, then the output head, into fp32 logits copied to
  // the host; then every decode of the pass is checked.
  absl::Status Logits() override {
    const int64_t H = c_.hidden_size, V = c_.vocab_size;
    const int64_t S = static_cast<int64_t>(batch_.size());
    const bool tiled_head = short_pass_ && m_.fused_head().has_value();
    const bool lane_head = short_pass_ && m_.lane_head().has_value();
    if (!tiled_head && !lane_head) DF11_RETURN_IF_ERROR(b_.queue_.DecodeHead(m_));
    {
      absl::ReaderMutexLock lock(&b_.arena_.mu());
      const ScratchBuffer head_buffer = m_.plan().head_buffer;
      DF11_RETURN_IF_ERROR(b_.device_.StreamWait(stream_, b_.queue_.ready(head_buffer)));
      float* last_x = reinterpret_cast<float*>(Base() + buffers_.last_x);
      uint16_t* last = reinterpret_cast<uint16_t*>(Base() + buffers_.last);
      DF11_RETURN_IF_ERROR(ops_.GatherRows(
          Base(), reinterpret_cast<const uint64_t*>(Base() + buffers_.last_rows), S, H * 4, last_x,
          stream_));
      const uint16_t* final_norm = Tensor(DeviceTensor{.space = DeviceTensor::Space::kModel,
                                                       .offset = m_.plan().final_norm.offset,
                                                       .bytes = m_.plan().final_norm.bytes});
      DF11_RETURN_IF_ERROR(ops_.FloatRmsNorm(last_x, final_norm, S, H, Eps(),
                                             c_.norm_weight_offset, last, false, stream_));
      auto* out = reinterpret_cast<float*>(Base() + buffers_.logits);
      if (tiled_head) {
        const ForwardOps::TiledProduct head[] = {
            {.w = m_.fused_head()->View(b_.arena_.AddressLocked(m_.allocation())), .y = out}};
        DF11_RETURN_IF_ERROR(ops_.TiledLinear(last, S, head, true, stream_));
      } else if (lane_head) {
        const codec::gpu::LaneProduct head[] = {LaneProductOf(*m_.lane_head(), nullptr, out)};
        DF11_RETURN_IF_ERROR(ops_.LaneLinear(last, S, head, true, LaneWorkspace(),
                                             m_.lane_workspace_bytes(), stream_));
      } else {
        DF11_RETURN_IF_ERROR(
            ops_.Linear(last, Tensor(LmHeadOf(m_.plan())), nullptr, S, H, V, out, true, stream_));
      }
      if (c_.final_logit_softcap > 0) {
        DF11_RETURN_IF_ERROR(ops_.SoftCap(out, S * V, c_.final_logit_softcap, stream_));
      }
      DF11_RETURN_IF_ERROR(b_.device_.Record(b_.queue_.free(head_buffer), stream_));
      // Every launch of the pass is issued; the copy into pageable memory waits for them.
      b_.enqueue_nanoseconds_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now() - b_.pass_start_)
                                     .count();
      DF11_RETURN_IF_ERROR(b_.device_.CopyAsync(logits_.data(), out, S * V * 4, stream_));
      // The fused lane products' error flag, back with the logits (RunPass reads it).
      if (short_pass_ && m_.lane_workspace_bytes() > 0) {
        DF11_RETURN_IF_ERROR(b_.device_.CopyAsync(b_.LaneFlagCopy(buffers_), LaneWorkspace(),
                                                  sizeof(uint32_t), stream_));
      }
    }
    DF11_RETURN_IF_ERROR(b_.device_.StreamSynchronize(stream_));
    return b_.queue_.Finish();
  }

 private:
  static size_t Index(LayerWeight w) { return static_cast<size_t>(w); }
  float Eps() const { return static_cast<float>(c_.rms_norm_eps); }
  // In a short pass, a layer whose tiled or lane-stream units all have their sources here decodes
  // none of them.
  bool SkipFused(int64_t l) const {
    const CudaPlacedModel::FusedLayer* f = short_pass_ ? m_.fused_layer(l) : nullptr;
    return f != nullptr && f->complete;
  }
  // q, k and v (gate and up) stored side by side, so that one product computes them.
  bool Adjacent(LayerWeight first) const {
    const LayerPlan& layer = m_.plan().layers[layer_];
    return first == LayerWeight::kQ ? layer.qkv_adjacent
                                    : first == LayerWeight::kGate && layer.gate_up_adjacent;
  }

  int64_t Width(Activations a) const { return ActivationWidth(c_, a); }
  uint64_t Offset(Activations a) const { return buffers_.activations[static_cast<size_t>(a)]; }
  char* Base() const ABSL_SHARED_LOCKS_REQUIRED(b_.arena_.mu()) { return b_.arena_.AddressLocked(buffers_.id); }
  void* Address(Activations a) const ABSL_SHARED_LOCKS_REQUIRED(b_.arena_.mu()) {
    return Base() + Offset(a);
  }
  uint16_t* Bf16(Activations a) const ABSL_SHARED_LOCKS_REQUIRED(b_.arena_.mu()) {
    return static_cast<uint16_t*>(Address(a));
  }
  float* F32(Activations a) const ABSL_SHARED_LOCKS_REQUIRED(b_.arena_.mu()) {
    return static_cast<float*>(Address(a));
  }
  const uint16_t* Tensor(const DeviceTensor& t) const ABSL_SHARED_LOCKS_REQUIRED(b_.arena_.mu()) {
    if (t.space == DeviceTensor::Space::kAbsent) return nullptr;
    const ArenaAllocator::Id id =
        t.space == DeviceTensor::Space::kModel ? m_.allocation() : b_.arena_.scratch(t.buffer);
    return reinterpret_cast<const uint16_t*>(b_.arena_.AddressLocked(id) + t.offset);
  }
  // The current layer's weight (nullptr when it has none), decoded or resident.
  const uint16_t* Weight(LayerWeight w) const ABSL_SHARED_LOCKS_REQUIRED(b_.arena_.mu()) {
    return Tensor(LayerTensorOf(m_.plan(), layer_, Index(w)));
  }
  // A lane-stream projection as the fused product takes it.
  codec::gpu::LaneProduct LaneProductOf(const CudaPlacedModel::LaneSource& s, const uint16_t* bias,
                                        void* y) const ABSL_SHARED_LOCKS_REQUIRED(b_.arena_.mu()) {
    return codec::gpu::LaneProduct{
        .unit = m_.lane(s.unit)->View(b_.arena_.AddressLocked(m_.allocation()), nullptr),
        .first_element = s.first_element,
        .rows = s.rows,
        .cols = s.cols,
        .bias = bias,
        .y = y};
  }
  // The fused lane products' pieces and error flag (in the pass buffers).
  void* LaneWorkspace() const ABSL_SHARED_LOCKS_REQUIRED(b_.arena_.mu()) {
    return Base() + buffers_.lane_workspace;
  }
  AttentionShape Shape(int64_t window) const {
    return AttentionShape{.heads = c_.num_heads,
                          .kv_heads = c_.num_kv_heads,
                          .head_dim = c_.head_dim,
                          .window = window,
                          .scale = c_.attention_scale,
                          .softcap = c_.attention_softcap};
  }
  PagedKv Kv() const ABSL_SHARED_LOCKS_REQUIRED(b_.arena_.mu()) {
    return PagedKv{
        .pool = b_.arena_.AddressLocked(b_.arena_.kv_pool()),
        .page_bytes = b_.kv_pool_.page_bytes(),
        .positions_per_page = static_cast<int64_t>(positions_per_page_),
        .layer = layer_,
        .kv_heads = c_.num_kv_heads,
        .head_dim = c_.head_dim,
        .pages = reinterpret_cast<const uint32_t*>(Base() + buffers_.pages),
        .row_first_page = reinterpret_cast<const int32_t*>(Base() + buffers_.row_first_page),
        .row_position = reinterpret_cast<const int32_t*>(Base() + buffers_.row_position),
        .page_indptr = reinterpret_cast<const int32_t*>(Base() + buffers_.page_indptr),
        .last_page_length = reinterpret_cast<const int32_t*>(Base() + buffers_.last_page_length)};
  }
  absl::Status Unsupported(const char* what) const {
    return absl::InternalError(absl::StrCat("the CUDA backend has no ", what));
  }

  CudaModelRunner& b_;
  const CudaPlacedModel& m_;
  const ModelConfig& c_;
  ForwardOps& ops_;
  const std::span<const SequenceStep> batch_;
  const std::span<const int32_t> tokens_;
  const uint64_t positions_per_page_;
  const PassBuffers& buffers_;
  const std::span<float> logits_;
  const int64_t rows_;
  const GpuDevice::Stream stream_;
  const bool short_pass_;
  int64_t layer_ = 0;
  const CudaPlacedModel::FusedLayer* tiled_ = nullptr;  // the current layer's, in short passes
};

std::map<std::string, DeviceWork::OpTime> CudaModelRunner::profile() const {
  absl::MutexLock lock(&profile_mu_);
  return profile_;
}

absl::Status CudaModelRunner::RunPass(const CudaPlacedModel& m, ForwardOps& ops,
                                      std::span<const SequenceStep> batch,
                                      std::span<float> logits) {
  pass_start_ = std::chrono::steady_clock::now();
  const ModelConfig& c = m.config();
  const int64_t H = c.hidden_size, V = c.vocab_size;
  const int64_t S = static_cast<int64_t>(batch.size());
  int64_t rows = 0;
  uint64_t pages = 0, positions_per_page = 0;
  tokens_.clear();
  for (const SequenceStep& s : batch) {
    const auto* cache = static_cast<const CudaKvCache*>(s.cache);
    positions_per_page = cache->table().positions_per_page;
    rows += static_cast<int64_t>(s.tokens.size());
    // The pages the sequence uses after this pass (its cache may hold more).
    const uint64_t used = UsedPages(*cache, s.tokens.size());
    if (used > cache->table().pages.size()) {
      return absl::InternalError(absl::StrCat("a sequence of ", cache->length() + s.tokens.size(),
                                              " positions in ", cache->table().pages.size(),
                                              " KV pages of ", positions_per_page, " positions"));
    }
    pages += used;
    tokens_.insert(tokens_.end(), s.tokens.begin(), s.tokens.end());
  }

  // The pass's buffers, one arena allocation: activations, logits and the KV metadata.
  PassBuffers b;
  uint64_t bytes = 0;
  auto take = [&bytes](uint64_t& at, uint64_t n) {
    at = bytes;
    bytes += base::AlignUp(n, 256);
  };
  for (size_t a = 0; a < b.activations.size(); ++a) {
    const auto kind = static_cast<Activations>(a);
    take(b.activations[a], rows * ActivationWidth(c, kind) * (IsF32(kind) ? 4 : 2));
  }
  if (rows <= kGroupedMaxRows) {
    auto width = [&c](Activations a) { return ActivationWidth(c, a); };
    const int64_t qkv =
        width(Activations::kQuery) + width(Activations::kKey) + width(Activations::kValue);
    take(b.grouped, rows * std::max(qkv, width(Activations::kGate) + width(Activations::kUp)) * 2);
  }
  take(b.last, S * H * 2);
  take(b.last_x, S * H * 4);
  take(b.logits, S * V * 4);
  if (rows <= options_.fused_max_rows) take(b.lane_workspace, m.lane_workspace_bytes());
  // Last, the metadata the host writes: the KV pages the sequences use and, per row, its
  // sequence's first page in them and its position; the offset of each sequence's last row of x;
  // each sequence's page offsets and its last page's positions; the embedding rows' offsets. One
  // page-locked buffer mirrors them.
  take(b.pages, pages * 4);
  take(b.row_first_page, rows * 4);
  take(b.row_position, rows * 4);
  take(b.last_rows, S * 8);
  take(b.page_indptr, (S + 1) * 4);
  take(b.last_page_length, S * 4);
  take(b.embedding_rows, rows * 8);
  b.bytes = bytes;
  // The buffers stay allocated from pass to pass (no arena work on the per-token path); they grow
  // when a pass needs more.
  {
    absl::MutexLock lock(&arena_.mu());
    DF11_ASSIGN_OR_RETURN(b.id, arena_.AcquirePassBuffersLocked(bytes));
  }
  // The previous pass has finished with the pinned buffer (each pass ends synchronized). Past
  // the metadata, 16 bytes take the fused lane products' error flag back.
  const uint64_t upload = bytes - b.pages + 16;
  if (upload > pinned_bytes_) {
    if (pinned_ != nullptr) device_.FreeHost(pinned_);
    pinned_ = nullptr;
    pinned_bytes_ = 0;
    DF11_ASSIGN_OR_RETURN(pinned_, device_.AllocateHost(upload));
    pinned_bytes_ = upload;
  }
  {
    // Laid out as the pass buffers from b.pages on.
    auto at = [&](uint64_t offset) { return static_cast<char*>(pinned_) + (offset - b.pages); };
    auto* page = reinterpret_cast<uint32_t*>(at(b.pages));
    auto* first_page = reinterpret_cast<int32_t*>(at(b.row_first_page));
    auto* position = reinterpret_cast<int32_t*>(at(b.row_position));
    auto* last = reinterpret_cast<uint64_t*>(at(b.last_rows));
    auto* page_indptr = reinterpret_cast<int32_t*>(at(b.page_indptr));
    auto* last_page_length = reinterpret_cast<int32_t*>(at(b.last_page_length));
    const auto per_page = static_cast<int64_t>(positions_per_page);
    int64_t r = 0, p = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto* cache = static_cast<const CudaKvCache*>(batch[i].cache);
      const int64_t length = cache->length() + static_cast<int64_t>(batch[i].tokens.size());
      for (size_t t = 0; t < batch[i].tokens.size(); ++t, ++r) {
        first_page[r] = static_cast<int32_t>(p);
        position[r] = static_cast<int32_t>(cache->length() + static_cast<int64_t>(t));
      }
      last[i] = b.activations[static_cast<size_t>(Activations::kResidual)] +
                static_cast<uint64_t>(r - 1) * H * 4;
      const uint64_t used = UsedPages(*cache, batch[i].tokens.size());
      page_indptr[i] = static_cast<int32_t>(p);
      last_page_length[i] = static_cast<int32_t>((length - 1) % per_page + 1);
      for (uint64_t k = 0; k < used; ++k) page[p++] = cache->table().pages[k];
    }
    page_indptr[batch.size()] = static_cast<int32_t>(p);
  }
  absl::Status status;
  {
    Pass pass(*this, m, ops, batch, tokens_, positions_per_page, b, logits);
    if (profiling_) {
      ProfiledDecoderOps profiled(device_, stream_->get(), timing_events_, pass);
      status = RunDecoder(c, profiled);
      if (status.ok()) status = device_.StreamSynchronize(stream_->get());
      // The times are read from the device before the profile's lock is taken.
      std::map<std::string, DeviceWork::OpTime> times;
      if (status.ok()) status = profiled.AddTo(times);
      if (status.ok()) {
        absl::MutexLock lock(&profile_mu_);
        for (const auto& [name, t] : times) {
          profile_[name].seconds += t.seconds;
          profile_[name].calls += t.calls;
        }
      }
    } else {
      status = RunDecoder(c, pass);
    }
  }
  // Every launch that reads the buffers has finished before another allocation may take them.
  absl::Status synced = device_.StreamSynchronize(stream_->get());
  // The fused lane products' error flag, copied back by a pass that reached its logits.
  if (status.ok() && synced.ok() && rows <= options_.fused_max_rows &&
      m.lane_workspace_bytes() > 0 && *LaneFlagCopy(b) != 0) {
    synced = absl::DataLossError(
        absl::StrCat("a forward pass of ", m.label(), " on ", device_name_,
                     ": fused lane-stream product: ", codec::gpu::kLaneCorruptMessage));
  }
  // The tiled products' error flag, read (and cleared) on every path, so that a pass that stopped
  // early leaves nothing to the next.
  if (rows <= options_.fused_max_rows && m.tiled_units() > 0) {
    if (absl::Status s = ops.CheckTiled(stream_->get()); !s.ok() && synced.ok()) {
      synced = absl::Status(s.code(), absl::StrCat("a forward pass of ", m.label(), " on ",
                                                   device_name_, ": ", s.message()));
    }
  }
  {
    absl::MutexLock lock(&arena_.mu());
    arena_.ReleasePassBuffersLocked();
  }
  DF11_RETURN_IF_ERROR(status);
  DF11_RETURN_IF_ERROR(synced);
  for (const SequenceStep& s : batch) {
    static_cast<CudaKvCache*>(s.cache)->Advance(static_cast<int64_t>(s.tokens.size()));
  }
  return absl::OkStatus();
}

}  // namespace df11::runtime
