#include "daemon/runtime/model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codec/base/status_macros.h"
#include "codec/decoder.h"
#include "nlohmann/json.hpp"

namespace df11::runtime {
namespace {

constexpr char kEmbedding[] = "model.embed_tokens.weight";

std::string ShapeText(std::span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::vector<std::vector<int64_t>> LayerTensorShapes(const ModelConfig& c) {
  const int64_t h = c.hidden_size, m = c.intermediate_size, d = c.head_dim;
  const int64_t q = c.num_heads * d, kv = c.num_kv_heads * d;
  return {{q, h}, {kv, h}, {kv, h}, {h, q}, {m, h}, {m, h}, {h, m}, {h}, {h},
          {d},    {d},     {q},     {kv},   {kv},   {h},    {m},    {m}, {h}};
}

}  // namespace

namespace {

// The regions of a unit's tensors for codec::InterleavedUnit: rows are the first dimension (a
// vector or a scalar is one row).
std::vector<codec::InterleavedUnit::Region> UnitRegions(const codec::Df11Model::UnitEntry& u) {
  std::vector<codec::InterleavedUnit::Region> regions;
  size_t first = 0;
  for (const std::vector<int64_t>& shape : u.shapes) {
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    codec::InterleavedUnit::Region r{
        .first = first, .rows = elements > 0 ? 1 : 0, .row_length = std::max<int64_t>(1, elements)};
    if (shape.size() >= 2 && shape[0] > 0) {
      r.rows = shape[0];
      r.row_length = elements / shape[0];
    }
    regions.push_back(r);
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
  const std::string p = absl::StrCat("model.layers.", i, ".");
  const bool qkv_bias = c.attention_bias;
  const bool o_bias = c.attention_bias && c.architecture != Architecture::kQwen2;
  const bool qk_norm = c.architecture == Architecture::kQwen3;
  auto maybe = [](bool present, std::string name) { return present ? name : std::string(); };
  return {p + "self_attn.q_proj.weight",
          p + "self_attn.k_proj.weight",
          p + "self_attn.v_proj.weight",
          p + "self_attn.o_proj.weight",
          p + "mlp.gate_proj.weight",
          p + "mlp.up_proj.weight",
          p + "mlp.down_proj.weight",
          p + "input_layernorm.weight",
          p + "post_attention_layernorm.weight",
          maybe(qk_norm, p + "self_attn.q_norm.weight"),
          maybe(qk_norm, p + "self_attn.k_norm.weight"),
          maybe(qkv_bias, p + "self_attn.q_proj.bias"),
          maybe(qkv_bias, p + "self_attn.k_proj.bias"),
          maybe(qkv_bias, p + "self_attn.v_proj.bias"),
          maybe(o_bias, p + "self_attn.o_proj.bias"),
          maybe(c.mlp_bias, p + "mlp.gate_proj.bias"),
          maybe(c.mlp_bias, p + "mlp.up_proj.bias"),
          maybe(c.mlp_bias, p + "mlp.down_proj.bias")};
}

std::string EmbeddingName() { return kEmbedding; }

std::string LmHeadName(const ModelConfig& config) {
  return config.tie_word_embeddings ? kEmbedding : "lm_head.weight";
}

absl::StatusOr<bool> IsDf11Directory(const std::string& dir) {
  std::ifstream in(std::filesystem::path(dir) / "config.json");
  if (!in) return absl::NotFoundError(absl::StrCat(dir, " has no config.json"));
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("dfloat11_config");
}

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& dir,
                                                   const LoadOptions& options) {
  std::unique_ptr<Model> model(new Model());
  model->directory_ = dir;
  DF11_ASSIGN_OR_RETURN(model->config_, ReadModelConfig(dir));
  DF11_ASSIGN_OR_RETURN(const bool df11, IsDf11Directory(dir));
  if (df11) {
    DF11_ASSIGN_OR_RETURN(codec::Df11Model m, codec::Df11Model::Open(dir));
    model->df11_ = std::make_unique<codec::Df11Model>(std::move(m));
  } else {
    DF11_ASSIGN_OR_RETURN(codec::Checkpoint c, codec::Checkpoint::Open(dir));
    model->checkpoint_ = std::make_unique<codec::Checkpoint>(std::move(c));
  }
  DF11_RETURN_IF_ERROR(model->Index(options.interleave));
  return model;
}

absl::Status Model::Index(bool interleave) {
  // Plain tensors (DF11 passthrough, or the whole checkpoint), BF16 only where the engine reads
  // them; copied when the mapping is not 2-byte aligned.
  auto add_plain = [this](const codec::TensorView* t) {
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
      const codec::UnitDecoder& decoder = decoders_.try_emplace(&u, *u.unit).first->second;
      const codec::UnitTensors& t = u.unit->tensors();
      // The unit as stored; a re-encoding is kept only when it is not larger, so that a model
      // never holds more than EstimateModel said (LLM weights: about 6 % less).
      const uint64_t stored = t.luts.size() + t.encoded_exponent.size() + t.sign_mantissa.size() +
                              t.output_positions.size() + t.gaps.size() +
                              t.split_positions.size() * sizeof(int64_t);
      const codec::InterleavedUnit* interleaved = nullptr;
      if (pool != nullptr) {
        DF11_ASSIGN_OR_RETURN(codec::InterleavedUnit built,
                              codec::InterleavedUnit::Build(decoder, UnitRegions(u), pool.get()));
        if (built.stored_bytes() + t.sign_mantissa.size() <= stored) {
          interleaved = &interleaved_.emplace(&u, std::move(built)).first->second;
          ReleasePages(t.encoded_exponent);
          ReleasePages(t.gaps);
        }
      }
      unit_bytes_ +=
          interleaved != nullptr ? interleaved->stored_bytes() + t.sign_mantissa.size() : stored;
      size_t offset = 0;
      for (size_t i = 0; i < u.weight_names.size(); ++i) {
        Source s;
        s.unit = &u;
        s.decoder = &decoder;
        s.offset = offset;
        s.interleaved = interleaved;
        s.region = i;
        s.shape = u.shapes[i];
        offset = i < u.split_positions->size() ? (*u.split_positions)[i] : u.unit->num_elements();
        sources_[u.weight_names[i]] = std::move(s);
      }
    }
    for (const codec::TensorView* t : df11_->passthrough()) add_plain(t);
  } else {
    for (const std::string& name : checkpoint_->TensorNames()) add_plain(checkpoint_->Find(name));
  }

  // Every tensor the architecture needs, with its shape; and the scratch each step needs.
  const ModelConfig& c = config_;
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
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::vector<std::string> names = LayerTensorNames(c, i);
    for (size_t k = 0; k < names.size(); ++k) {
      if (names[k].empty()) continue;
      DF11_ASSIGN_OR_RETURN(const Source* source, Find(names[k], shapes[k]));
      if (shapes[k].size() == 1 && source->unit != nullptr) vectors_in_units_ = true;
    }
    layer_scratch_elements_ = std::max(layer_scratch_elements_, units_elements(names));
  }
  const std::string head = LmHeadName(c);
  DF11_RETURN_IF_ERROR(Find(kEmbedding, {c.vocab_size, c.hidden_size}).status());
  DF11_RETURN_IF_ERROR(Find(head, {c.vocab_size, c.hidden_size}).status());
  head_scratch_elements_ = units_elements(std::span(&head, 1));
  DF11_ASSIGN_OR_RETURN(const Source* norm, Find("model.norm.weight", {c.hidden_size}));
  if (norm->data == nullptr) {
    return absl::DataLossError("model.norm.weight must be a plain BF16 tensor, not in a DF11 unit");
  }
  final_norm_ = norm->data;
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

absl::Status Model::Resolve(std::span<const std::string> names,
                            std::span<const bool> keep_compressed, std::span<MatrixRef> out,
                            std::span<uint16_t> scratch, codec::ThreadPool* pool) const {
  // Each DF11 unit the names touch is decoded once, into consecutive scratch regions.
  std::map<const codec::Df11Model::UnitEntry*, size_t> decoded;  // unit -> scratch offset
  size_t used = 0;
  for (size_t k = 0; k < names.size(); ++k) {
    out[k] = MatrixRef{};
    if (names[k].empty()) continue;
    const Source& s = sources_.at(names[k]);
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
    auto [it, fresh] = decoded.emplace(s.unit, used);
    if (fresh) {
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
  const std::vector<std::string> names = LayerTensorNames(config_, i);
  constexpr size_t kMatrices = 7;  // the first names are the matrices, in LayerWeights order
  bool keep[18] = {};
  for (size_t k = 0; k < kMatrices; ++k) keep[k] = !decode_matrices;
  MatrixRef refs[18];
  static_assert(std::size(refs) == 18);
  DF11_RETURN_IF_ERROR(Resolve(names, keep, refs, scratch, pool));
  LayerWeights w;
  MatrixRef* matrices[kMatrices] = {&w.q_proj,    &w.k_proj,  &w.v_proj,   &w.o_proj,
                                    &w.gate_proj, &w.up_proj, &w.down_proj};
  for (size_t k = 0; k < kMatrices; ++k) *matrices[k] = refs[k];
  const uint16_t** vectors[] = {&w.input_norm, &w.post_attention_norm,
                                &w.q_norm,     &w.k_norm,
                                &w.q_bias,     &w.k_bias,
                                &w.v_bias,     &w.o_bias,
                                &w.gate_bias,  &w.up_bias,
                                &w.down_bias};
  static_assert(kMatrices + std::size(vectors) == std::size(refs));
  for (size_t k = 0; k < std::size(vectors); ++k) *vectors[k] = refs[kMatrices + k].data;
  return w;
}

absl::Status Model::EmbedTokens(std::span<const int32_t> tokens, float* out) const {
  const int64_t hidden = config_.hidden_size;
  const Source& s = sources_.at(kEmbedding);
  thread_local std::vector<uint16_t> row;
  row.resize(hidden);
  for (size_t k = 0; k < tokens.size(); ++k) {
    const int32_t t = tokens[k];
    if (t < 0 || t >= config_.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", t, " is outside the vocabulary of ", config_.vocab_size));
    }
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
  }
  return absl::OkStatus();
}

absl::StatusOr<MatrixRef> Model::LmHead(std::span<uint16_t> scratch, codec::ThreadPool* pool,
                                        bool decode) const {
  const std::string name = LmHeadName(config_);
  const bool keep = !decode;
  MatrixRef ref;
  DF11_RETURN_IF_ERROR(
      Resolve(std::span(&name, 1), std::span(&keep, 1), std::span(&ref, 1), scratch, pool));
  return ref;
}

std::span<const codec::Df11Model::UnitEntry> Model::units() const {
  if (df11_ == nullptr) return {};
  return df11_->units();
}

std::vector<std::pair<std::string, std::span<const std::byte>>> Model::plain_tensors() const {
  std::vector<std::pair<std::string, std::span<const std::byte>>> out;
  for (const auto& [name, s] : sources_) {
    if (s.unit == nullptr) out.emplace_back(name, s.bytes);
  }
  return out;
}

absl::StatusOr<WeightLocation> Model::Locate(const std::string& name) const {
  auto it = sources_.find(name);
  if (it == sources_.end()) return absl::NotFoundError(absl::StrCat("no tensor ", name));
  const Source& s = it->second;
  WeightLocation w;
  w.shape = s.shape;
  if (s.unit != nullptr) {
    w.unit = static_cast<int>(s.unit - df11_->units().data());
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
