// What the codec knows of Hugging Face model architectures: the DF11 units the official releases
// use for Llama, Mistral, Qwen2, Qwen3, Gemma 2 and 3 and Phi-3 / Phi-4, and the shape of every
// weight inside those units.
#ifndef DF11_CODEC_ARCHITECTURE_H_
#define DF11_CODEC_ARCHITECTURE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace df11::codec {

// DF11's pattern_dict, in order: a full-match regex over module paths -> the attribute paths whose
// `.weight` tensors, concatenated in that order, form the unit (empty: the module's own weight).
using PatternDict = std::vector<std::pair<std::string, std::vector<std::string>>>;

// The architecture families df11 serves; a family differs from Llama only by the fields of the
// engine's ModelConfig.
enum class Architecture { kLlama, kMistral, kQwen2, kQwen3, kGemma2, kGemma3, kPhi3 };

// The model classes config.json may name (`architectures[0]`), with their families: the one
// table of supported architectures.
struct SupportedArchitecture {
  const char* model_class;  // "Qwen3ForCausalLM"
  Architecture family;
};
const std::vector<SupportedArchitecture>& SupportedArchitectures();

// The family of `model_class`. kFailedPrecondition naming the supported classes otherwise.
absl::StatusOr<Architecture> FindArchitecture(const std::string& model_class);

// config.json's `architectures[0]`. kInvalidArgument when it does not name one.
absl::StatusOr<std::string> ModelClass(const nlohmann::ordered_json& config);

// Architecture facts read from config.json.
struct ArchitectureInfo {
  std::string architecture;  // "Qwen3ForCausalLM"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  bool tie_word_embeddings = false;
  // Gemma3ForConditionalGeneration: the module path of the text tower's decoder, as the
  // checkpoint names it ("language_model.model." up to transformers 4.51, as the official
  // releases; "model.language_model." in transformers' modules since).
  std::string text_tower_prefix = "language_model.model.";
};

// The text model's config.json fields for `architecture`: a multimodal checkpoint's
// `text_config`, else the file's own, over transformers' defaults for the architecture (Gemma's
// released configs leave many out). kInvalidArgument when a Gemma3ForConditionalGeneration has
// no `text_config` object.
absl::StatusOr<nlohmann::ordered_json> TextModelConfig(const nlohmann::ordered_json& config,
                                                       const std::string& architecture);

// The architecture facts of config.json. kInvalidArgument naming the field when a needed field is
// missing or not a positive integer; kFailedPrecondition when the architecture is not supported
// (the message lists those that are).
absl::StatusOr<ArchitectureInfo> ParseArchitecture(const nlohmann::ordered_json& config);

// The official releases' pattern_dict: each decoder layer's q, k, v, o, gate, up, down as one unit
// (Phi-3: o, qkv, gate_up, down), plus lm_head and model.embed_tokens as units of their own,
// except for tied embeddings, where the shared matrix stays BF16 (as DFloat11/Qwen3-4B-DF11
// ships). Gemma3ForConditionalGeneration: the text tower's layers only, as the gemma-3-*-it-DF11
// releases.
PatternDict DefaultPatternDict(const ArchitectureInfo& arch);

// True for architectures that store q/k/v and gate/up as one tensor each (Phi-3).
bool IsFusedArchitecture(const ArchitectureInfo& arch);

// Shape (out_features, in_features) of `<module>.<attr>.weight` (attr empty: `<module>.weight`),
// by the last components of the name; nullopt when the name is not one of the architecture's
// linear or embedding weights.
std::optional<std::vector<int64_t>> WeightShape(const ArchitectureInfo& arch,
                                                const std::string& weight_name);

}  // namespace df11::codec

#endif  // DF11_CODEC_ARCHITECTURE_H_
