// The model facts the engine needs, read from config.json and generation_config.json of a Hugging
// Face (or DF11) model directory: Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3 (text, and the
// text tower of Gemma3ForConditionalGeneration) and Phi-3 / Phi-4 causal LMs. Every backend
// computes the forward pass from this description, so an architecture differs from Llama only by
// these fields.
#ifndef DF11_DAEMON_RUNTIME_ENGINE_MODEL_CONFIG_H_
#define DF11_DAEMON_RUNTIME_ENGINE_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/architecture.h"
#include "codec/model_directory.h"

namespace df11::runtime {

using codec::Architecture;

enum class Activation { kSilu, kGeluTanh };  // the gated MLP's: silu, gelu_pytorch_tanh

struct RopeConfig {
  enum class Type { kDefault, kLinear, kLlama3, kLongRope };
  Type type = Type::kDefault;
  double theta = 10000.0;
  double factor = 1.0;                              // linear, llama3, longrope
  double low_freq_factor = 1.0;                     // llama3
  double high_freq_factor = 4.0;                    // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3, longrope
  // longrope: per-frequency divisors below and from original_max_position_embeddings on, and the
  // factor that scales cos and sin.
  std::vector<double> short_factor, long_factor;
  double attention_factor = 1.0;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string architecture_name;  // "Qwen3ForCausalLM"
  // Where the decoder's tensors are: "<prefix>layers.<i>.", "<prefix>embed_tokens.weight",
  // "<prefix>norm.weight"; and the output head when not tied. Gemma3ForConditionalGeneration
  // checkpoints name the text tower "language_model.model." (transformers < 4.52) or
  // "model.language_model."; Model::Load sets the one the files use.
  std::string tensor_prefix = "model.";
  std::string lm_head_name = "lm_head.weight";
  // True for a multimodal checkpoint of which only the text tower is used (InTextModel).
  bool text_tower_only = false;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v (and o for Llama) biases; always on for Qwen2's q/k/v
  bool mlp_bias = false;        // Llama only
  // Phi-3: q, k, v in one qkv_proj and gate, up in one gate_up_proj tensor.
  bool fused_projections = false;
  // Gemma: the attention and MLP outputs are normalised before the residual add.
  bool output_norms = false;
  Activation activation = Activation::kSilu;
  // RMSNorm multiplies by (norm_weight_offset + weight): 1 for Gemma, 0 for the others.
  float norm_weight_offset = 0.0f;
  // The embedding rows are multiplied by this (Gemma: sqrt(hidden_size)).
  float embedding_scale = 1.0f;
  // Attention scores are q·k times this: head_dim^-0.5, or query_pre_attn_scalar^-0.5 (Gemma).
  float attention_scale = 0.0f;
  // tanh soft-capping, cap · tanh(x / cap), of attention scores (Gemma 2) and of the logits
  // (Gemma 2 and 3); 0: none.
  float attention_softcap = 0.0f;
  float final_logit_softcap = 0.0f;
  // Leading dimensions of each head that RoPE rotates (partial_rotary_factor · head_dim).
  int64_t rotary_dim = 0;
  // Per layer: 0 for full attention, else the number of most recent positions (the token's own
  // included) that a token attends to. A sliding layer's KV cache keeps only its window.
  std::vector<int64_t> sliding_window;
  int64_t SlidingWindow(int64_t layer) const {
    return layer < static_cast<int64_t>(sliding_window.size()) ? sliding_window[layer] : 0;
  }
  RopeConfig rope;
  // The RoPE of sliding-window layers: Gemma 3's local base; the same as `rope` otherwise.
  RopeConfig sliding_rope;
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;  // union of config.json's and generation_config.json's
  // generation_config.json sampling defaults (transformers' defaults when absent).
  bool do_sample = false;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  double repetition_penalty = 1.0;
};

// The model description of a model directory's config.json and generation_config.json, as read.
// Accepts both RoPE spellings (`rope_parameters`, or `rope_theta` + `rope_scaling` with
// `rope_type` or `type`), and fields left out of the file take transformers' defaults for the
// architecture. kFailedPrecondition naming the supported set for another architecture or RoPE
// type; kInvalidArgument naming the field for a missing or inconsistent value.
absl::StatusOr<ModelConfig> ParseModelConfig(const codec::ModelDirectory& dir);

// OK when every id is in [0, vocab_size); else kInvalidArgument naming the first that is not and
// its position. Token ids are checked where they enter: a daemon request's in PrepareGenerate, in
// every prompt form (the error its client sees), and every other caller's in Backend::Forward, the
// one way into the embedding table, which an id past its end would read out of bounds. Inside a
// backend they are only DF11_DCHECKed.
absl::Status CheckTokenIds(std::span<const int32_t> ids, int64_t vocab_size);
// The same from the files' text (an empty generation text: none); kInvalidArgument for text that
// is not a JSON object.
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& config_json,
                                             const std::string& generation_config_json);

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_ENGINE_MODEL_CONFIG_H_
