// The CUDA device list (label gpu): skipped on machines without a GPU, where the same call must
// still succeed with an empty list.
#include "codec/cuda/devices.h"

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace df11::cuda {
namespace {

TEST(CudaDevicesTest, ListsHopperClassDevices) {
  DF11_ASSERT_OK_AND_ASSIGN(std::vector<DeviceInfo> devices, ListDevices());
  ASSERT_FALSE(devices.empty());  // gpu_test_main runs the tests only with a device
  for (const DeviceInfo& d : devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_bytes, 0u);
    EXPECT_LE(d.free_bytes, d.total_bytes);
    EXPECT_GT(d.multiprocessors, 0);
  }
}

}  // namespace
}  // namespace df11::cuda
