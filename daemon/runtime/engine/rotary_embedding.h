// Rotary position embeddings (RoPE) in fp32, as transformers computes them (modeling_rope_utils):
// default, linear, Llama-3 and LongRoPE frequencies, rotating the first rotary_dim dimensions of
// each head in the half-split ("NEOX") layout.
//
//   RotaryEmbedding rope(config.rope, config.rotary_dim);
//   rope.Apply(q, config.num_heads, config.head_dim, position);
#ifndef DF11_DAEMON_RUNTIME_ENGINE_ROTARY_EMBEDDING_H_
#define DF11_DAEMON_RUNTIME_ENGINE_ROTARY_EMBEDDING_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "daemon/runtime/engine/model_config.h"

namespace df11::runtime {

class RotaryEmbedding {
 public:
  RotaryEmbedding(const RopeConfig& rope, int64_t rotary_dim);

  // Rotates each of the `heads` heads (head_dim apart) of `x` for position `pos`.
  void Apply(float* x, int64_t heads, int64_t head_dim, int64_t pos) const;

  // The inverse frequencies used at `pos` (rotary_dim / 2 of them).
  const std::vector<float>& InverseFrequencies(int64_t pos) const {
    return pos >= long_from_ ? long_inverse_ : inverse_;
  }
  int64_t rotary_dim() const { return rotary_dim_; }
  // The first position that uses the long factors (LongRoPE; the largest int64 otherwise), and
  // the factor on cos and sin.
  int64_t long_from() const { return long_from_; }
  float scale() const { return scale_; }

 private:
  int64_t rotary_dim_;
  std::vector<float> inverse_;
  // LongRoPE: from position long_from_ on, the long factors' frequencies. vLLM does the same;
  // transformers instead recomputes the whole sequence with them once it grows past
  // original_max_position_embeddings, so outputs differ there (and only there).
  std::vector<float> long_inverse_;
  int64_t long_from_ = std::numeric_limits<int64_t>::max();
  float scale_ = 1.0f;  // LongRoPE's attention factor, on cos and sin
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_ENGINE_ROTARY_EMBEDDING_H_
