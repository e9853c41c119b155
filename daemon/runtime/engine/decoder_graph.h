// The decoder of every supported architecture, written once: the order of the operations of one
// forward pass over a batch of rows, from the embedding to the logits. An architecture differs
// from Llama only by its ModelConfig (which norms, biases, windows, activation, soft-caps), and
// each difference is decided here, so a change to the layer is made in one place and both
// backends run it.
//
// A backend supplies DecoderOps: the operations of one pass on its own activations and weights.
// The CPU backend keeps every activation in fp32 and multiplies by its compressed units directly;
// the CUDA backend keeps BF16 activations beside an fp32 residual stream and enqueues its kernels
// (ForwardOps) on a stream. Operations name activations and weights by role; the backend knows
// their widths, element types and where they are.
//
//   CpuDecoderOps ops(...);                 // one pass of one model over a batch
//   DF11_RETURN_IF_ERROR(RunDecoder(model.config(), ops));
#ifndef DF11_DAEMON_RUNTIME_ENGINE_DECODER_GRAPH_H_
#define DF11_DAEMON_RUNTIME_ENGINE_DECODER_GRAPH_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "daemon/runtime/engine/model_config.h"

namespace df11::runtime {

// A pass's activations, each [rows][width].
enum class Activations : uint8_t {
  kResidual,   // hidden_size: the residual stream (fp32 in every backend)
  kNormed,     // hidden_size: a norm's output, the input of the projections that follow it
  kQuery,      // heads x head_dim
  kKey,        // kv_heads x head_dim
  kValue,      // kv_heads x head_dim
  kAttention,  // heads x head_dim: attention's output
  kGate,       // intermediate_size
  kUp,         // intermediate_size
  kBranch,     // hidden_size: a block's output before it joins the residual stream (fp32)
};
inline constexpr size_t kActivationKinds = static_cast<size_t>(Activations::kBranch) + 1;

// Values per row of activation `a` under `config`.
int64_t ActivationWidth(const ModelConfig& config, Activations a);

// A decoder layer's weights, in LayerTensorNames order (model.h).
enum class LayerWeight : uint8_t {
  kQ,
  kK,
  kV,
  kO,
  kGate,
  kUp,
  kDown,
  kInputNorm,
  kMlpNorm,
  kQNorm,
  kKNorm,
  kQBias,
  kKBias,
  kVBias,
  kOBias,
  kGateBias,
  kUpBias,
  kDownBias,
  kAttentionOutputNorm,
  kMlpOutputNorm,
};

// A projection's bias (its LayerWeight), which a layer may or may not have.
constexpr LayerWeight BiasOf(LayerWeight projection) {
  return static_cast<LayerWeight>(static_cast<int>(projection) +
                                  static_cast<int>(LayerWeight::kQBias));
}

class DecoderOps {
 public:
  virtual ~DecoderOps() = default;

  // kResidual = the rows' embeddings times ModelConfig::embedding_scale.
  virtual absl::Status Embed() = 0;
  // Layer `layer`'s weights are wanted next: the backend makes them ready (decoding them, or
  // waiting for a decode it started earlier) and may start on the next layer's.
  virtual absl::Status BeginLayer(int64_t layer) = 0;
  // out = RMSNorm(in) · (norm_weight_offset + weight), per row; in and out hold hidden_size
  // values (kResidual, kNormed or kBranch). `in` may be `out`.
  virtual absl::Status Norm(Activations in, LayerWeight weight, Activations out) = 0;
  // Products that share their input: each out = in · Wᵀ, plus the weight's bias when the layer
  // has one. A backend may run them as one product.
  struct Product {
    LayerWeight weight;
    Activations out;
  };
  virtual absl::Status Project(Activations in, std::span<const Product> products) = 0;
  // Per head of kQuery and kKey: the layer's q and k norms when it has them, then RoPE for each
  // row's position (the sliding-window RoPE in sliding layers).
  virtual absl::Status PrepareHeads() = 0;
  // kAttention = each row's query heads attending (causally, within the layer's window) over
  // its sequence's cached positions and the new ones; the new keys and values (kKey, kValue)
  // are in their caches afterwards.
  virtual absl::Status Attend() = 0;
  // kResidual += kBranch, then out = RMSNorm(kResidual) with `norm`: the attention block's
  // output joins the residual stream and the MLP's input is normalised.
  virtual absl::Status AddBranchAndNorm(LayerWeight norm, Activations out) = 0;
  // kBranch = (act(kGate) · kUp) · W_downᵀ (+ its bias): the MLP's gated activation and down
  // projection. kGate may be overwritten.
  virtual absl::Status GatedDown() = 0;
  // kResidual += kBranch.
  virtual absl::Status AddBranch() = 0;
  // Layer `layer`'s operations are all issued (its weights may be reused).
  virtual absl::Status EndLayer(int64_t layer) = 0;
  // For each sequence's last row: the final norm, the output head and the logits' soft-cap.
  virtual absl::Status Logits() = 0;
};

// Runs one forward pass: the embedding, every decoder layer, the logits.
absl::Status RunDecoder(const ModelConfig& config, DecoderOps& ops);

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_ENGINE_DECODER_GRAPH_H_
