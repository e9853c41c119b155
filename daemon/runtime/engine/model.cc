#include "daemon/runtime/engine/model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codec/base/check.h"
#include "codec/base/status_macros.h"
#include "codec/decoder.h"
#include "nlohmann/json.hpp"

namespace df11::runtime {
namespace {

std::string ShapeText(std::span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::vector<std::vector<int64_t>> LayerTensorShapes(const ModelConfig& c) {
  const int64_t h = c.hidden_size, m = c.intermediate_size, d = c.head_dim;
  const int64_t q = c.num_heads * d, kv = c.num_kv_heads * d;
  return {{q, h}, {kv, h}, {kv, h}, {h, q}, {m, h}, {m, h}, {h, m}, {h}, {h}, {d},
          {d},    {q},     {kv},    {kv},   {h},    {m},    {m},    {h}, {h}, {h}};
}

// The row ranges, as (name, rows), into which a stored fused tensor is split: q, k, v of
// qkv_proj and gate, up of gate_up_proj (Phi-3). Empty for any other tensor.
std::vector<std::pair<std::string, int64_t>> FusedPieces(const ModelConfig& c,
                                                         std::string_view name) {
  if (!c.fused_projections) return {};
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  auto base = [&](std::string_view suffix) {
    return std::string(name.substr(0, name.size() - suffix.size()));
  };
  if (name.ends_with("self_attn.qkv_proj.weight")) {
    const std::string p = base("qkv_proj.weight");
    return {{p + "q_proj.weight", q}, {p + "k_proj.weight", kv}, {p + "v_proj.weight", kv}};
  }
  if (name.ends_with("mlp.gate_up_proj.weight")) {
    const std::string p = base("gate_up_proj.weight");
    return {{p + "gate_proj.weight", c.intermediate_size},
            {p + "up_proj.weight", c.intermediate_size}};
  }
  return {};
}

// The stored fused tensor, with its shape, that LayerTensorNames' name k of layer i is a piece of;
// empty when it is stored itself.
std::pair<std::string, std::vector<int64_t>> FusedTensor(const ModelConfig& c, int64_t i,
                                                         size_t k) {
  if (!c.fused_projections || k == 3 || k > 5) return {};
  const std::string p = absl::StrCat(c.tensor_prefix, "layers.", i, ".");
  const int64_t h = c.hidden_size;
  if (k < 3) {
    return {p + "self_attn.qkv_proj.weight", {(c.num_heads + 2 * c.num_kv_heads) * c.head_dim, h}};
  }
  return {p + "mlp.gate_up_proj.weight", {2 * c.intermediate_size, h}};
}

}  // namespace

namespace {

// The regions of a unit's tensors for codec::InterleavedUnit: rows are the first dimension (a
// vector or a scalar is one row); a fused tensor is one region per piece (FusedPieces), so that
// each piece is a matrix of its own.
std::vector<codec::InterleavedUnit::Region> UnitRegions(const ModelConfig& c,
                                                        const codec::Df11Model::UnitEntry& u) {
  std::vector<codec::InterleavedUnit::Region> regions;
  size_t first = 0;
  for (size_t i = 0; i < u.shapes.size(); ++i) {
    const std::vector<int64_t>& shape = u.shapes[i];
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    codec::InterleavedUnit::Region r{
        .first = first, .rows = elements > 0 ? 1 : 0, .row_length = std::max<int64_t>(1, elements)};
    if (shape.size() >= 2 && shape[0] > 0) {
      r.rows = shape[0];
      r.row_length = elements / shape[0];
    }
    const auto pieces = FusedPieces(c, u.weight_names[i]);
    int64_t piece_rows = 0;
    for (const auto& [name, rows] : pieces) piece_rows += rows;
    if (pieces.empty() || shape.size() != 2 || piece_rows != r.rows) {
      regions.push_back(r);
    } else {
      for (const auto& [name, rows] : pieces) {
        regions.push_back({.first = first, .rows = rows, .row_length = r.row_length});
        first += static_cast<size_t>(rows * r.row_length);
      }
      continue;
    }
    first += static_cast<size_t>(elements);
  }
  return regions;
}

// Drops the whole pages of a mapped file range from this process (they stay in the page cache):
// the official bitstream of a unit that was re-encoded is not read again.
void ReleasePages(std::span<const uint8_t> bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGE_SIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(bytes.data()) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size()) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace

std::vector<std::string> LayerTensorNames(const ModelConfig& c, int64_t i) {
  const std::string p = absl::StrCat(c.tensor_prefix, "layers.", i, ".");
  const bool qkv_bias = c.attention_bias;
  const bool o_bias = c.attention_bias && c.architecture != Architecture::kQwen2;
  const bool qk_norm =
      c.architecture == Architecture::kQwen3 || c.architecture == Architecture::kGemma3;
  auto maybe = [](bool present, std::string name) { return present ? name : std::string(); };
  // Gemma normalises the attention output with `post_attention_layernorm` and the MLP input
  // with `pre_feedforward_layernorm`; Llama's `post_attention_layernorm` is the MLP input's.
  const std::string mlp_norm =
      c.output_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight";
  return {p + "self_attn.q_proj.weight",
          p + "self_attn.k_proj.weight",
          p + "self_attn.v_proj.weight",
          p + "self_attn.o_proj.weight",
          p + "mlp.gate_proj.weight",
          p + "mlp.up_proj.weight",
          p + "mlp.down_proj.weight",
          p + "input_layernorm.weight",
          p + mlp_norm,
          maybe(qk_norm, p + "self_attn.q_norm.weight"),
          maybe(qk_norm, p + "self_attn.k_norm.weight"),
          maybe(qkv_bias, p + "self_attn.q_proj.bias"),
          maybe(qkv_bias, p + "self_attn.k_proj.bias"),
          maybe(qkv_bias, p + "self_attn.v_proj.bias"),
          maybe(o_bias, p + "self_attn.o_proj.bias"),
          maybe(c.mlp_bias, p + "mlp.gate_proj.bias"),
          maybe(c.mlp_bias, p + "mlp.up_proj.bias"),
          maybe(c.mlp_bias, p + "mlp.down_proj.bias"),
          maybe(c.output_norms, p + "post_attention_layernorm.weight"),
          maybe(c.output_norms, p + "post_feedforward_layernorm.weight")};
}

bool InTextModel(const ModelConfig& config, std::string_view name) {
  if (!config.text_tower_only) return true;
  return name.starts_with("language_model.") || name.starts_with("model.language_model.") ||
         name.starts_with("lm_head.");
}

std::string EmbeddingName(const ModelConfig& config) {
  return config.tensor_prefix + "embed_tokens.weight";
}

std::string LmHeadName(const ModelConfig& config) {
  return config.tie_word_embeddings ? EmbeddingName(config) : config.lm_head_name;
}

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& dir,
                                                   const LoadOptions& options) {
  DF11_ASSIGN_OR_RETURN(const codec::ModelDirectory directory, codec::ModelDirectory::Read(dir));
  return Load(directory, options);
}

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const codec::ModelDirectory& dir,
                                                   const LoadOptions& options) {
  std::unique_ptr<Model> model(new Model());
  model->directory_ = dir.path();
  DF11_ASSIGN_OR_RETURN(model->config_, ParseModelConfig(dir));
  const ModelConfig& c = model->config_;
  model->full_rotary_ = std::make_unique<RotaryEmbedding>(c.rope, c.rotary_dim);
  model->sliding_rotary_ = std::make_unique<RotaryEmbedding>(c.sliding_rope, c.rotary_dim);
  if (dir.is_df11()) {
    DF11_ASSIGN_OR_RETURN(codec::Df11Model m, codec::Df11Model::Open(dir));
    model->df11_ = std::make_unique<codec::Df11Model>(std::move(m));
  } else {
    DF11_ASSIGN_OR_RETURN(codec::Checkpoint c, codec::Checkpoint::Open(dir.path()));
    model->checkpoint_ = std::make_unique<codec::Checkpoint>(std::move(c));
  }
  DF11_RETURN_IF_ERROR(model->Index(options.interleave));
  return model;
}

absl::Status Model::Index(bool interleave) {
  const ModelConfig& c = config_;
  // Plain tensors (DF11 passthrough, or the whole checkpoint), BF16 only where the engine reads
  // them; copied when the mapping is not 2-byte aligned. Another tower of a multimodal checkpoint
  // is skipped.
  auto add_plain = [this, &c](const codec::TensorView* t) {
    if (!InTextModel(c, t->name)) {
      ++skipped_tensors_;
      skipped_bytes_ += t->data.size();
      return;
    }
    Source s;
    s.shape = t->shape;
    s.bytes = t->data;
    if (t->dtype == codec::DType::kBF16) {
      if (reinterpret_cast<uintptr_t>(t->data.data()) % 2 == 0) {
        s.data = reinterpret_cast<const uint16_t*>(t->data.data());
      } else {
        aligned_copies_.emplace_back(t->data.size() / 2);
        std::memcpy(aligned_copies_.back().data(), t->data.data(), t->data.size());
        s.data = aligned_copies_.back().data();
      }
    }
    plain_bytes_ += t->data.size();
    sources_[t->name] = std::move(s);
  };
  if (df11_ != nullptr) {
    // Re-encoding takes about as long as decoding the model twice; it runs on every core.
    std::unique_ptr<codec::ThreadPool> pool;
    if (interleave && codec::InterleavedUnit::Supported()) {
      pool = std::make_unique<codec::ThreadPool>(0);
    }
    for (const auto& u : df11_->units()) {
      const codec::UnitTensors& t = u.unit->tensors();
      // The unit as stored; a re-encoding is kept only when it is not larger, so that a model
      // never holds more than EstimateModel said (LLM weights: about 6 % less).
      const uint64_t stored = t.luts.size() + t.encoded_exponent.size() + t.sign_mantissa.size() +
                              t.output_positions.size() + t.gaps.size() +
                              t.split_positions.size() * sizeof(int64_t);
      if (!InTextModel(c, u.path)) {
        skipped_tensors_ += u.weight_names.size();
        skipped_bytes_ += stored;
        continue;
      }
      units_.push_back(&u);
      const codec::UnitDecoder& decoder = decoders_.try_emplace(&u, *u.unit).first->second;
      const codec::InterleavedUnit* interleaved = nullptr;
      if (pool != nullptr) {
        DF11_ASSIGN_OR_RETURN(
            codec::InterleavedUnit built,
            codec::InterleavedUnit::Build(decoder, UnitRegions(c, u), pool.get()));
        if (built.stored_bytes() + t.sign_mantissa.size() <= stored) {
          interleaved = &interleaved_.emplace(&u, std::move(built)).first->second;
          ReleasePages(t.encoded_exponent);
          ReleasePages(t.gaps);
        }
      }
      unit_bytes_ +=
          interleaved != nullptr ? interleaved->stored_bytes() + t.sign_mantissa.size() : stored;
      // Regions in UnitRegions' order: one per tensor, or one per piece of a fused tensor.
      size_t offset = 0, region = 0;
      for (size_t i = 0; i < u.weight_names.size(); ++i) {
        Source s;
        s.unit = &u;
        s.decoder = &decoder;
        s.offset = offset;
        s.interleaved = interleaved;
        s.region = region;
        s.shape = u.shapes[i];
        region += std::max<size_t>(1, FusedPieces(c, u.weight_names[i]).size());
        offset = i < u.split_positions->size() ? (*u.split_positions)[i] : u.unit->num_elements();
        sources_[u.weight_names[i]] = std::move(s);
      }
    }
    for (const codec::TensorView* t : df11_->passthrough()) add_plain(t);
  } else {
    for (const std::string& name : checkpoint_->TensorNames()) add_plain(checkpoint_->Find(name));
  }
  // A multimodal checkpoint's text tower is under one of two prefixes, by transformers version.
  if (c.text_tower_only) {
    for (const char* prefix : {"language_model.model.", "model.language_model."}) {
      if (sources_.contains(absl::StrCat(prefix, "embed_tokens.weight"))) {
        config_.tensor_prefix = prefix;
        config_.lm_head_name = absl::StartsWith(prefix, "language_model.")
                                   ? "language_model.lm_head.weight"
                                   : "lm_head.weight";
      }
    }
  }
  DF11_RETURN_IF_ERROR(AddFusedPieces());

  // Every tensor the architecture needs, with its shape; and the scratch each step needs.
  const std::vector<std::vector<int64_t>> shapes = LayerTensorShapes(c);
  auto units_elements = [this](std::span<const std::string> names) {
    std::set<const codec::Df11Model::UnitEntry*> units;
    for (const std::string& n : names) {
      auto it = sources_.find(n);
      if (!n.empty() && it != sources_.end() && it->second.unit != nullptr)
        units.insert(it->second.unit);
    }
    size_t total = 0;
    for (const auto* u : units) total += u->unit->num_elements();
    return total;
  };
  layer_sources_.clear();
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::vector<std::string> names = LayerTensorNames(c, i);
    std::array<const Source*, kLayerTensors>& found = layer_sources_.emplace_back();
    found.fill(nullptr);
    for (size_t k = 0; k < names.size(); ++k) {
      if (names[k].empty()) continue;
      if (auto [fused, shape] = FusedTensor(c, i, k); !fused.empty()) {
        DF11_RETURN_IF_ERROR(Find(fused, shape).status());
      }
      DF11_ASSIGN_OR_RETURN(found[k], Find(names[k], shapes[k]));
      if (shapes[k].size() == 1 && found[k]->unit != nullptr) vectors_in_units_ = true;
    }
    layer_scratch_elements_ = std::max(layer_scratch_elements_, units_elements(names));
  }
  const std::string embedding = EmbeddingName(c), head = LmHeadName(c);
  DF11_RETURN_IF_ERROR(Find(embedding, {c.vocab_size, c.hidden_size}).status());
  DF11_ASSIGN_OR_RETURN(head_source_, Find(head, {c.vocab_size, c.hidden_size}));
  head_scratch_elements_ = units_elements(std::span(&head, 1));
  const std::string final_norm = c.tensor_prefix + "norm.weight";
  DF11_ASSIGN_OR_RETURN(const Source* norm, Find(final_norm, {c.hidden_size}));
  if (norm->data == nullptr) {
    return absl::DataLossError(
        absl::StrCat(final_norm, " must be a plain BF16 tensor, not in a DF11 unit"));
  }
  final_norm_ = norm->data;
  return absl::OkStatus();
}

absl::Status Model::AddFusedPieces() {
  std::vector<std::pair<std::string, Source>> pieces;
  for (const auto& [name, stored] : sources_) {
    const auto split = FusedPieces(config_, name);
    if (split.empty() || stored.shape.size() != 2) continue;
    int64_t total_rows = 0;
    for (const auto& [piece, rows] : split) total_rows += rows;
    if (total_rows != stored.shape[0]) continue;  // Index reports the stored tensor's shape
    const int64_t row_length = stored.shape[1];
    int64_t row = 0;
    size_t region = stored.region;
    for (const auto& [piece, rows] : split) {
      Source s = stored;
      s.shape = {rows, row_length};
      s.stored_name = name;
      const uint64_t first = static_cast<uint64_t>(row * row_length);
      if (s.unit != nullptr) {
        s.offset += first;
        s.region = region++;
      } else if (s.data != nullptr) {
        s.data += first;
        s.stored_byte_offset = first * sizeof(uint16_t);
        s.bytes = s.bytes.subspan(s.stored_byte_offset, rows * row_length * sizeof(uint16_t));
      }
      row += rows;
      pieces.emplace_back(piece, std::move(s));
    }
  }
  for (auto& [name, s] : pieces) {
    if (!sources_.emplace(name, std::move(s)).second) {
      return absl::DataLossError(
          absl::StrCat(config_.architecture_name, " stores ", name,
                       " inside a fused tensor; the model also has it alone"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const Model::Source*> Model::Find(const std::string& name,
                                                 std::vector<int64_t> shape) const {
  auto it = sources_.find(name);
  if (it == sources_.end()) {
    return absl::DataLossError(absl::StrCat(config_.architecture_name, " needs ", name,
                                            ", which the model does not have"));
  }
  const Source& s = it->second;
  if (s.unit == nullptr && s.data == nullptr) {
    return absl::DataLossError(absl::StrCat(name, " must be BF16"));
  }
  if (s.shape != shape) {
    return absl::DataLossError(absl::StrCat(name, " has shape ", ShapeText(s.shape),
                                            "; the config implies ", ShapeText(shape)));
  }
  return &s;
}

absl::Status Model::Resolve(std::span<const Source* const> sources,
                            std::span<const bool> keep_compressed, std::span<MatrixRef> out,
                            std::span<uint16_t> scratch, codec::ThreadPool* pool) const {
  if (sources.size() > kLayerTensors) {
    return absl::InvalidArgumentError(absl::StrCat(sources.size(), " tensors at once"));
  }
  // Each DF11 unit the tensors touch is decoded once, into consecutive scratch regions: the
  // units decoded so far, each with its scratch offset.
  std::array<std::pair<const codec::Df11Model::UnitEntry*, size_t>, kLayerTensors> decoded;
  size_t decoded_units = 0;
  size_t used = 0;
  for (size_t k = 0; k < sources.size(); ++k) {
    out[k] = MatrixRef{};
    if (sources[k] == nullptr) continue;
    const Source& s = *sources[k];
    if (s.unit == nullptr) {
      out[k].data = s.data;
      continue;
    }
    if (keep_compressed[k]) {
      out[k].unit = s.decoder;
      out[k].offset = s.offset;
      out[k].interleaved = s.interleaved;
      out[k].region = s.region;
      continue;
    }
    auto it = std::find_if(decoded.begin(), decoded.begin() + decoded_units,
                           [&](const auto& d) { return d.first == s.unit; });
    if (it == decoded.begin() + decoded_units) {
      const size_t n = s.unit->unit->num_elements();
      if (used + n > scratch.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("scratch of ", scratch.size(), " elements; the model needs ", used + n));
      }
      if (s.interleaved != nullptr) {
        DF11_RETURN_IF_ERROR(s.interleaved->Decode(scratch.subspan(used, n), pool));
      } else {
        DF11_RETURN_IF_ERROR(s.decoder->Decode(scratch.subspan(used, n), pool));
      }
      *it = {s.unit, used};
      ++decoded_units;
      used += n;
    }
    out[k].data = scratch.data() + it->second + s.offset;
  }
  return absl::OkStatus();
}

absl::StatusOr<LayerWeights> Model::Layer(int64_t i, std::span<uint16_t> scratch,
                                          codec::ThreadPool* pool, bool decode_matrices) const {
  if (i < 0 || i >= config_.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", i, " of ", config_.num_layers));
  }
  constexpr size_t kMatrices = 7;  // the first tensors are the matrices, in LayerWeights order
  bool keep[kLayerTensors] = {};
  for (size_t k = 0; k < kMatrices; ++k) keep[k] = !decode_matrices;
  MatrixRef refs[kLayerTensors];
  DF11_RETURN_IF_ERROR(Resolve(layer_sources_[static_cast<size_t>(i)], keep, refs, scratch, pool));
  LayerWeights w;
  MatrixRef* matrices[kMatrices] = {&w.q_proj,    &w.k_proj,  &w.v_proj,   &w.o_proj,
                                    &w.gate_proj, &w.up_proj, &w.down_proj};
  for (size_t k = 0; k < kMatrices; ++k) *matrices[k] = refs[k];
  const uint16_t** vectors[] = {&w.input_norm,     &w.mlp_norm,  &w.q_norm,
                                &w.k_norm,         &w.q_bias,    &w.k_bias,
                                &w.v_bias,         &w.o_bias,    &w.gate_bias,
                                &w.up_bias,        &w.down_bias, &w.attention_output_norm,
                                &w.mlp_output_norm};
  static_assert(kMatrices + std::size(vectors) == std::size(refs));
  for (size_t k = 0; k < std::size(vectors); ++k) *vectors[k] = refs[kMatrices + k].data;
  return w;
}

absl::Status Model::EmbedTokens(std::span<const int32_t> tokens, float* out) const {
  const int64_t hidden = config_.hidden_size;
  const Source& s = sources_.at(EmbeddingName(config_));
  const float scale = config_.embedding_scale;
  thread_local std::vector<uint16_t> row;
  row.resize(hidden);
  DF11_DCHECK(CheckTokenIds(tokens, config_.vocab_size).ok());  // Forward checked them
  for (size_t k = 0; k < tokens.size(); ++k) {
    const int32_t t = tokens[k];
    const uint16_t* bf16 = s.data + int64_t{t} * hidden;
    if (s.interleaved != nullptr) {
      DF11_RETURN_IF_ERROR(s.interleaved->DecodeElements(s.offset + size_t(t) * hidden, row));
      bf16 = row.data();
    } else if (s.unit != nullptr) {
      DF11_RETURN_IF_ERROR(s.decoder->DecodeElements(s.offset + size_t(t) * hidden, row));
      bf16 = row.data();
    }
    float* o = out + k * hidden;
    for (int64_t i = 0; i < hidden; ++i) {
      const uint32_t bits = uint32_t{bf16[i]} << 16;
      std::memcpy(o + i, &bits, 4);
    }
    if (scale != 1.0f) {
      for (int64_t i = 0; i < hidden; ++i) o[i] *= scale;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MatrixRef> Model::LmHead(std::span<uint16_t> scratch, codec::ThreadPool* pool,
                                        bool decode) const {
  const bool keep = !decode;
  MatrixRef ref;
  DF11_RETURN_IF_ERROR(
      Resolve(std::span(&head_source_, 1), std::span(&keep, 1), std::span(&ref, 1), scratch, pool));
  return ref;
}

std::vector<std::pair<std::string, std::span<const std::byte>>> Model::plain_tensors() const {
  std::vector<std::pair<std::string, std::span<const std::byte>>> out;
  for (const auto& [name, s] : sources_) {
    if (s.unit == nullptr && s.stored_name.empty()) out.emplace_back(name, s.bytes);
  }
  return out;
}

absl::StatusOr<WeightLocation> Model::Locate(const std::string& name) const {
  auto it = sources_.find(name);
  if (it == sources_.end()) return absl::NotFoundError(absl::StrCat("no tensor ", name));
  const Source& s = it->second;
  WeightLocation w;
  w.shape = s.shape;
  w.stored_name = s.stored_name.empty() ? it->first : s.stored_name;
  w.stored_byte_offset = s.stored_byte_offset;
  if (s.unit != nullptr) {
    w.unit = static_cast<int>(std::find(units_.begin(), units_.end(), s.unit) - units_.begin());
    w.offset = s.offset;
  } else {
    w.plain = s.bytes;
  }
  return w;
}

absl::Status Model::CheckFiles() const {
  const codec::Checkpoint& checkpoint = df11_ != nullptr ? df11_->checkpoint() : *checkpoint_;
  for (const codec::SafetensorsFile& file : checkpoint.files()) {
    DF11_RETURN_IF_ERROR(file.CheckUnchanged());
  }
  return absl::OkStatus();
}

absl::Status Model::CheckReads() const {
  const codec::Checkpoint& checkpoint = df11_ != nullptr ? df11_->checkpoint() : *checkpoint_;
  for (const codec::SafetensorsFile& file : checkpoint.files()) {
    DF11_RETURN_IF_ERROR(file.CheckReads());
  }
  return absl::OkStatus();
}

}  // namespace df11::runtime
