// RAII over a GpuDevice's opaque stream and event handles.
//
//   DF11_ASSIGN_OR_RETURN(std::unique_ptr<DeviceStream> stream, DeviceStream::Create(device));
//   DF11_RETURN_IF_ERROR(device.CopyAsync(dst, src, bytes, stream->get()));
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_GPU_HANDLES_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_GPU_HANDLES_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/runtime/backends/cuda/gpu_device.h"

namespace df11::runtime {

class DeviceStream {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceStream>> Create(GpuDevice& device) {
    absl::StatusOr<GpuDevice::Stream> s = device.CreateStream();
    if (!s.ok()) return s.status();
    return std::unique_ptr<DeviceStream>(new DeviceStream(device, *s));
  }
  ~DeviceStream() { device_.DestroyStream(handle_); }
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  GpuDevice::Stream get() const { return handle_; }

 private:
  DeviceStream(GpuDevice& device, GpuDevice::Stream handle) : device_(device), handle_(handle) {}
  GpuDevice& device_;
  const GpuDevice::Stream handle_;
};

class DeviceEvent {
 public:
  // `timing`: the event also records when it was reached (GpuDevice::ElapsedSeconds).
  static absl::StatusOr<std::unique_ptr<DeviceEvent>> Create(GpuDevice& device,
                                                             bool timing = false) {
    absl::StatusOr<GpuDevice::Event> e = timing ? device.CreateTimingEvent() : device.CreateEvent();
    if (!e.ok()) return e.status();
    return std::unique_ptr<DeviceEvent>(new DeviceEvent(device, *e));
  }
  ~DeviceEvent() { device_.DestroyEvent(handle_); }
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;
  GpuDevice::Event get() const { return handle_; }

 private:
  DeviceEvent(GpuDevice& device, GpuDevice::Event handle) : device_(device), handle_(handle) {}
  GpuDevice& device_;
  const GpuDevice::Event handle_;
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_GPU_HANDLES_H_
