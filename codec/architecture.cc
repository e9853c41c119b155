#include "codec/architecture.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace df11::codec {
namespace {

absl::StatusOr<int64_t> PositiveInt(const nlohmann::json& config, const char* field) {
  auto it = config.find(field);
  // Bounded so that products of sizes (heads x head_dim x hidden) cannot overflow.
  constexpr int64_t kMax = int64_t{1} << 24;
  if (it == config.end() || !it->is_number_integer() || it->get<int64_t>() <= 0 ||
      it->get<int64_t>() > kMax) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: `", field, "` must be a positive integer of at most ", kMax));
  }
  return it->get<int64_t>();
}

}  // namespace

const std::vector<std::string>& SupportedArchitectures() {
  static const auto* kSupported = new std::vector<std::string>{
      "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"};
  return *kSupported;
}

absl::StatusOr<ArchitectureInfo> ParseArchitecture(const std::string& config_json) {
  nlohmann::json config = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return absl::InvalidArgumentError("config.json is not a JSON object");
  ArchitectureInfo arch;
  auto archs = config.find("architectures");
  if (archs == config.end() || !archs->is_array() || archs->empty() ||
      !(*archs)[0].is_string()) {
    return absl::InvalidArgumentError("config.json: `architectures` must list the model class");
  }
  arch.architecture = (*archs)[0].get<std::string>();
  const auto& supported = SupportedArchitectures();
  if (std::find(supported.begin(), supported.end(), arch.architecture) == supported.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "architecture ", arch.architecture, " is not supported; supported: ",
        absl::StrJoin(supported, ", "), " (or give a pattern dict with --pattern-dict)"));
  }
  struct Field {
    const char* name;
    int64_t* value;
  };
  for (Field f : {Field{"hidden_size", &arch.hidden_size},
                  Field{"intermediate_size", &arch.intermediate_size},
                  Field{"num_attention_heads", &arch.num_attention_heads},
                  Field{"vocab_size", &arch.vocab_size}}) {
    absl::StatusOr<int64_t> v = PositiveInt(config, f.name);
    if (!v.ok()) return v.status();
    *f.value = *v;
  }
  arch.num_key_value_heads = arch.num_attention_heads;
  if (config.contains("num_key_value_heads") && !config["num_key_value_heads"].is_null()) {
    absl::StatusOr<int64_t> v = PositiveInt(config, "num_key_value_heads");
    if (!v.ok()) return v.status();
    arch.num_key_value_heads = *v;
  }
  // Qwen3 sets head_dim independently of hidden_size / heads; others derive it.
  if (config.contains("head_dim") && !config["head_dim"].is_null()) {
    absl::StatusOr<int64_t> v = PositiveInt(config, "head_dim");
    if (!v.ok()) return v.status();
    arch.head_dim = *v;
  } else {
    if (arch.hidden_size % arch.num_attention_heads != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config.json: hidden_size ", arch.hidden_size, " is not a multiple of ",
          "num_attention_heads ", arch.num_attention_heads, " and no head_dim is given"));
    }
    arch.head_dim = arch.hidden_size / arch.num_attention_heads;
  }
  auto tie = config.find("tie_word_embeddings");
  // transformers' LlamaConfig, Qwen2Config and Qwen3Config default to untied embeddings.
  arch.tie_word_embeddings = tie != config.end() && tie->is_boolean() && tie->get<bool>();
  return arch;
}

PatternDict DefaultPatternDict(const ArchitectureInfo& arch) {
  PatternDict dict;
  if (!arch.tie_word_embeddings) {
    dict.push_back({"lm_head", {}});
    dict.push_back({R"(model\.embed_tokens)", {}});
  }
  dict.push_back({R"(model\.layers\.\d+)",
                  {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                   "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}});
  return dict;
}

std::optional<std::vector<int64_t>> WeightShape(const ArchitectureInfo& a,
                                                const std::string& name) {
  const int64_t q = a.num_attention_heads * a.head_dim;
  const int64_t kv = a.num_key_value_heads * a.head_dim;
  struct Known {
    const char* suffix;
    int64_t out, in;
  };
  const Known known[] = {
      {"self_attn.q_proj.weight", q, a.hidden_size},
      {"self_attn.k_proj.weight", kv, a.hidden_size},
      {"self_attn.v_proj.weight", kv, a.hidden_size},
      {"self_attn.o_proj.weight", a.hidden_size, q},
      {"mlp.gate_proj.weight", a.intermediate_size, a.hidden_size},
      {"mlp.up_proj.weight", a.intermediate_size, a.hidden_size},
      {"mlp.down_proj.weight", a.hidden_size, a.intermediate_size},
      {"embed_tokens.weight", a.vocab_size, a.hidden_size},
      {"lm_head.weight", a.vocab_size, a.hidden_size},
  };
  for (const Known& k : known) {
    if (name == k.suffix || absl::EndsWith(name, absl::StrCat(".", k.suffix))) {
      return std::vector<int64_t>{k.out, k.in};
    }
  }
  return std::nullopt;
}

}  // namespace df11::codec
