#include "daemon/runtime/engine/decoder_graph.h"

#include "codec/base/status_macros.h"

namespace df11::runtime {

namespace {

using A = Activations;
using W = LayerWeight;

// One decoder layer: pre-norm attention and a gated MLP, each added to the residual stream;
// Gemma normalises each block's output before the add (ModelConfig::output_norms).
absl::Status RunLayer(const ModelConfig& config, DecoderOps& ops) {
  DF11_RETURN_IF_ERROR(ops.Norm(A::kResidual, W::kInputNorm, A::kNormed));
  const DecoderOps::Product qkv[] = {{W::kQ, A::kQuery}, {W::kK, A::kKey}, {W::kV, A::kValue}};
  DF11_RETURN_IF_ERROR(ops.Project(A::kNormed, qkv));
  DF11_RETURN_IF_ERROR(ops.PrepareHeads());
  DF11_RETURN_IF_ERROR(ops.Attend());
  const DecoderOps::Product o[] = {{W::kO, A::kBranch}};
  DF11_RETURN_IF_ERROR(ops.Project(A::kAttention, o));
  if (config.output_norms) {
    DF11_RETURN_IF_ERROR(ops.Norm(A::kBranch, W::kAttentionOutputNorm, A::kBranch));
  }
  DF11_RETURN_IF_ERROR(ops.AddBranchAndNorm(W::kMlpNorm, A::kNormed));
  const DecoderOps::Product gate_up[] = {{W::kGate, A::kGate}, {W::kUp, A::kUp}};
  DF11_RETURN_IF_ERROR(ops.Project(A::kNormed, gate_up));
  DF11_RETURN_IF_ERROR(ops.GatedDown());
  if (config.output_norms) {
    DF11_RETURN_IF_ERROR(ops.Norm(A::kBranch, W::kMlpOutputNorm, A::kBranch));
  }
  return ops.AddBranch();
}

}  // namespace

int64_t ActivationWidth(const ModelConfig& c, Activations a) {
  switch (a) {
    case Activations::kQuery:
    case Activations::kAttention:
      return c.num_heads * c.head_dim;
    case Activations::kKey:
    case Activations::kValue:
      return c.num_kv_heads * c.head_dim;
    case Activations::kGate:
    case Activations::kUp:
      return c.intermediate_size;
    case Activations::kResidual:
    case Activations::kNormed:
    case Activations::kBranch:
      return c.hidden_size;
  }
  return c.hidden_size;
}

absl::Status RunDecoder(const ModelConfig& config, DecoderOps& ops) {
  DF11_RETURN_IF_ERROR(ops.Embed());
  for (int64_t l = 0; l < config.num_layers; ++l) {
    DF11_RETURN_IF_ERROR(ops.BeginLayer(l));
    DF11_RETURN_IF_ERROR(RunLayer(config, ops));
    DF11_RETURN_IF_ERROR(ops.EndLayer(l));
  }
  return ops.Logits();
}

}  // namespace df11::runtime
