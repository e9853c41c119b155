// The GPU decoder of the lane-stream layout on a real device (label gpu): bit-exact against the
// values (and so the CPU decoder) on LLM-like, escape-heavy and every-pattern weights, sizes that
// end inside a group and a segment, several units and segment ranges in one launch, random stress
// up to 10^9 weights with poisoned outputs; corrupt words are kDataLoss; bad launches refused;
// the fused product against its steps run on the host.
// Its steps run on the CPU in lane_unit_test.
#include "codec/gpu_lane.h"

#include <vector>

#include "codec/cuda/devices.h"
#include "codec/synthetic.h"
#include "codec/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/codec/test_data.h"
#include "tests/testing/status_matchers.h"

namespace df11::codec::gpu {
namespace {

using ::df11::testing::StatusIs;
using ::df11::testing::TestSeed;

class GpuLaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<cuda::DeviceInfo>> devices = cuda::ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    ASSERT_FALSE(devices->empty());  // gpu_test_main runs the tests only with a device
    free_bytes_ = devices->front().free_bytes;
    DF11_ASSERT_OK_AND_ASSIGN(workspace_, DeviceBuffer::Allocate(LaneWorkspaceBytes()));
  }

  // Decodes `views` in one launch into poisoned outputs (out[i] for view i) and checks each.
  void ExpectDecodes(std::span<const LaneView> views,
                     const std::vector<std::vector<uint16_t>>& expected) {
    DF11_ASSERT_OK(DecodeLanes(views, workspace_.data(), workspace_.size(), nullptr));
    DF11_ASSERT_OK(CheckDecoded(workspace_.data(), nullptr));
    for (size_t i = 0; i < views.size(); ++i) {
      std::vector<uint16_t> got(expected[i].size());
      DF11_ASSERT_OK(outs_[i].CopyToHost(got.data(), got.size() * 2));
      EXPECT_EQ(got, expected[i]) << "view " << i;
    }
  }
  uint16_t* NewOutput(size_t n) {
    outs_.push_back(DeviceBuffer::Allocate(2 * n + 16).value());
    EXPECT_TRUE(outs_.back().Fill(0xFF).ok());
    return static_cast<uint16_t*>(outs_.back().data());
  }

  uint64_t free_bytes_ = 0;
  DeviceBuffer workspace_;
  std::vector<DeviceBuffer> outs_;
  ThreadPool pool_{0};
};

TEST_F(GpuLaneTest, SeveralUnitsAndRangesInOneLaunchDecodeBitExact) {
  const uint64_t seed = TestSeed();
  std::vector<std::vector<uint16_t>> inputs = {
      ::df11::testing::NormalBf16(seed, 0.02f, 3 * kLaneSegment),
      ::df11::testing::NormalBf16(seed + 1, 0.02f, 40000),  // ends inside a segment
      ::df11::testing::NormalBf16(seed + 2, 0.02f, 8197),   // ends inside a group
      ::df11::testing::Bf16WithExponentCounts(
          seed, ::df11::testing::HeavyPlusSingletonsCounts(143, 100000)),  // escapes
      ::df11::testing::UniformCodableBf16(seed, 50000)};
  std::vector<LaneUnit> units;
  std::vector<DeviceLaneUnit> device;
  std::vector<LaneView> views;
  std::vector<std::vector<uint16_t>> expected;
  for (const std::vector<uint16_t>& in : inputs) {
    units.push_back(LaneUnit::Build(in, &pool_).value());
    device.push_back(DeviceLaneUnit::Upload(units.back()).value());
    views.push_back(device.back().view(NewOutput(in.size())));
    expected.push_back(in);
  }
  // Segments 1.. of the first unit, into an output of their own.
  LaneView range = device[0].view(NewOutput(2 * kLaneSegment));
  range.first_segment = 1;
  range.n_segments = 2;
  views.push_back(range);
  expected.emplace_back(inputs[0].begin() + kLaneSegment, inputs[0].end());
  ExpectDecodes(views, expected);
}

TEST_F(GpuLaneTest, RandomStressUpTo1e9WeightsWithPoisonedOutputs) {
  const uint64_t seed = TestSeed();
  for (uint64_t n : {uint64_t{1}, uint64_t{255}, uint64_t{1} << 20, uint64_t{123456789},
                     uint64_t{1000000000}}) {
    if (4 * n + (64 << 20) > free_bytes_) continue;  // the values, the output and the layout
    SCOPED_TRACE(::testing::Message() << n << " weights");
    std::vector<uint16_t> values = NormalBf16(seed + n, 0.02f, n);
    const LaneUnit u = LaneUnit::Build(values, &pool_).value();
    const DeviceLaneUnit d = DeviceLaneUnit::Upload(u).value();
    outs_.clear();
    const LaneView view = d.view(NewOutput(n));
    std::vector<std::vector<uint16_t>> expected;
    expected.push_back(std::move(values));
    ExpectDecodes(std::span(&view, 1), expected);
  }
}

TEST_F(GpuLaneTest, CorruptWordsAreDataLoss) {
  std::vector<uint16_t> values = ::df11::testing::NormalBf16(TestSeed(), 0.02f, 2 * kLaneSegment);
  LaneUnit u = LaneUnit::Build(values, nullptr).value();
  auto& words = const_cast<std::vector<uint32_t>&>(u.words());
  std::fill(words.begin(), words.begin() + u.segment_words()[1], 0xFFFFFFFFu);
  ASSERT_FALSE(DecodeLaneView(u.view(nullptr)));  // the steps on the CPU say so too
  const DeviceLaneUnit d = DeviceLaneUnit::Upload(u).value();
  const LaneView view = d.view(NewOutput(values.size()));
  DF11_ASSERT_OK(DecodeLanes(std::span(&view, 1), workspace_.data(), workspace_.size(), nullptr));
  EXPECT_THAT(CheckDecoded(workspace_.data(), nullptr),
              StatusIs(absl::StatusCode::kDataLoss));
}

// The fused product on the device gives what its steps give on the host, bit for bit: q, k and v
// of a Qwen3-8B layer in one launch (one unit, one input), gate and up, and down (rows across
// segments), for 1 to 8 columns, fp32 and BF16 outputs, with and without a bias.
TEST_F(GpuLaneTest, FusedProductsMatchTheirStepsBitForBit) {
  const uint64_t seed = TestSeed();
  struct Matrix {
    uint32_t rows, cols;
  };
  const std::vector<std::vector<Matrix>> groups = {
      {{4096, 4096}, {1024, 4096}, {1024, 4096}}, {{12288, 4096}, {12288, 4096}}, {{4096, 12288}}};
  for (const std::vector<Matrix>& group : groups) {
    std::vector<uint16_t> values;
    std::vector<uint64_t> firsts;
    for (const Matrix& m : group) {
      firsts.push_back(values.size());
      const std::vector<uint16_t> w =
          NormalBf16(seed + values.size(), 0.02f, uint64_t{m.rows} * m.cols);
      values.insert(values.end(), w.begin(), w.end());
    }
    const LaneUnit u = LaneUnit::Build(values, &pool_).value();
    const DeviceLaneUnit d = DeviceLaneUnit::Upload(u).value();
    const uint32_t cols = group[0].cols;
    const std::vector<uint16_t> x = NormalBf16(seed + 5, 1.0f, 8 * cols);
    const std::vector<uint16_t> bias = NormalBf16(seed + 6, 0.5f, group[0].rows);
    DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer device_x, DeviceBuffer::Allocate(x.size() * 2));
    DF11_ASSERT_OK(device_x.CopyFromHost(x.data(), x.size() * 2));
    DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer device_bias, DeviceBuffer::Allocate(bias.size() * 2));
    DF11_ASSERT_OK(device_bias.CopyFromHost(bias.data(), bias.size() * 2));
    for (int columns : {1, 3, 8}) {
      for (const bool y_fp32 : {true, false}) {
        SCOPED_TRACE(::testing::Message() << group.size() << " products of " << cols
                                          << " columns, x of " << columns << ", fp32 " << y_fp32);
        const int bytes = y_fp32 ? 4 : 2;
        std::vector<LaneProduct> host, device;
        std::vector<std::vector<char>> want(group.size());
        outs_.clear();
        for (size_t i = 0; i < group.size(); ++i) {
          want[i].resize(uint64_t{group[i].rows} * columns * bytes);
          const uint16_t* b = i == 0 ? bias.data() : nullptr;
          host.push_back({.unit = u.view(nullptr),
                          .first_element = firsts[i],
                          .rows = group[i].rows,
                          .cols = cols,
                          .bias = b,
                          .y = want[i].data()});
          LaneProduct p = host.back();
          p.unit = d.view(nullptr);
          p.bias = i == 0 ? static_cast<const uint16_t*>(device_bias.data()) : nullptr;
          p.y = NewOutput(uint64_t{group[i].rows} * columns * bytes / 2);
          device.push_back(p);
        }
        ASSERT_EQ(MultiplyLaneProducts(host, x.data(), columns, y_fp32).value_or(false), true);
        DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer workspace,
                                  DeviceBuffer::Allocate(LaneGemvWorkspaceBytes(device, columns)));
        DF11_ASSERT_OK(LaneGemv(device, static_cast<const uint16_t*>(device_x.data()), columns,
                                y_fp32, workspace.data(), workspace.size(), nullptr));
        DF11_ASSERT_OK(CheckDecoded(workspace.data(), nullptr));
        for (size_t i = 0; i < group.size(); ++i) {
          std::vector<char> got(want[i].size());
          DF11_ASSERT_OK(outs_[i].CopyToHost(got.data(), got.size()));
          EXPECT_TRUE(got == want[i]) << "product " << i;
        }
      }
    }
  }
}

TEST_F(GpuLaneTest, RefusesBadLaunches) {
  std::vector<uint16_t> values = ::df11::testing::NormalBf16(TestSeed(), 0.02f, 1000);
  const DeviceLaneUnit d = DeviceLaneUnit::Upload(LaneUnit::Build(values, nullptr).value()).value();
  EXPECT_THAT(DecodeLanes({}, workspace_.data(), workspace_.size(), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const LaneView misaligned = d.view(NewOutput(values.size()) + 1);
  EXPECT_THAT(DecodeLanes(std::span(&misaligned, 1), workspace_.data(), workspace_.size(), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<LaneView> many(kMaxLaneViews + 1, d.view(nullptr));
  EXPECT_THAT(DecodeLanes(many, workspace_.data(), workspace_.size(), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DecodeLanes(std::span(&misaligned, 1), workspace_.data(), 0, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace df11::codec::gpu
