// The CPU backend: the forward pass of the ModelConfig architectures (Llama, Mistral, Qwen2,
// Qwen3, Gemma 3, Phi-3) in fp32 from BF16 weights, one decoder block at a time.
//  - Many rows (prefill): OpenBLAS sgemm. For a DF11 model each block is decoded into one of two
//    shared scratches while the previous block computes.
//  - Few rows (decode steps): an AVX2 BF16 matrix-vector kernel. For a DF11 model each thread
//    decodes its rows of a matrix four blocks at a time and multiplies them while they are in
//    cache, so decoded weights never go to memory and no scratch is needed. Each output is the
//    same sum in the same order as from BF16 weights: both give identical logits.
//
// Models stay in host memory as Model::Load opened them: Place returns the Model itself.
//
//   CpuBackend backend(CpuBackend::Options{});
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(dir));
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, backend.NewCache(model->config(), 4096));
//   std::vector<float> logits(model->config().vocab_size);
//   SequenceStep step{cache.get(), prompt_ids};
//   DF11_RETURN_IF_ERROR(backend.Forward(*model, std::span(&step, 1), logits));
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CPU_CPU_BACKEND_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CPU_CPU_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codec/thread_pool.h"
#include "daemon/runtime/engine/backend.h"
#include "daemon/runtime/backends/cpu/background_job.h"
#include "daemon/runtime/backends/cpu/matvec.h"
#include "daemon/runtime/engine/model.h"

namespace df11::runtime {

// The keys and values of one sequence in host memory, fp32, [layer][slot][kv head][head_dim]. A
// full-attention layer has a slot per position; a sliding-window layer only its window's, used
// round robin (position p in slot p mod window).
class CpuKvCache final : public KvCache {
 public:
  // `live_bytes` counts the bytes of every cache alive (shared with the backend that made it).
  CpuKvCache(const ModelConfig& config, int64_t capacity,
             std::shared_ptr<std::atomic<uint64_t>> live_bytes);
  ~CpuKvCache() override;
  uint64_t bytes() const override { return 2 * keys_.size() * sizeof(float); }

 private:
  friend class CpuBackend;
  float* k(int64_t layer, int64_t pos) {
    return keys_.data() + layer_offsets_[layer] + (pos % slots_[layer]) * row_;
  }
  float* v(int64_t layer, int64_t pos) {
    return values_.data() + layer_offsets_[layer] + (pos % slots_[layer]) * row_;
  }
  void Advance(int64_t n) { length_ += n; }
  int64_t row_;
  std::vector<int64_t> slots_, layer_offsets_;  // per layer
  std::vector<float> keys_, values_;
  std::shared_ptr<std::atomic<uint64_t>> live_bytes_;
};

class CpuBackend final : public Backend {
 public:
  struct Options {
    // Threads for the matrix products and the decoder; 0: one per hardware thread.
    int threads = 0;
    // DF11 models: decode block i + 1 on a background thread while block i computes. Off, each
    // block is decoded and then computed, both on all threads.
    bool overlap_decode = true;
  };
  explicit CpuBackend(const Options& options);

  std::string_view name() const override { return "cpu"; }
  std::string_view device() const override { return "cpu"; }
  Model::LoadOptions HostLoadOptions() const override { return Model::LoadOptions{}; }
  bool ReadsFilesAtPlace() const override { return false; }
  // The estimate's bytes: a model never holds more than its files (Model::Load). Scratch grows
  // at the first forward pass that needs it.
  PlacementEstimate EstimatePlacement(const ModelEstimate& estimate) const override;
  // Returns `model` itself; copies nothing.
  absl::StatusOr<std::unique_ptr<PlacedModel>> Place(std::unique_ptr<Model> model,
                                                     const PlaceProgressFn& progress) override;
  absl::StatusOr<std::unique_ptr<KvCache>> NewCache(const ModelConfig& config,
                                                    int64_t capacity) override;
  absl::Status Forward(const PlacedModel& model, std::span<const SequenceStep> batch,
                       std::span<float> logits) override;
  BackendMemory Memory() const override;
  uint64_t KvBytesPerPosition(const ModelConfig& config) const override;

  codec::ThreadPool& pool() { return pool_; }

 private:
  // y[rows, out] = x[rows, in] · Wᵀ (+ bias), W BF16 [out, in]. A W still in its DF11 unit is
  // decoded four blocks at a time by each thread and multiplied while in cache (LinearFused).
  // kDataLoss from the decoder.
  // Updates scratch_bytes_ and workspace_bytes_ after the buffers grew.
  void CountBuffers();
  absl::Status Linear(const MatrixRef& w, const uint16_t* bias, int64_t out, int64_t in,
                      const float* x, int64_t rows, float* y);
  absl::Status LinearFused(const MatrixRef& w, int64_t out, int64_t in, const float* x,
                           int64_t rows, float* y);
  // LinearFused for a matrix of a re-encoded unit (codec::InterleavedUnit).
  void LinearInterleaved(const codec::InterleavedUnit& u, size_t region, int64_t out, int64_t in,
                         const float* x, int64_t rows, float* y);
  // Attention of one sequence's `new_tokens` queries (rows first_row on of q_, k_, v_, after
  // RoPE) over its cached positions and the new ones, before the new ones are cached.
  void Attention(const ModelConfig& c, int64_t layer, CpuKvCache& cache, int64_t new_tokens,
                 int64_t first_row, float* out);
  // One forward pass: the decoder graph's operations (decoder_graph.h) on this backend.
  class Pass;

  Options options_;
  codec::ThreadPool pool_;         // matrix products, attention, and decoding without overlap
  codec::ThreadPool decode_pool_;  // decoding the next block while the current one computes
  BackgroundJob prefetch_;
  // Buffers reused across calls (grown, never shrunk): no allocation on a warm path.
  std::vector<uint16_t> scratch_;   // two layer scratches, or the output head's
  std::vector<float> weights_f32_;  // a slice of one matrix in fp32 for sgemm
  std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_, tmp_;
  MatVecInput matvec_input_;  // the input rows of the current matrix-vector product
  // This pass uses the matrix-vector kernels rather than sgemm (set by Forward).
  bool matvec_pass_ = false;
  std::atomic<uint64_t> scratch_bytes_{0}, workspace_bytes_{0};
  std::shared_ptr<std::atomic<uint64_t>> kv_bytes_ = std::make_shared<std::atomic<uint64_t>>(0);
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CPU_CPU_BACKEND_H_
