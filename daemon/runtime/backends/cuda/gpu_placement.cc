#include "daemon/runtime/backends/cuda/gpu_placement.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "codec/base/align.h"
#include "codec/base/status_macros.h"
#include "codec/format.h"
#include "codec/gpu_decoder.h"

namespace df11::runtime {
namespace {

constexpr uint64_t kAlignment = codec::GpuUnitImage::kAlignment;

uint64_t Elements(std::span<const int64_t> shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

// The units `names` are in, each once, in order of first appearance, laid out one after the other
// in a scratch buffer (as Model::Layer decodes them on the CPU), each from a multiple of 8
// elements.
absl::StatusOr<DecodeStep> PlanDecode(const Model& model, std::span<const std::string> names) {
  DecodeStep step;
  for (const std::string& name : names) {
    if (name.empty()) continue;
    DF11_ASSIGN_OR_RETURN(const WeightLocation w, model.Locate(name));
    if (w.unit < 0 || std::find(step.units.begin(), step.units.end(), w.unit) != step.units.end()) {
      continue;
    }
    // Each unit on 16 bytes: the tiled decoder writes pairs of values, and vectors want it.
    step.units.push_back(w.unit);
    step.scratch_offsets.push_back((step.scratch_elements + 7) / 8 * 8);
    step.scratch_elements =
        step.scratch_offsets.back() + model.units()[w.unit]->unit->num_elements();
  }
  if (step.units.size() > codec::gpu::kMaxUnitsPerLaunch) {
    return absl::InvalidArgumentError(absl::StrCat(
        names.front(), " and the tensors beside it are in ", step.units.size(),
        " DF11 units; one decode launch takes at most ", codec::gpu::kMaxUnitsPerLaunch));
  }
  return step;
}

// Where tensor `name` is once `step` has decoded: in the scratch buffer or resident.
absl::StatusOr<TensorSource> Source(const Model& model, const std::string& name,
                                    const DecodeStep& step,
                                    const std::map<std::string, uint64_t>& plain_offsets) {
  if (name.empty()) return TensorSource{};
  DF11_ASSIGN_OR_RETURN(const WeightLocation w, model.Locate(name));
  const uint64_t bytes = Elements(w.shape) * sizeof(uint16_t);
  if (w.unit < 0) {
    return TensorSource{
        .kind = TensorSource::Kind::kResident,
        .offset = plain_offsets.at(std::string(w.stored_name)) + w.stored_byte_offset,
        .bytes = bytes};
  }
  const size_t i = std::find(step.units.begin(), step.units.end(), w.unit) - step.units.begin();
  return TensorSource{.kind = TensorSource::Kind::kScratch,
                      .offset = (step.scratch_offsets.at(i) + w.offset) * sizeof(uint16_t),
                      .bytes = bytes};
}

// Whether tensors `ks` of a layer are present and lie one after the other, in the same place.
bool Adjacent(const std::array<TensorSource, kLayerTensors>& t, std::initializer_list<size_t> ks) {
  const TensorSource* previous = nullptr;
  for (size_t k : ks) {
    const TensorSource& s = t[k];
    if (s.kind == TensorSource::Kind::kAbsent) return false;
    if (previous != nullptr &&
        (s.kind != previous->kind || s.offset != previous->offset + previous->bytes)) {
      return false;
    }
    previous = &s;
  }
  return true;
}

// Biases `ks`: all absent, or adjacent.
bool BiasesAdjacent(const std::array<TensorSource, kLayerTensors>& t,
                    std::initializer_list<size_t> ks) {
  return std::all_of(ks.begin(), ks.end(),
                     [&](size_t k) { return t[k].kind == TensorSource::Kind::kAbsent; }) ||
         Adjacent(t, ks);
}

}  // namespace

GpuPlacementLayout LayOutGpuPlacement(std::span<const codec::UnitSizes> units,
                                      std::span<const uint64_t> plain, uint64_t granule) {
  GpuPlacementLayout layout;
  uint64_t at = 0;
  for (const codec::UnitSizes& u : units) {
    layout.unit_images.push_back(codec::GpuUnitImage::Of(u));
    layout.unit_offsets.push_back(at);
    at += layout.unit_images.back().bytes;
  }
  layout.unit_bytes = at;
  for (uint64_t bytes : plain) {
    layout.plain_offsets.push_back(at);
    at += base::AlignUp(bytes, kAlignment);
  }
  const uint64_t total = std::max<uint64_t>(granule, (at + granule - 1) / granule * granule);
  layout.plain_bytes = total - layout.unit_bytes;
  return layout;
}

absl::StatusOr<GpuModelPlan> PlanGpuModel(const Model& model, uint64_t granule) {
  const ModelConfig& c = model.config();
  GpuModelPlan plan;
  for (const codec::Df11Model::UnitEntry* u : model.units()) {
    const codec::UnitSizes sizes = codec::UnitSizes::Of(*u->unit);
    if (sizes.elements > UINT32_MAX || sizes.stream_bytes > UINT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DF11 unit ", u->path, " has ", sizes.elements, " elements and a stream of ",
          sizes.stream_bytes, " bytes; the GPU decoder takes fewer than 2^32 of each"));
    }
    plan.unit_sizes.push_back(sizes);
  }
  // Plain tensors: each layer's q, k, v (weights, then biases), gate and up first, adjacent; then
  // the others as the model lists them.
  const auto plain = model.plain_tensors();
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < plain.size(); ++i) index_of[plain[i].first] = i;
  std::vector<size_t> order;
  std::vector<bool> ordered(plain.size(), false);
  auto add = [&](size_t i) {
    if (ordered[i]) return;
    ordered[i] = true;
    order.push_back(i);
  };
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::vector<std::string> names = LayerTensorNames(c, l);
    for (size_t k : {0, 1, 2, 11, 12, 13, 4, 5, 15, 16}) {
      if (names[k].empty()) continue;
      const absl::StatusOr<WeightLocation> w = model.Locate(names[k]);
      if (!w.ok() || w->unit >= 0) continue;
      if (auto it = index_of.find(std::string(w->stored_name)); it != index_of.end()) {
        add(it->second);
      }
    }
  }
  for (size_t i = 0; i < plain.size(); ++i) add(i);
  std::vector<uint64_t> plain_bytes;
  for (size_t i : order) plain_bytes.push_back(plain[i].second.size());
  plan.layout = LayOutGpuPlacement(plan.unit_sizes, plain_bytes, granule);
  // plain_offsets follows plain_tensors()'s order, as the upload copies them.
  std::vector<uint64_t> offsets(plain.size());
  for (size_t k = 0; k < order.size(); ++k) offsets[order[k]] = plan.layout.plain_offsets[k];
  plan.layout.plain_offsets = offsets;
  std::map<std::string, uint64_t> plain_offsets;
  for (size_t i = 0; i < plain.size(); ++i) plain_offsets[plain[i].first] = offsets[i];

  auto need = [&plan](ScratchBuffer buffer, uint64_t elements) {
    uint64_t& n = plan.scratch_elements[IndexOf(buffer)];
    n = std::max(n, elements);
  };
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::vector<std::string> names = LayerTensorNames(c, l);
    LayerPlan layer;
    DF11_ASSIGN_OR_RETURN(layer.decode, PlanDecode(model, names));
    for (size_t k = 0; k < kLayerTensors; ++k) {
      DF11_ASSIGN_OR_RETURN(layer.tensors[k], Source(model, names[k], layer.decode, plain_offsets));
    }
    layer.qkv_adjacent =
        Adjacent(layer.tensors, {0, 1, 2}) && BiasesAdjacent(layer.tensors, {11, 12, 13});
    layer.gate_up_adjacent =
        Adjacent(layer.tensors, {4, 5}) && BiasesAdjacent(layer.tensors, {15, 16});
    need(ScratchBufferOf(l), layer.decode.scratch_elements);
    plan.layers.push_back(std::move(layer));
  }

  const std::string head = LmHeadName(c);
  plan.head_buffer = ScratchBufferOf(c.num_layers);
  DF11_ASSIGN_OR_RETURN(plan.head_decode, PlanDecode(model, std::span(&head, 1)));
  DF11_ASSIGN_OR_RETURN(plan.head, Source(model, head, plan.head_decode, plain_offsets));
  need(plan.head_buffer, plan.head_decode.scratch_elements);

  DF11_ASSIGN_OR_RETURN(
      plan.final_norm, Source(model, c.tensor_prefix + "norm.weight", DecodeStep{}, plain_offsets));
  DF11_ASSIGN_OR_RETURN(const WeightLocation embedding, model.Locate(EmbeddingName(c)));
  if (embedding.unit >= 0) {
    plan.embedding_unit = embedding.unit;
    plan.embedding_offset = embedding.offset;
    const std::span<const uint32_t> p = model.units()[embedding.unit]->unit->positions();
    uint64_t largest_block = 0;
    for (size_t b = 0; b + 1 < p.size(); ++b)
      largest_block = std::max<uint64_t>(largest_block, p[b + 1] - p[b]);
    plan.embedding_row_span = static_cast<uint64_t>(c.hidden_size) + 2 * largest_block;
    need(kEmbeddingBuffer, plan.embedding_row_span);
  } else {
    plan.embedding = TensorSource{.kind = TensorSource::Kind::kResident,
                                  .offset = plain_offsets.at(EmbeddingName(c)),
                                  .bytes = Elements(embedding.shape) * sizeof(uint16_t)};
  }
  return plan;
}

std::array<uint64_t, 2> ScratchElementsFromConfig(const ModelConfig& c, bool df11) {
  if (!df11) return {0, 0};
  const uint64_t h = c.hidden_size, m = c.intermediate_size, d = c.head_dim;
  const uint64_t q = c.num_heads * d, kv = c.num_kv_heads * d;
  const uint64_t layer = h * (2 * q + 2 * kv) + 3 * h * m;
  const uint64_t head = static_cast<uint64_t>(c.vocab_size) * h;
  const uint64_t row = h + 2 * codec::gpu::kMaxBlockElements;
  std::array<uint64_t, 2> e = {c.num_layers >= 1 ? layer : 0, c.num_layers >= 2 ? layer : 0};
  uint64_t& head_buffer = e[IndexOf(ScratchBufferOf(c.num_layers))];
  head_buffer = std::max(head_buffer, head);
  e[IndexOf(kEmbeddingBuffer)] = std::max(e[IndexOf(kEmbeddingBuffer)], row);
  return e;
}

}  // namespace df11::runtime
