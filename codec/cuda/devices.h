// The CUDA devices this process can use. No CUDA type appears here: the header compiles without
// the CUDA toolkit, and a CPU-only build has no implementation to link (guard callers with
// DF11_HAVE_CUDA).
#ifndef DF11_CODEC_CUDA_DEVICES_H_
#define DF11_CODEC_CUDA_DEVICES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace df11::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  int multiprocessors = 0;
};

// Every visible device. An empty list (not an error) when the machine has no GPU or no driver;
// kInternal for any other CUDA failure, naming the call.
absl::StatusOr<std::vector<DeviceInfo>> ListDevices();

// The CUDA runtime version this library was built with, e.g. "13.0".
std::string RuntimeVersion();

}  // namespace df11::cuda

#endif  // DF11_CODEC_CUDA_DEVICES_H_
