#include "codec/architecture.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace df11::codec {
namespace {

absl::StatusOr<int64_t> PositiveInt(const nlohmann::ordered_json& config, const char* field) {
  auto it = config.find(field);
  // Bounded so that products of sizes (heads x head_dim x hidden) cannot overflow.
  constexpr int64_t kMax = int64_t{1} << 24;
  if (it == config.end() || !it->is_number_integer() || it->get<int64_t>() <= 0 ||
      it->get<int64_t>() > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: `", field, "` must be a positive integer of at most ", kMax));
  }
  return it->get<int64_t>();
}

}  // namespace

const std::vector<SupportedArchitecture>& SupportedArchitectures() {
  static const auto* kSupported = new std::vector<SupportedArchitecture>{
      {"LlamaForCausalLM", Architecture::kLlama},
      {"MistralForCausalLM", Architecture::kMistral},
      {"Qwen2ForCausalLM", Architecture::kQwen2},
      {"Qwen3ForCausalLM", Architecture::kQwen3},
      {"Gemma2ForCausalLM", Architecture::kGemma2},
      {"Gemma3ForCausalLM", Architecture::kGemma3},
      {"Gemma3ForConditionalGeneration", Architecture::kGemma3},
      {"Phi3ForCausalLM", Architecture::kPhi3}};
  return *kSupported;
}

absl::StatusOr<Architecture> FindArchitecture(const std::string& model_class) {
  std::vector<std::string> names;
  for (const SupportedArchitecture& a : SupportedArchitectures()) {
    if (model_class == a.model_class) return a.family;
    names.push_back(a.model_class);
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "architecture ", model_class, " is not supported; supported: ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<std::string> ModelClass(const nlohmann::ordered_json& config) {
  auto archs = config.find("architectures");
  if (archs == config.end() || !archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
    return absl::InvalidArgumentError("config.json: `architectures` must name the model class");
  }
  return (*archs)[0].get<std::string>();
}

absl::StatusOr<nlohmann::ordered_json> TextModelConfig(const nlohmann::ordered_json& config,
                                               const std::string& architecture) {
  using Json = nlohmann::ordered_json;
  Json text = Json::object();
  if (architecture.starts_with("Gemma")) {
    // Gemma2Config's and Gemma3TextConfig's defaults: the released multimodal configs leave most
    // of them out.
    text = Json{{"hidden_size", 2304},
                {"intermediate_size", 9216},
                {"num_hidden_layers", 26},
                {"num_attention_heads", 8},
                {"num_key_value_heads", 4},
                {"head_dim", 256},
                {"hidden_activation", "gelu_pytorch_tanh"},
                {"rms_norm_eps", 1e-6},
                {"bos_token_id", 2},
                {"eos_token_id", 1},
                {"tie_word_embeddings", true},
                {"query_pre_attn_scalar", 256},
                {"sliding_window", 4096}};
    if (architecture == "Gemma2ForCausalLM") {
      text.update(Json{{"vocab_size", 256000},
                       {"max_position_embeddings", 8192},
                       {"sliding_window_pattern", 2},
                       {"attn_logit_softcapping", 50.0},
                       {"final_logit_softcapping", 30.0}});
    } else {
      text.update(Json{{"vocab_size", 262208},
                       {"max_position_embeddings", 131072},
                       {"sliding_window_pattern", 6}});
    }
  }
  if (architecture == "Gemma3ForConditionalGeneration") {
    auto tower = config.find("text_config");
    if (tower == config.end() || !tower->is_object()) {
      return absl::InvalidArgumentError(
          "config.json: Gemma3ForConditionalGeneration needs a `text_config` object");
    }
    text.update(*tower);
  } else {
    text.update(config);
  }
  return text;
}

absl::StatusOr<ArchitectureInfo> ParseArchitecture(const nlohmann::ordered_json& top) {
  ArchitectureInfo arch;
  absl::StatusOr<std::string> model_class = ModelClass(top);
  if (!model_class.ok()) return model_class.status();
  arch.architecture = *std::move(model_class);
  if (absl::Status s = FindArchitecture(arch.architecture).status(); !s.ok()) return s;
  absl::StatusOr<nlohmann::ordered_json> text = TextModelConfig(top, arch.architecture);
  if (!text.ok()) return text.status();
  const nlohmann::ordered_json& config = *text;
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
  // transformers' configs default to untied embeddings, except Gemma's.
  arch.tie_word_embeddings = tie != config.end() && tie->is_boolean() && tie->get<bool>();
  return arch;
}

bool IsFusedArchitecture(const ArchitectureInfo& arch) {
  return arch.architecture == "Phi3ForCausalLM";
}

PatternDict DefaultPatternDict(const ArchitectureInfo& arch) {
  // The official Gemma 3 releases (gemma-3-{4b,12b,27b}-it-DF11) compress the text layers only,
  // with this key verbatim; the multimodal checkpoints name the text tower language_model.model.
  if (arch.architecture == "Gemma3ForConditionalGeneration") {
    return {{absl::StrCat(arch.text_tower_prefix, R"(layers.\d+)"),
             {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
              "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}}};
  }
  PatternDict dict;
  if (!arch.tie_word_embeddings) {
    dict.push_back({"lm_head", {}});
    dict.push_back({R"(model\.embed_tokens)", {}});
  }
  if (IsFusedArchitecture(arch)) {
    // As Phi-4-reasoning-plus-DF11: o_proj first, and the keys' dots unescaped.
    if (!arch.tie_word_embeddings) dict[1].first = "model.embed_tokens";
    dict.push_back(
        {R"(model.layers.\d+)",
         {"self_attn.o_proj", "self_attn.qkv_proj", "mlp.gate_up_proj", "mlp.down_proj"}});
    return dict;
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
      {"self_attn.qkv_proj.weight", q + 2 * kv, a.hidden_size},  // Phi-3
      {"mlp.gate_up_proj.weight", 2 * a.intermediate_size, a.hidden_size},
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
