// The model facts the engine needs, read from config.json and generation_config.json of a Hugging
// Face (or DF11) model directory: Llama, Qwen2 and Qwen3 causal LMs.
#ifndef DF11_DAEMON_RUNTIME_MODEL_CONFIG_H_
#define DF11_DAEMON_RUNTIME_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace df11::runtime {

enum class Architecture { kLlama, kQwen2, kQwen3 };

struct RopeConfig {
  enum class Type { kDefault, kLinear, kLlama3 };
  Type type = Type::kDefault;
  double theta = 10000.0;
  double factor = 1.0;              // linear, llama3
  double low_freq_factor = 1.0;     // llama3
  double high_freq_factor = 4.0;    // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string architecture_name;  // "Qwen3ForCausalLM"
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
  RopeConfig rope;
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;  // union of config.json's and generation_config.json's
  // generation_config.json sampling defaults (transformers' defaults when absent).
  bool do_sample = false;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  double repetition_penalty = 1.0;
};

// Parses config.json (and generation_config.json when not empty). Accepts both RoPE spellings
// (`rope_parameters`, or `rope_theta` + `rope_scaling` with `rope_type` or `type`).
// kFailedPrecondition naming the supported set for another architecture or RoPE type;
// kInvalidArgument naming the field for a missing or inconsistent value.
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& config_json,
                                             const std::string& generation_config_json);

// Reads <dir>/config.json and, if present, <dir>/generation_config.json.
absl::StatusOr<ModelConfig> ReadModelConfig(const std::string& dir);

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_MODEL_CONFIG_H_
