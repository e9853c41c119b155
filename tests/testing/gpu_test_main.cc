// main() of the programs labelled gpu: without a CUDA device the whole program is skipped by its
// exit status, 77, which ctest reports as a skip (SKIP_RETURN_CODE). With a device every test
// runs and none may skip for want of one, so a real GPU can never hide a failure behind a skip.
#include <cstdio>

#include "codec/cuda/devices.h"
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const absl::StatusOr<std::vector<df11::cuda::DeviceInfo>> devices = df11::cuda::ListDevices();
  if (!devices.ok()) {
    std::fprintf(stderr, "listing CUDA devices: %s\n", devices.status().ToString().c_str());
    return 1;
  }
  if (devices->empty()) {
    std::printf("no CUDA device: every test of this program is skipped (exit status 77)\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
