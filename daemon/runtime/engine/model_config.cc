#include "daemon/runtime/engine/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codec/architecture.h"
#include "codec/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace df11::runtime {
namespace {

using Json = nlohmann::ordered_json;

absl::StatusOr<int64_t> PositiveInt(const Json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() <= 0 ||
      it->get<int64_t>() > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: `", field, "` must be a positive integer"));
  }
  return it->get<int64_t>();
}

double NumberOr(const Json& j, const char* field, double fallback) {
  auto it = j.find(field);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// A count given as a JSON number (an int, or a float such as 4096.0), `fallback` when absent;
// kInvalidArgument naming the field outside [0, 2^40], so that casting it is defined.
absl::StatusOr<int64_t> CountOr(const Json& j, const char* field, int64_t fallback,
                                const char* file = "config.json") {
  const double v = NumberOr(j, field, static_cast<double>(fallback));
  if (!(v >= 0 && v <= static_cast<double>(int64_t{1} << 40))) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": `", field, "` must be a number from 0 to 2^40"));
  }
  return static_cast<int64_t>(v);
}

bool BoolOr(const Json& j, const char* field, bool fallback) {
  auto it = j.find(field);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// An int or a list of ints (eos_token_id).
void AddIds(const Json& j, const char* field, std::vector<int32_t>& ids) {
  auto it = j.find(field);
  if (it == j.end()) return;
  auto add = [&ids](const Json& v) {
    if (!v.is_number_integer()) return;
    const int32_t id = v.get<int32_t>();
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  if (it->is_array()) {
    for (const Json& v : *it) add(v);
  } else {
    add(*it);
  }
}

// One RoPE from `params` (a rope_parameters or rope_scaling object, possibly empty), with
// `config`'s top-level fields as the fallbacks transformers uses.
absl::Status ParseRopeParameters(const Json& params, const Json& config, double default_theta,
                                 int64_t rotary_dim, RopeConfig& rope) {
  rope.theta = NumberOr(params, "rope_theta", NumberOr(config, "rope_theta", default_theta));
  std::string type = "default";
  if (params.contains("rope_type") && params["rope_type"].is_string()) {
    type = params["rope_type"].get<std::string>();
  } else if (params.contains("type") && params["type"].is_string()) {
    type = params["type"].get<std::string>();
  }
  if (type == "su") type = "longrope";  // Phi-3's early name
  DF11_ASSIGN_OR_RETURN(const int64_t max_positions,
                        CountOr(config, "max_position_embeddings", 8192));
  DF11_ASSIGN_OR_RETURN(const int64_t top_original,
                        CountOr(config, "original_max_position_embeddings", max_positions));
  DF11_ASSIGN_OR_RETURN(const int64_t original,
                        CountOr(params, "original_max_position_embeddings", top_original));
  if (type == "default") {
    rope.type = RopeConfig::Type::kDefault;
  } else if (type == "linear") {
    rope.type = RopeConfig::Type::kLinear;
    rope.factor = NumberOr(params, "factor", 1.0);
  } else if (type == "llama3") {
    rope.type = RopeConfig::Type::kLlama3;
    rope.factor = NumberOr(params, "factor", 8.0);
    rope.low_freq_factor = NumberOr(params, "low_freq_factor", 1.0);
    rope.high_freq_factor = NumberOr(params, "high_freq_factor", 4.0);
    rope.original_max_position_embeddings = original;
    if (rope.high_freq_factor <= rope.low_freq_factor) {
      return absl::InvalidArgumentError(
          "config.json: llama3 rope scaling needs high_freq_factor > low_freq_factor");
    }
  } else if (type == "longrope") {
    rope.type = RopeConfig::Type::kLongRope;
    rope.original_max_position_embeddings = original;
    rope.factor = NumberOr(params, "factor",
                           static_cast<double>(max_positions) / std::max<int64_t>(1, original));
    for (auto [field, out] : {std::pair{"short_factor", &rope.short_factor},
                              std::pair{"long_factor", &rope.long_factor}}) {
      auto it = params.find(field);
      if (it == params.end() || !it->is_array() ||
          it->size() != static_cast<size_t>(rotary_dim / 2)) {
        return absl::InvalidArgumentError(absl::StrCat("config.json: longrope `", field,
                                                       "` must list ", rotary_dim / 2, " numbers"));
      }
      for (const Json& v : *it) {
        if (!v.is_number() || v.get<double>() <= 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("config.json: longrope `", field, "` must hold positive numbers"));
        }
        out->push_back(v.get<double>());
      }
    }
    // As transformers: sqrt(1 + ln(factor) / ln(original context)) unless the file gives it.
    rope.attention_factor = NumberOr(
        params, "attention_factor",
        rope.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(rope.factor) / std::log(original)));
  } else {
    return absl::FailedPreconditionError(
        absl::StrCat("config.json: rope type `", type,
                     "` is not supported; supported: default, linear, llama3, longrope"));
  }
  if (rope.theta <= 0 || rope.factor <= 0 || original <= 1) {
    return absl::InvalidArgumentError(
        "config.json: rope theta, factor and original_max_position_embeddings must be positive");
  }
  return absl::OkStatus();
}

// transformers v5 writes `rope_parameters` (theta included); v4 writes `rope_theta` and an
// optional `rope_scaling`.
const Json& RopeObject(const Json& config) {
  static const Json* const kEmpty = new Json(Json::object());
  for (const char* field : {"rope_parameters", "rope_scaling"}) {
    auto it = config.find(field);
    if (it != config.end() && it->is_object()) return *it;
  }
  return *kEmpty;
}

// Gemma 3: a RoPE for full-attention layers and one for sliding-window layers; v5 keys
// `rope_parameters` by layer type, v4 gives the local base as `rope_local_base_freq`.
absl::Status ParseGemma3Ropes(const Json& config, ModelConfig& c) {
  const Json& rope = RopeObject(config);
  if (rope.contains("full_attention") || rope.contains("sliding_attention")) {
    const Json empty = Json::object();
    const Json& full = rope.contains("full_attention") ? rope["full_attention"] : empty;
    const Json& local = rope.contains("sliding_attention") ? rope["sliding_attention"] : empty;
    DF11_RETURN_IF_ERROR(ParseRopeParameters(full, empty, 1e6, c.rotary_dim, c.rope));
    return ParseRopeParameters(local, empty, 1e4, c.rotary_dim, c.sliding_rope);
  }
  DF11_RETURN_IF_ERROR(ParseRopeParameters(rope, config, 1e6, c.rotary_dim, c.rope));
  c.sliding_rope = RopeConfig();
  c.sliding_rope.theta = NumberOr(config, "rope_local_base_freq", 1e4);
  return absl::OkStatus();
}

// The attention layers' windows: `layer_types` when given, else every `sliding_window_pattern`-th
// layer full (Gemma); every layer windowed when `sliding_window` is set (Mistral, Phi-3).
absl::Status ParseSlidingWindows(const Json& config, ModelConfig& c) {
  c.sliding_window.assign(c.num_layers, 0);
  auto window = config.find("sliding_window");
  if (window == config.end() || window->is_null()) return absl::OkStatus();
  DF11_ASSIGN_OR_RETURN(const int64_t w, PositiveInt(config, "sliding_window"));
  if (c.architecture != Architecture::kGemma2 && c.architecture != Architecture::kGemma3) {
    c.sliding_window.assign(c.num_layers, w);
    return absl::OkStatus();
  }
  auto types = config.find("layer_types");
  if (types != config.end() && !types->is_null()) {
    if (!types->is_array() || types->size() != static_cast<size_t>(c.num_layers)) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json: `layer_types` must list the ", c.num_layers, " layers"));
    }
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const Json& t = (*types)[i];
      if (t == "sliding_attention") {
        c.sliding_window[i] = w;
      } else if (t != "full_attention") {
        return absl::FailedPreconditionError(
            absl::StrCat("config.json: layer type ", t.dump(),
                         " is not supported; supported: full_attention, sliding_attention"));
      }
    }
    return absl::OkStatus();
  }
  DF11_ASSIGN_OR_RETURN(const int64_t pattern, CountOr(config, "sliding_window_pattern", 6));
  if (pattern < 1) {
    return absl::InvalidArgumentError("config.json: `sliding_window_pattern` must be positive");
  }
  for (int64_t i = 0; i < c.num_layers; ++i) c.sliding_window[i] = (i + 1) % pattern ? w : 0;
  return absl::OkStatus();
}

// ParseModelConfig of the parsed files (`generation` an empty object when there is none).
absl::StatusOr<ModelConfig> FromJson(const Json& top, const Json& generation) {
  ModelConfig c;
  DF11_ASSIGN_OR_RETURN(c.architecture_name, codec::ModelClass(top));
  DF11_ASSIGN_OR_RETURN(c.architecture, codec::FindArchitecture(c.architecture_name));
  const bool gemma =
      c.architecture == Architecture::kGemma2 || c.architecture == Architecture::kGemma3;
  c.text_tower_only = c.architecture_name == "Gemma3ForConditionalGeneration";
  DF11_ASSIGN_OR_RETURN(Json config, codec::TextModelConfig(top, c.architecture_name));
  DF11_ASSIGN_OR_RETURN(c.hidden_size, PositiveInt(config, "hidden_size"));
  DF11_ASSIGN_OR_RETURN(c.intermediate_size, PositiveInt(config, "intermediate_size"));
  DF11_ASSIGN_OR_RETURN(c.num_layers, PositiveInt(config, "num_hidden_layers"));
  DF11_ASSIGN_OR_RETURN(c.num_heads, PositiveInt(config, "num_attention_heads"));
  DF11_ASSIGN_OR_RETURN(c.vocab_size, PositiveInt(config, "vocab_size"));
  c.num_kv_heads = c.num_heads;
  if (config.contains("num_key_value_heads") && !config["num_key_value_heads"].is_null()) {
    DF11_ASSIGN_OR_RETURN(c.num_kv_heads, PositiveInt(config, "num_key_value_heads"));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: num_attention_heads ", c.num_heads,
                                                   " is not a multiple of num_key_value_heads ",
                                                   c.num_kv_heads));
  }
  if (config.contains("head_dim") && !config["head_dim"].is_null()) {
    DF11_ASSIGN_OR_RETURN(c.head_dim, PositiveInt(config, "head_dim"));
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      return absl::InvalidArgumentError("config.json: hidden_size is not a multiple of the heads");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) return absl::InvalidArgumentError("config.json: head_dim must be even");
  DF11_ASSIGN_OR_RETURN(c.max_position_embeddings,
                        CountOr(config, "max_position_embeddings", 4096));
  c.rms_norm_eps =
      NumberOr(config, "rms_norm_eps", c.architecture == Architecture::kPhi3 ? 1e-5 : 1e-6);
  c.tie_word_embeddings = BoolOr(config, "tie_word_embeddings", gemma);
  c.attention_bias =
      c.architecture == Architecture::kQwen2 ||
      (c.architecture != Architecture::kPhi3 && BoolOr(config, "attention_bias", false));
  c.mlp_bias = c.architecture == Architecture::kLlama && BoolOr(config, "mlp_bias", false);
  c.fused_projections = c.architecture == Architecture::kPhi3;
  c.output_norms = gemma;
  c.norm_weight_offset = gemma ? 1.0f : 0.0f;
  const char* act_field = gemma ? "hidden_activation" : "hidden_act";
  const std::string act = config.contains(act_field) && config[act_field].is_string()
                              ? config[act_field].get<std::string>()
                              : (gemma ? "gelu_pytorch_tanh" : "silu");
  if (act == "silu") {
    c.activation = Activation::kSilu;
  } else if (act == "gelu_pytorch_tanh") {
    c.activation = Activation::kGeluTanh;
  } else {
    return absl::FailedPreconditionError(absl::StrCat("config.json: `", act_field, "` \"", act,
                                                      "\" is not supported; supported: silu",
                                                      gemma ? ", gelu_pytorch_tanh" : ""));
  }
  if (gemma) {
    c.embedding_scale = static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size)));
    DF11_ASSIGN_OR_RETURN(const int64_t scalar, PositiveInt(config, "query_pre_attn_scalar"));
    c.attention_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(scalar)));
    if (BoolOr(config, "use_bidirectional_attention", false)) {
      return absl::FailedPreconditionError(
          "config.json: `use_bidirectional_attention` true (an embedding model) is not supported");
    }
  } else {
    c.attention_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  }
  // transformers' Gemma 3 reads `attn_logit_softcapping` but never applies it; so neither does
  // this engine (the released Gemma 3 configs set it null).
  for (auto [field, out] : {std::pair{"attn_logit_softcapping", &c.attention_softcap},
                            std::pair{"final_logit_softcapping", &c.final_logit_softcap}}) {
    if (!config.contains(field) || config[field].is_null()) continue;
    if (c.architecture == Architecture::kGemma3 && out == &c.attention_softcap) continue;
    if (!gemma) {
      return absl::FailedPreconditionError(
          absl::StrCat("config.json: `", field, "` is not supported for ", c.architecture_name));
    }
    if (!config[field].is_number() || config[field].get<double>() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json: `", field, "` must be a positive number"));
    }
    *out = config[field].get<float>();
  }
  // Partial rotary embeddings (Phi-4-mini): the factor is in rope_parameters (v5) or top-level.
  const double partial = NumberOr(RopeObject(config), "partial_rotary_factor",
                                  NumberOr(config, "partial_rotary_factor", 1.0));
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  if (partial <= 0 || partial > 1 || c.rotary_dim < 2 || c.rotary_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: partial_rotary_factor ", partial,
                                                   " gives ", c.rotary_dim,
                                                   " rotary dimensions; they must be even"));
  }
  if (c.architecture == Architecture::kGemma3) {
    DF11_RETURN_IF_ERROR(ParseGemma3Ropes(config, c));
  } else {
    DF11_RETURN_IF_ERROR(
        ParseRopeParameters(RopeObject(config), config, 10000.0, c.rotary_dim, c.rope));
    c.sliding_rope = c.rope;
  }
  if ((c.architecture == Architecture::kQwen2 || c.architecture == Architecture::kQwen3) &&
      BoolOr(config, "use_sliding_window", false)) {
    return absl::FailedPreconditionError(
        "config.json: `use_sliding_window` true is not supported for Qwen2 and Qwen3");
  }
  if (c.architecture == Architecture::kMistral && !config.contains("sliding_window")) {
    config["sliding_window"] = 4096;  // MistralConfig's default
  }
  if (c.architecture == Architecture::kMistral || c.architecture == Architecture::kPhi3 || gemma) {
    DF11_RETURN_IF_ERROR(ParseSlidingWindows(config, c));
  } else {
    c.sliding_window.assign(c.num_layers, 0);
  }
  for (const Json* j : std::initializer_list<const Json*>{&config, &top}) {
    if (j->contains("bos_token_id") && (*j)["bos_token_id"].is_number_integer()) {
      c.bos_token_id = (*j)["bos_token_id"].get<int32_t>();
    }
    AddIds(*j, "eos_token_id", c.eos_token_ids);
  }
  {
    const Json& g = generation;
    AddIds(g, "eos_token_id", c.eos_token_ids);
    if (g.contains("bos_token_id") && g["bos_token_id"].is_number_integer()) {
      c.bos_token_id = g["bos_token_id"].get<int32_t>();
    }
    c.do_sample = BoolOr(g, "do_sample", false);
    c.temperature = NumberOr(g, "temperature", 1.0);
    c.top_p = NumberOr(g, "top_p", 1.0);
    DF11_ASSIGN_OR_RETURN(c.top_k, CountOr(g, "top_k", 0, "generation_config.json"));
    c.repetition_penalty = NumberOr(g, "repetition_penalty", 1.0);
  }
  return c;
}

}  // namespace

absl::Status CheckTokenIds(std::span<const int32_t> ids, int64_t vocab_size) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", ids[i], " (at position ", i,
                                                     ") is outside the vocabulary of ",
                                                     vocab_size));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseModelConfig(const codec::ModelDirectory& dir) {
  return FromJson(dir.config(), dir.generation_config());
}

absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& config_json,
                                             const std::string& generation_config_json) {
  const Json config = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return absl::InvalidArgumentError("config.json is not a JSON object");
  Json generation = Json::object();
  if (!generation_config_json.empty()) {
    generation = Json::parse(generation_config_json, nullptr, /*allow_exceptions=*/false);
    if (!generation.is_object()) {
      return absl::InvalidArgumentError("generation_config.json is not a JSON object");
    }
  }
  return FromJson(config, generation);
}

}  // namespace df11::runtime
