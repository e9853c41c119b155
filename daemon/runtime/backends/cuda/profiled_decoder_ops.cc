#include "daemon/runtime/backends/cuda/profiled_decoder_ops.h"

#include <utility>

#include "codec/base/status_macros.h"

namespace df11::runtime {

template <typename Op>
absl::Status ProfiledDecoderOps::Timed(const char* name, Op op) {
  const size_t k = names_.size();
  while (events_.size() < 2 * k + 2) {
    DF11_ASSIGN_OR_RETURN(std::unique_ptr<DeviceEvent> e, DeviceEvent::Create(device_, true));
    events_.push_back(std::move(e));
  }
  DF11_RETURN_IF_ERROR(device_.Record(events_[2 * k]->get(), stream_));
  DF11_RETURN_IF_ERROR(op());
  DF11_RETURN_IF_ERROR(device_.Record(events_[2 * k + 1]->get(), stream_));
  names_.push_back(name);
  return absl::OkStatus();
}

absl::Status ProfiledDecoderOps::Embed() {
  return Timed("embed", [&] { return ops_.Embed(); });
}

absl::Status ProfiledDecoderOps::BeginLayer(int64_t layer) {
  return Timed("begin layer (waits for its decode)", [&] { return ops_.BeginLayer(layer); });
}

absl::Status ProfiledDecoderOps::Norm(Activations in, LayerWeight weight, Activations out) {
  return Timed("norm", [&] { return ops_.Norm(in, weight, out); });
}

absl::Status ProfiledDecoderOps::Project(Activations in, std::span<const Product> products) {
  const LayerWeight first = products.front().weight;
  const char* name = first == LayerWeight::kQ      ? "project q, k, v"
                     : first == LayerWeight::kO    ? "project o"
                     : first == LayerWeight::kGate ? "project gate, up"
                                                   : "project down";
  return Timed(name, [&] { return ops_.Project(in, products); });
}

absl::Status ProfiledDecoderOps::PrepareHeads() {
  return Timed("head norms, RoPE and the KV write", [&] { return ops_.PrepareHeads(); });
}

absl::Status ProfiledDecoderOps::Attend() {
  return Timed("attention", [&] { return ops_.Attend(); });
}

absl::Status ProfiledDecoderOps::AddBranchAndNorm(LayerWeight norm, Activations out) {
  return Timed("add and norm", [&] { return ops_.AddBranchAndNorm(norm, out); });
}

absl::Status ProfiledDecoderOps::GatedDown() {
  return Timed("activation and project down", [&] { return ops_.GatedDown(); });
}

absl::Status ProfiledDecoderOps::AddBranch() {
  return Timed("add", [&] { return ops_.AddBranch(); });
}

// Not timed: it only records an event.
absl::Status ProfiledDecoderOps::EndLayer(int64_t layer) { return ops_.EndLayer(layer); }

absl::Status ProfiledDecoderOps::Logits() {
  return Timed("logits (final norm, head, copy to host)", [&] { return ops_.Logits(); });
}

absl::Status ProfiledDecoderOps::AddTo(std::map<std::string, DeviceWork::OpTime>& profile) const {
  // Every time is read before any is added, so a failed read adds nothing.
  std::vector<double> seconds(names_.size());
  for (size_t i = 0; i < names_.size(); ++i) {
    DF11_ASSIGN_OR_RETURN(seconds[i],
                          device_.ElapsedSeconds(events_[2 * i]->get(), events_[2 * i + 1]->get()));
  }
  for (size_t i = 0; i < names_.size(); ++i) {
    DeviceWork::OpTime& t = profile[names_[i]];
    t.seconds += seconds[i];
    ++t.calls;
  }
  return absl::OkStatus();
}

}  // namespace df11::runtime
