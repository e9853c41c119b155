// The CPU backend: the forward pass of Llama / Qwen2 / Qwen3 in fp32 from BF16 weights, one
// decoder block at a time (decoded from DF11 into shared scratch when the model is compressed),
// with OpenBLAS for matrix products over many rows and a threaded BF16 matrix-vector path for few.
//
//   CpuBackend backend(/*threads=*/0);
//   KvCache cache(model->config(), /*capacity=*/4096);
//   std::vector<float> logits(model->config().vocab_size);
//   SequenceStep step{&cache, prompt_ids};
//   DF11_RETURN_IF_ERROR(backend.Forward(*model, std::span(&step, 1), logits));
#ifndef DF11_DAEMON_RUNTIME_CPU_BACKEND_H_
#define DF11_DAEMON_RUNTIME_CPU_BACKEND_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "codec/thread_pool.h"
#include "daemon/runtime/model.h"

namespace df11::runtime {

// The keys and values of one sequence, fp32, [layer][position][kv head][head_dim].
class KvCache {
 public:
  KvCache(const ModelConfig& config, int64_t capacity);
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  uint64_t bytes() const { return 2 * data_per_layer_ * layers_ * sizeof(float); }
  // Forgets everything (the sequence starts over).
  void Clear() { length_ = 0; }

 private:
  friend class CpuBackend;
  float* k(int64_t layer, int64_t pos) { return keys_.data() + layer * data_per_layer_ + pos * row_; }
  float* v(int64_t layer, int64_t pos) { return values_.data() + layer * data_per_layer_ + pos * row_; }
  int64_t layers_, capacity_, row_, data_per_layer_;
  int64_t length_ = 0;
  std::vector<float> keys_, values_;
};

// New tokens of one sequence for one forward pass; they are appended to `cache`.
struct SequenceStep {
  KvCache* cache;
  std::span<const int32_t> tokens;
};

class CpuBackend {
 public:
  // `threads` 0: one per hardware thread.
  explicit CpuBackend(int threads);

  // Runs `model` over each sequence's new tokens (all sequences batched through every matrix
  // product), appends their keys and values to the caches, and writes the logits of each
  // sequence's last new token to logits[s * vocab_size, (s + 1) * vocab_size). kInvalidArgument for
  // an empty step, a token id outside the vocabulary, a cache without room (with the numbers) or a
  // short `logits`; kDataLoss from a corrupt DF11 unit. Not thread-safe: one Forward at a time.
  absl::Status Forward(const Model& model, std::span<const SequenceStep> batch,
                       std::span<float> logits);

  codec::ThreadPool& pool() { return pool_; }

 private:
  // y[rows, out] = x[rows, in] · Wᵀ (+ bias), W BF16 [out, in].
  void Linear(const uint16_t* w, const uint16_t* bias, int64_t out, int64_t in, const float* x,
              int64_t rows, float* y);
  void Attention(const ModelConfig& c, int64_t layer, const SequenceStep& step, int64_t first_row,
                 const float* q, float* out);

  codec::ThreadPool pool_;
  // Buffers reused across calls (grown, never shrunk): no allocation on a warm path.
  std::vector<uint16_t> scratch_;    // decoded DF11 units
  std::vector<float> weights_f32_;   // one matrix in fp32 for sgemm
  std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_, tmp_;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_CPU_BACKEND_H_
