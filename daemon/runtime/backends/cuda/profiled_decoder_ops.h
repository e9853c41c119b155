// DecoderOps around another that times each operation on a device stream with a pair of timing
// events: the CUDA runner's profile (engine-bench --profile, DeviceWork::ops).
//
//   ProfiledDecoderOps profiled(device, stream, events, pass);
//   DF11_RETURN_IF_ERROR(RunDecoder(config, profiled));
//   DF11_RETURN_IF_ERROR(device.StreamSynchronize(stream));
//   DF11_RETURN_IF_ERROR(profiled.AddTo(profile));
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_PROFILED_DECODER_OPS_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_PROFILED_DECODER_OPS_H_

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/runtime/backends/cuda/gpu_device.h"
#include "daemon/runtime/backends/cuda/gpu_handles.h"
#include "daemon/runtime/engine/backend.h"
#include "daemon/runtime/engine/decoder_graph.h"

namespace df11::runtime {

class ProfiledDecoderOps final : public DecoderOps {
 public:
  // Records on `stream`, with events taken from `events` (grown as needed and kept by the caller,
  // so that a warm pass creates none); `ops` does the work.
  ProfiledDecoderOps(GpuDevice& device, GpuDevice::Stream stream,
                     std::vector<std::unique_ptr<DeviceEvent>>& events, DecoderOps& ops)
      : device_(device), stream_(stream), events_(events), ops_(ops) {}

  absl::Status Embed() override;
  absl::Status BeginLayer(int64_t layer) override;
  absl::Status Norm(Activations in, LayerWeight weight, Activations out) override;
  absl::Status Project(Activations in, std::span<const Product> products) override;
  absl::Status PrepareHeads() override;
  absl::Status Attend() override;
  absl::Status AddBranchAndNorm(LayerWeight norm, Activations out) override;
  absl::Status GatedDown() override;
  absl::Status AddBranch() override;
  absl::Status EndLayer(int64_t layer) override;
  absl::Status Logits() override;

  // Once the stream has finished: each operation's device time and calls added to `profile`.
  absl::Status AddTo(std::map<std::string, DeviceWork::OpTime>& profile) const;

 private:
  template <typename Op>
  absl::Status Timed(const char* name, Op op);

  GpuDevice& device_;
  const GpuDevice::Stream stream_;
  std::vector<std::unique_ptr<DeviceEvent>>& events_;
  DecoderOps& ops_;
  // Operation k's name; its events are events_[2k] and events_[2k + 1].
  std::vector<const char*> names_;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_PROFILED_DECODER_OPS_H_
