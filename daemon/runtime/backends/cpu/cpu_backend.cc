#include "daemon/runtime/backends/cpu/cpu_backend.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "codec/base/first_error.h"
#include "codec/base/status_macros.h"
#include "codec/format.h"
#include "daemon/runtime/backends/cpu/matvec.h"
#include "daemon/runtime/engine/decoder_graph.h"

namespace df11::runtime {
namespace {

using format::Bf16ToFloat;

void Bf16ToFloat(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}

// transformers' RMSNorm in fp32: x * rsqrt(mean(x^2) + eps), then times (offset + weight); the
// offset is 1 for Gemma and 0 for the others.
void RmsNorm(const float* x, const uint16_t* weight, int64_t n, double eps, float offset,
             float* out) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n) + static_cast<float>(eps));
  for (int64_t i = 0; i < n; ++i) out[i] = (offset + Bf16ToFloat(weight[i])) * (x[i] * scale);
}

inline float Silu(float z) { return z / (1.0f + std::exp(-z)); }

// torch's gelu(approximate="tanh").
inline float GeluTanh(float z) {
  constexpr float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);
  constexpr float kKappa = 0.044715f;
  return 0.5f * z * (1.0f + std::tanh(kBeta * (z + kKappa * z * z * z)));
}

// cap · tanh(x / cap), in place.
void SoftCap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] / cap) * cap;
}

// Input rows from which a matrix product goes to sgemm rather than the matrix-vector kernel.
constexpr int64_t kGemmRows = 8;

}  // namespace

CpuKvCache::CpuKvCache(const ModelConfig& config, int64_t capacity,
                       std::shared_ptr<std::atomic<uint64_t>> live_bytes)
    : KvCache(capacity),
      row_(config.num_kv_heads * config.head_dim),
      live_bytes_(std::move(live_bytes)) {
  int64_t elements = 0;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const int64_t window = config.SlidingWindow(l);
    slots_.push_back(window > 0 ? std::min(capacity, window) : capacity);
    layer_offsets_.push_back(elements);
    elements += slots_.back() * row_;
  }
  keys_.resize(elements);
  values_.resize(elements);
  *live_bytes_ += bytes();
}

CpuKvCache::~CpuKvCache() { *live_bytes_ -= bytes(); }

CpuBackend::CpuBackend(const Options& options)
    : options_(options),
      pool_(options.threads),
      decode_pool_(options.overlap_decode ? options.threads : 1) {}

absl::StatusOr<std::unique_ptr<KvCache>> CpuBackend::NewCache(const ModelConfig& config,
                                                              int64_t capacity) {
  if (capacity < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a KV cache of ", capacity, " positions"));
  }
  return std::make_unique<CpuKvCache>(config, capacity, kv_bytes_);
}

PlacementEstimate CpuBackend::EstimatePlacement(const ModelEstimate& estimate) const {
  return PlacementEstimate{.unit_bytes = estimate.unit_bytes, .plain_bytes = estimate.plain_bytes};
}

absl::StatusOr<std::unique_ptr<PlacedModel>> CpuBackend::Place(std::unique_ptr<Model> model,
                                                               const PlaceProgressFn& progress) {
  if (model == nullptr) return absl::InvalidArgumentError("Place: no model");
  return std::unique_ptr<PlacedModel>(std::move(model));
}

BackendMemory CpuBackend::Memory() const {
  BackendMemory m;
  m.device_total = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                   static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  m.device_free = static_cast<uint64_t>(sysconf(_SC_AVPHYS_PAGES)) *
                  static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  m.scratch = scratch_bytes_.load();
  m.workspace = workspace_bytes_.load();
  m.kv_cache = kv_bytes_->load();
  return m;
}

// Every layer's: a sliding-window layer's cache stops growing at its window, so this is an upper
// bound for those.
uint64_t CpuBackend::KvBytesPerPosition(const ModelConfig& config) const {
  return 2 * static_cast<uint64_t>(config.num_layers * config.num_kv_heads * config.head_dim) *
         sizeof(float);
}

void CpuBackend::CountBuffers() {
  uint64_t floats = weights_f32_.capacity();
  for (const std::vector<float>* v : {&x_, &h_, &q_, &k_, &v_, &attn_, &gate_, &up_, &tmp_}) {
    floats += v->capacity();
  }
  scratch_bytes_ = scratch_.capacity() * sizeof(uint16_t);
  workspace_bytes_ = floats * sizeof(float) + matvec_input_.capacity_bytes();
}

absl::Status CpuBackend::Linear(const MatrixRef& w, const uint16_t* bias, int64_t out, int64_t in,
                                const float* x, int64_t rows, float* y) {
  // Many rows (prefill): W converted to fp32 a slice of rows at a time (a few MB, so the copy
  // stays small next to the model) and multiplied by sgemm. Few rows (decode): each W row is
  // read once and used for every input row, rows of W split over the threads.
  if (w.data == nullptr) {
    DF11_RETURN_IF_ERROR(LinearFused(w, out, in, x, rows, y));
  } else if (!matvec_pass_) {
    const int64_t slice = std::max<int64_t>(64, (int64_t{4} << 20) / in);  // ~16 MB of fp32
    weights_f32_.resize(std::min(out, slice) * in);
    for (int64_t o0 = 0; o0 < out; o0 += slice) {
      const int64_t n = std::min(slice, out - o0);
      pool_.ParallelFor(n, 64, [&](size_t b, size_t e) {
        Bf16ToFloat(w.data + (o0 + b) * in, weights_f32_.data() + b * in, (e - b) * in);
      });
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows),
                  static_cast<int>(n), static_cast<int>(in), 1.0f, x, static_cast<int>(in),
                  weights_f32_.data(), static_cast<int>(in), 0.0f, y + o0, static_cast<int>(out));
    }
  } else {
    matvec_input_.Set(x, rows, in);
    pool_.ParallelFor(out, 64, [&](size_t b, size_t e) {
      MatVecBf16(w.data + b * in, e - b, matvec_input_, y + b, out);
    });
  }
  if (bias != nullptr) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < out; ++o) y[r * out + o] += Bf16ToFloat(bias[o]);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::LinearFused(const MatrixRef& w, int64_t out, int64_t in, const float* x,
                                     int64_t rows, float* y) {
  if (w.interleaved != nullptr) {
    LinearInterleaved(*w.interleaved, w.region, out, in, x, rows, y);
    return absl::OkStatus();
  }
  // Ranges of whole W rows: a range decodes the blocks that hold its rows, so a block split
  // between two ranges is decoded twice. Blocks hold about 23K weights of LLM data; ranges of
  // 128K-512K weights (four per thread when the matrix is large enough) keep that under 10 %.
  const int64_t per_range = std::clamp<int64_t>(out * in / (4 * pool_.size()), 1 << 17, 1 << 19);
  const size_t grain = static_cast<size_t>(std::max<int64_t>(1, per_range / in));
  base::FirstError errors;
  matvec_input_.Set(x, rows, in);
  pool_.ParallelFor(out, grain, [&](size_t begin, size_t end) {
    // The start of a row split between pieces, as its two byte planes.
    thread_local std::vector<uint8_t> partial_exps, partial_sm;
    partial_exps.resize(in);
    partial_sm.resize(in);
    size_t row = begin, filled = 0;
    absl::Status s = w.unit->DecodeExponentsInPieces(
        w.offset + begin * in, w.offset + end * in,
        [&](std::span<const uint8_t> exps, std::span<const uint8_t> sign_mantissa) {
          size_t used = 0;
          while (used < exps.size()) {
            if (filled == 0 && exps.size() - used >= static_cast<size_t>(in)) {
              const size_t whole = (exps.size() - used) / in;
              MatVecDf11(exps.data() + used, sign_mantissa.data() + used, whole, matvec_input_,
                         y + row, out);
              row += whole;
              used += whole * in;
              continue;
            }
            const size_t take = std::min<size_t>(in - filled, exps.size() - used);
            std::memcpy(partial_exps.data() + filled, exps.data() + used, take);
            std::memcpy(partial_sm.data() + filled, sign_mantissa.data() + used, take);
            filled += take;
            used += take;
            if (filled == static_cast<size_t>(in)) {
              MatVecDf11(partial_exps.data(), partial_sm.data(), 1, matvec_input_, y + row, out);
              ++row;
              filled = 0;
            }
          }
        });
    errors.Add(std::move(s));
  });
  return errors.status();
}

void CpuBackend::LinearInterleaved(const codec::InterleavedUnit& u, size_t region, int64_t out,
                                   int64_t in, const float* x, int64_t rows, float* y) {
  // Segments of whole rows split over the threads, about four ranges per thread. One input row:
  // each segment is decoded straight into the dot products. More: decoded to BF16 in cache, then
  // the BF16 kernel, which reads each row once for all inputs.
  const size_t first = u.first_segment(region), end = u.first_segment(region + 1);
  const bool fused = rows == 1 && u.FusedMatVecSupported(region);
  if (!fused) matvec_input_.Set(x, rows, in);
  const size_t grain = std::max<size_t>(1, (end - first) / (4 * pool_.size()));
  const size_t region_first = u.region(region).first;
  pool_.ParallelFor(end - first, grain, [&](size_t b, size_t e) {
    const size_t row = (u.segment_first(first + b) - region_first) / in;
    if (fused) {
      u.MatVecSegments(first + b, first + e, x, y + row);
      return;
    }
    thread_local std::vector<uint16_t> bf16;
    bf16.resize(u.segment_first(first + e) - u.segment_first(first + b));
    u.DecodeSegments(first + b, first + e, bf16.data());
    MatVecBf16(bf16.data(), bf16.size() / in, matvec_input_, y + row, out);
  });
}

void CpuBackend::Attention(const ModelConfig& c, int64_t layer, CpuKvCache& cache,
                           int64_t new_tokens, int64_t first_row, float* out) {
  const int64_t nh = c.num_heads, nkv = c.num_kv_heads, d = c.head_dim;
  const int64_t group = nh / nkv, window = c.SlidingWindow(layer);
  const int64_t start = cache.length();  // position of the first new token
  const float scale = c.attention_scale, softcap = c.attention_softcap;
  // A position's key and value: in the cache before `start`, in this step's rows from it on.
  auto key = [&](int64_t j) {
    return j < start ? cache.k(layer, j) : &k_[(first_row + j - start) * nkv * d];
  };
  auto value = [&](int64_t j) {
    return j < start ? cache.v(layer, j) : &v_[(first_row + j - start) * nkv * d];
  };
  pool_.ParallelFor(new_tokens * nh, 1, [&](size_t b, size_t e) {
    thread_local std::vector<float> scores;
    for (size_t task = b; task < e; ++task) {
      const int64_t t = task / nh, h = task % nh, kvh = h / group;
      const int64_t pos = start + t;  // causal: keys first .. pos
      const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      const float* qv = &q_[(first_row + t) * nh * d + h * d];
      scores.resize(pos + 1 - first);
      float max = -INFINITY;
      for (int64_t j = first; j <= pos; ++j) {
        const float* kv = key(j) + kvh * d;
        float dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += qv[i] * kv[i];
        float score = dot * scale;
        if (softcap > 0) score = std::tanh(score / softcap) * softcap;
        scores[j - first] = score;
        max = std::max(max, score);
      }
      double total = 0;
      for (float& s : scores) total += s = std::exp(s - max);
      float* o = out + (first_row + t) * nh * d + h * d;
      std::fill(o, o + d, 0.0f);
      for (int64_t j = first; j <= pos; ++j) {
        const float p = static_cast<float>(scores[j - first] / total);
        const float* vv = value(j) + kvh * d;
        for (int64_t i = 0; i < d; ++i) o[i] += p * vv[i];
      }
    }
  });
}

// The CPU's DecoderOps: every activation fp32 in the backend's buffers; weights from the model
// layer by layer (Model::Layer), block l + 1 decoding in the background while block l computes
// when that pays.
class CpuBackend::Pass final : public DecoderOps {
 public:
  // `fused`: DF11 matrices stay compressed and are decoded inside the products (no scratch).
  Pass(CpuBackend& backend, const Model& model, std::span<const SequenceStep> batch, int64_t rows,
       bool fused, std::span<float> logits)
      : b_(backend),
        model_(model),
        c_(model.config()),
        batch_(batch),
        rows_(rows),
        fused_(fused),
        overlap_(backend.options_.overlap_decode && model.is_df11() && !fused &&
                 model.config().num_layers > 1),
        logits_(logits) {}
  // The background decode writes next_ and the scratch: it must be done before either goes.
  ~Pass() override { b_.prefetch_.Wait(); }

  absl::Status Embed() override {
    int64_t r = 0;
    for (const SequenceStep& s : batch_) {
      DF11_RETURN_IF_ERROR(model_.EmbedTokens(s.tokens, b_.x_.data() + r * c_.hidden_size));
      r += static_cast<int64_t>(s.tokens.size());
    }
    return absl::OkStatus();
  }

  absl::Status BeginLayer(int64_t l) override {
    if (l == 0) next_ = model_.Layer(0, LayerScratch(0), &b_.pool_, !fused_);
    if (overlap_) b_.prefetch_.Wait();
    DF11_ASSIGN_OR_RETURN(w_, std::move(next_));
    layer_ = l;
    if (l + 1 < c_.num_layers) {
      if (overlap_) {
        b_.prefetch_.Start(
            [this, l] { next_ = model_.Layer(l + 1, LayerScratch(l + 1), &b_.decode_pool_); });
      } else {
        next_ = model_.Layer(l + 1, LayerScratch(l + 1), &b_.pool_, !fused_);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Norm(Activations in, LayerWeight weight, Activations out) override {
    const int64_t H = c_.hidden_size;
    const float* x = Buffer(in);
    float* y = Buffer(out);
    for (int64_t r = 0; r < rows_; ++r) {
      RmsNorm(x + r * H, Vector(weight), H, c_.rms_norm_eps, c_.norm_weight_offset, y + r * H);
    }
    return absl::OkStatus();
  }

  absl::Status Project(Activations in, std::span<const Product> products) override {
    for (const Product& p : products) {
      DF11_RETURN_IF_ERROR(b_.Linear(Matrix(p.weight), Vector(BiasOf(p.weight)), Width(p.out),
                                     Width(in), Buffer(in), rows_, Buffer(p.out)));
    }
    return absl::OkStatus();
  }

  absl::Status PrepareHeads() override {
    const int64_t nh = c_.num_heads, nkv = c_.num_kv_heads, d = c_.head_dim;
    const float offset = c_.norm_weight_offset;
    const RotaryEmbedding& rope = model_.rotary(c_.SlidingWindow(layer_) > 0);
    int64_t r = 0;
    for (const SequenceStep& s : batch_) {
      for (size_t t = 0; t < s.tokens.size(); ++t, ++r) {
        float* qr = &b_.q_[r * nh * d];
        float* kr = &b_.k_[r * nkv * d];
        if (w_.q_norm != nullptr) {  // Qwen3, Gemma 3: per-head RMSNorm before RoPE
          for (int64_t h = 0; h < nh; ++h)
            RmsNorm(qr + h * d, w_.q_norm, d, c_.rms_norm_eps, offset, qr + h * d);
          for (int64_t h = 0; h < nkv; ++h)
            RmsNorm(kr + h * d, w_.k_norm, d, c_.rms_norm_eps, offset, kr + h * d);
        }
        const int64_t pos = s.cache->length() + static_cast<int64_t>(t);
        rope.Apply(qr, nh, d, pos);
        rope.Apply(kr, nkv, d, pos);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Attend() override {
    const int64_t nkv = c_.num_kv_heads, d = c_.head_dim;
    int64_t r = 0;
    for (const SequenceStep& s : batch_) {
      const int64_t n = static_cast<int64_t>(s.tokens.size());
      b_.Attention(c_, layer_, static_cast<CpuKvCache&>(*s.cache), n, r, b_.attn_.data());
      r += n;
    }
    // The new keys and values into the caches, once every query of the step has used them (a
    // sliding-window layer's slots may be reused within one step).
    r = 0;
    for (const SequenceStep& s : batch_) {
      auto& cache = static_cast<CpuKvCache&>(*s.cache);
      for (size_t t = 0; t < s.tokens.size(); ++t, ++r) {
        const int64_t pos = cache.length() + static_cast<int64_t>(t);
        std::memcpy(cache.k(layer_, pos), &b_.k_[r * nkv * d], nkv * d * sizeof(float));
        std::memcpy(cache.v(layer_, pos), &b_.v_[r * nkv * d], nkv * d * sizeof(float));
      }
    }
    return absl::OkStatus();
  }

  absl::Status AddBranchAndNorm(LayerWeight norm, Activations out) override {
    DF11_RETURN_IF_ERROR(AddBranch());
    return Norm(Activations::kResidual, norm, out);
  }

  absl::Status GatedDown() override {
    const int64_t n = rows_ * c_.intermediate_size;
    float* gate = b_.gate_.data();
    const float* up = b_.up_.data();
    if (c_.activation == Activation::kGeluTanh) {
      for (int64_t i = 0; i < n; ++i) gate[i] = GeluTanh(gate[i]) * up[i];
    } else {
      for (int64_t i = 0; i < n; ++i) gate[i] = Silu(gate[i]) * up[i];
    }
    const Product down[] = {{LayerWeight::kDown, Activations::kBranch}};
    return Project(Activations::kGate, down);
  }

  absl::Status AddBranch() override {
    float* x = b_.x_.data();
    const float* y = b_.tmp_.data();
    for (int64_t i = 0; i < rows_ * c_.hidden_size; ++i) x[i] += y[i];
    return absl::OkStatus();
  }

  absl::Status EndLayer(int64_t) override { return absl::OkStatus(); }

  absl::Status Logits() override {
    const int64_t H = c_.hidden_size, V = c_.vocab_size;
    const int64_t sequences = static_cast<int64_t>(batch_.size());
    // The last new token of each sequence: final norm, then the output head.
    int64_t r = 0, s_index = 0;
    for (const SequenceStep& s : batch_) {
      r += static_cast<int64_t>(s.tokens.size());
      RmsNorm(&b_.x_[(r - 1) * H], model_.final_norm(), H, c_.rms_norm_eps,
              c_.norm_weight_offset, &b_.h_[s_index * H]);
      ++s_index;
    }
    DF11_ASSIGN_OR_RETURN(const MatrixRef head, model_.LmHead(b_.scratch_, &b_.pool_, !fused_));
    // One row per sequence: always the matrix-vector kernels, so that a sequence's logits do not
    // depend on the batch.
    b_.matvec_pass_ = true;
    DF11_RETURN_IF_ERROR(b_.Linear(head, nullptr, V, H, b_.h_.data(), sequences, logits_.data()));
    if (c_.final_logit_softcap > 0) SoftCap(logits_.data(), sequences * V, c_.final_logit_softcap);
    return absl::OkStatus();
  }

 private:
  // A layer's half of the scratch (empty when the matrices stay compressed).
  std::span<uint16_t> LayerScratch(int64_t l) const {
    const size_t n = model_.layer_scratch_elements();
    return fused_ ? std::span<uint16_t>() : std::span(b_.scratch_).subspan((l % 2) * n, n);
  }

  float* Buffer(Activations a) const {
    switch (a) {
      case Activations::kResidual: return b_.x_.data();
      case Activations::kNormed: return b_.h_.data();
      case Activations::kQuery: return b_.q_.data();
      case Activations::kKey: return b_.k_.data();
      case Activations::kValue: return b_.v_.data();
      case Activations::kAttention: return b_.attn_.data();
      case Activations::kGate: return b_.gate_.data();
      case Activations::kUp: return b_.up_.data();
      case Activations::kBranch: return b_.tmp_.data();
    }
    return nullptr;
  }

  int64_t Width(Activations a) const { return ActivationWidth(c_, a); }

  const MatrixRef& Matrix(LayerWeight k) const {
    const MatrixRef* m[] = {&w_.q_proj,    &w_.k_proj,  &w_.v_proj,   &w_.o_proj,
                            &w_.gate_proj, &w_.up_proj, &w_.down_proj};
    return *m[static_cast<int>(k)];
  }

  // A norm or bias of the current layer (nullptr when it has none).
  const uint16_t* Vector(LayerWeight k) const {
    switch (k) {
      case LayerWeight::kInputNorm: return w_.input_norm;
      case LayerWeight::kMlpNorm: return w_.mlp_norm;
      case LayerWeight::kQNorm: return w_.q_norm;
      case LayerWeight::kKNorm: return w_.k_norm;
      case LayerWeight::kQBias: return w_.q_bias;
      case LayerWeight::kKBias: return w_.k_bias;
      case LayerWeight::kVBias: return w_.v_bias;
      case LayerWeight::kOBias: return w_.o_bias;
      case LayerWeight::kGateBias: return w_.gate_bias;
      case LayerWeight::kUpBias: return w_.up_bias;
      case LayerWeight::kDownBias: return w_.down_bias;
      case LayerWeight::kAttentionOutputNorm: return w_.attention_output_norm;
      case LayerWeight::kMlpOutputNorm: return w_.mlp_output_norm;
      default: return nullptr;
    }
  }

  CpuBackend& b_;
  const Model& model_;
  const ModelConfig& c_;
  const std::span<const SequenceStep> batch_;
  const int64_t rows_;
  const bool fused_;
  const bool overlap_;
  const std::span<float> logits_;
  int64_t layer_ = 0;
  LayerWeights w_;                      // the current layer's
  absl::StatusOr<LayerWeights> next_;  // the next layer's, once decoded
};

absl::Status CpuBackend::Forward(const PlacedModel& placed, std::span<const SequenceStep> batch,
                                 std::span<float> logits) {
  const auto* host = dynamic_cast<const Model*>(&placed);
  if (host == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("Forward: the model is placed on ",
                                                   std::string(placed.device()), ", not the CPU"));
  }
  const Model& model = *host;
  const ModelConfig& c = model.config();
  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size;
  const int64_t nh = c.num_heads, nkv = c.num_kv_heads, d = c.head_dim;
  if (batch.empty()) return absl::InvalidArgumentError("Forward: empty batch");
  if (logits.size() < batch.size() * static_cast<size_t>(V)) {
    return absl::InvalidArgumentError(absl::StrCat("Forward: logits hold ", logits.size(),
                                                   " values; ", batch.size(), " sequences need ",
                                                   batch.size() * V));
  }
  int64_t rows = 0;
  for (const SequenceStep& s : batch) {
    if (s.tokens.empty()) return absl::InvalidArgumentError("Forward: a sequence without tokens");
    if (dynamic_cast<CpuKvCache*>(s.cache) == nullptr) {
      return absl::InvalidArgumentError("Forward: a KV cache made by another backend");
    }
    DF11_RETURN_IF_ERROR(CheckTokenIds(s.tokens, V));
    if (s.cache->length() + static_cast<int64_t>(s.tokens.size()) > s.cache->capacity()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the KV cache holds ", s.cache->capacity(), " positions; ",
                       s.cache->length(), " are used and ", s.tokens.size(), " more were given"));
    }
    rows += static_cast<int64_t>(s.tokens.size());
  }
  // Few rows, or one new token per sequence (decode steps): the matrix-vector kernels, whose sum
  // for each row does not depend on the other rows, so a batch of decode steps gives each
  // sequence the logits it would get alone. A prompt of many tokens goes through sgemm.
  matvec_pass_ = rows < kGemmRows || rows == static_cast<int64_t>(batch.size());
  // With the matrix-vector kernels, DF11 matrices stay compressed and are decoded inside the
  // products. Otherwise two layer scratches side by side; the output head reuses the whole
  // buffer after.
  const bool fused = model.is_df11() && !model.vectors_in_units() && matvec_pass_;
  const size_t layer_elements = model.layer_scratch_elements();
  if (!fused) scratch_.resize(std::max(2 * layer_elements, model.head_scratch_elements()));
  x_.resize(rows * H);
  h_.resize(rows * H);
  tmp_.resize(rows * H);
  q_.resize(rows * nh * d);
  k_.resize(rows * nkv * d);
  v_.resize(rows * nkv * d);
  attn_.resize(rows * nh * d);
  gate_.resize(rows * I);
  up_.resize(rows * I);
  CountBuffers();
  absl::Status status;
  {
    Pass pass(*this, model, batch, rows, fused, logits);
    status = RunDecoder(c, pass);
  }
  if (status.ok()) {
    for (const SequenceStep& s : batch) {
      static_cast<CpuKvCache*>(s.cache)->Advance(static_cast<int64_t>(s.tokens.size()));
    }
  }
  CountBuffers();
  return status;
}

}  // namespace df11::runtime
