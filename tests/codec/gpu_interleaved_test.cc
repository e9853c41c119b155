// The GPU decoder of the lane-interleaved layout on a real device (label gpu; skipped without
// one): several units in one launch, random stress from 1 to 10^9 elements with poisoned
// outputs, and inconsistent segment starts. Its steps run on the CPU in interleaved_test.
#include "codec/gpu_interleaved.h"

#include <cstring>
#include <memory>
#include <vector>

#include "codec/cuda/devices.h"
#include "codec/decoder.h"
#include "codec/encoder.h"
#include "codec/synthetic.h"
#include "codec/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/codec/test_data.h"
#include "tests/testing/status_matchers.h"

namespace df11::codec::gpu {
namespace {

using ::df11::testing::DeriveSeed;
using ::df11::testing::SeedTrace;
using ::df11::testing::StatusIs;
using ::df11::testing::TestSeed;
using Region = InterleavedUnit::Region;

class GpuInterleavedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<cuda::DeviceInfo>> devices = cuda::ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    ASSERT_FALSE(devices->empty());  // gpu_test_main runs the tests only with a device
    free_bytes_ = devices->front().free_bytes;
  }
  uint64_t free_bytes_ = 0;
  ThreadPool pool_{0};
};

// `values` as a DF11 unit re-encoded in the interleaved layout, rows of `row_length` (the last
// row shorter), owning everything the layout points into.
struct Interleaved {
  Interleaved(std::vector<uint16_t> v, int64_t row_length, ThreadPool& pool,
              size_t segment_elements = InterleavedUnit::kSegmentElements)
      : values(std::move(v)) {
    const std::span<const uint16_t> part(values);
    encoded = EncodeUnit(std::span(&part, 1)).value();
    unit = std::make_unique<Unit>(Unit::Validate(encoded.tensors(), "unit").value());
    decoder = std::make_unique<UnitDecoder>(*unit);
    const int64_t n = static_cast<int64_t>(values.size());
    std::vector<Region> regions;
    if (n / row_length > 0)
      regions.push_back({.first = 0, .rows = n / row_length, .row_length = row_length});
    if (n % row_length > 0) {
      regions.push_back({.first = static_cast<size_t>(n / row_length * row_length),
                         .rows = 1,
                         .row_length = n % row_length});
    }
    layout = std::make_unique<InterleavedUnit>(
        InterleavedUnit::Build(*decoder, std::move(regions), &pool, segment_elements).value());
  }
  std::vector<uint16_t> values;
  EncodedUnit encoded;
  std::unique_ptr<Unit> unit;
  std::unique_ptr<UnitDecoder> decoder;
  std::unique_ptr<InterleavedUnit> layout;
};

// Decodes the views in one launch into poisoned outputs and checks each against its values.
void ExpectDecodesInOneLaunch(const std::vector<const Interleaved*>& units) {
  std::vector<DeviceInterleavedUnit> device_units;
  std::vector<DeviceBuffer> outs;
  std::vector<InterleavedView> views;
  for (const Interleaved* u : units) {
    DF11_ASSERT_OK_AND_ASSIGN(DeviceInterleavedUnit d, DeviceInterleavedUnit::Upload(*u->layout));
    DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer out, DeviceBuffer::Allocate(2 * u->values.size() + 2));
    DF11_ASSERT_OK(out.Fill(0xFF));
    views.push_back(d.view(static_cast<uint16_t*>(out.data())));
    device_units.push_back(std::move(d));
    outs.push_back(std::move(out));
  }
  DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer workspace,
                            DeviceBuffer::Allocate(InterleavedWorkspaceBytes(views.size())));
  DF11_ASSERT_OK(DecodeInterleaved(views, workspace.data(), workspace.size(), nullptr));
  DF11_ASSERT_OK(CheckDecoded(workspace.data(), nullptr));
  for (size_t i = 0; i < units.size(); ++i) {
    std::vector<uint16_t> out(units[i]->values.size() + 1);
    DF11_ASSERT_OK(outs[i].CopyToHost(out.data(), 2 * out.size()));
    EXPECT_EQ(out.back(), 0xFFFF) << "unit " << i << " wrote past its end";
    out.pop_back();
    EXPECT_TRUE(out == units[i]->values) << "unit " << i;
  }
}

TEST_F(GpuInterleavedTest, SeveralUnitsInOneLaunch) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  // Odd row lengths put segments at odd elements (no paired stores); uniform exponents escape.
  const Interleaved a(NormalBf16(DeriveSeed(seed, 1), 0.02f, 5), 5, pool_);
  const Interleaved b(NormalBf16(DeriveSeed(seed, 2), 0.02f, 100000), 999, pool_);
  const Interleaved c(::df11::testing::UniformCodableBf16(DeriveSeed(seed, 3), 3 * 32768 + 17),
                      4096, pool_);
  const Interleaved d(NormalBf16(DeriveSeed(seed, 4), 0.02f, 2000000), 4096, pool_);
  const Interleaved e(NormalBf16(DeriveSeed(seed, 5), 0.02f, 40000), 40000, pool_);
  // Short segments (the benchmark compares segment sizes): one row each, or a few.
  const Interleaved f(NormalBf16(DeriveSeed(seed, 6), 0.02f, 300000), 1000, pool_, 4096);
  const Interleaved g(NormalBf16(DeriveSeed(seed, 7), 0.02f, 300001), 999, pool_, 64);
  ExpectDecodesInOneLaunch({&a, &b, &c, &d, &e, &f, &g});
}

TEST_F(GpuInterleavedTest, RandomStressFromOneElementToABillion) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const size_t sizes[] = {1,    2,     3,       63,         64,          65,
                          1000, 32768, 1 << 20, 16'000'000, 200'000'000, 1'000'000'000};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    const size_t n = sizes[i];
    if (uint64_t{n} * 6 > free_bytes_) continue;  // layout, output and copies, with room
    SCOPED_TRACE(::testing::Message() << n << " elements");
    const uint64_t s = DeriveSeed(seed, 1000 + i);
    // Uniform exponents are DF11-codable only in quantity (see gpu_decoder_test).
    std::vector<uint16_t> input = n >= 32768 && n <= 16'000'000
                                      ? ::df11::testing::UniformCodableBf16(s, n)
                                      : NormalBf16(s, 0.02f, n);
    const Interleaved u(std::move(input), 4096, pool_);
    ExpectDecodesInOneLaunch({&u});
  }
}

TEST_F(GpuInterleavedTest, InconsistentSegmentStartsAreDataLoss) {
  const Interleaved u(::df11::testing::UniformCodableBf16(TestSeed(), 200000), 10000, pool_);
  DF11_ASSERT_OK_AND_ASSIGN(DeviceInterleavedUnit d, DeviceInterleavedUnit::Upload(*u.layout));
  std::vector<InterleavedSegment> segments = u.layout->GpuSegments();
  ASSERT_GE(segments.size(), 4u);
  segments[2].word -= 1;
  DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer bad,
                            DeviceBuffer::Allocate(segments.size() * sizeof(InterleavedSegment)));
  DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer workspace,
                            DeviceBuffer::Allocate(InterleavedWorkspaceBytes(1)));
  DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer out, DeviceBuffer::Allocate(2 * u.values.size()));
  InterleavedView view = d.view(static_cast<uint16_t*>(out.data()));
  // Sound first, with and without output; then the bad starts, from a copy of the segment table.
  DF11_ASSERT_OK(
      DecodeInterleaved(std::span(&view, 1), workspace.data(), workspace.size(), nullptr));
  DF11_ASSERT_OK(CheckDecoded(workspace.data(), nullptr));
  InterleavedView check = d.view(nullptr);
  DF11_ASSERT_OK(
      DecodeInterleaved(std::span(&check, 1), workspace.data(), workspace.size(), nullptr));
  DF11_ASSERT_OK(CheckDecoded(workspace.data(), nullptr));
  DF11_ASSERT_OK(bad.CopyFromHost(segments.data(), bad.size()));
  view.segments = static_cast<const InterleavedSegment*>(bad.data());
  check.segments = view.segments;
  DF11_ASSERT_OK(
      DecodeInterleaved(std::span(&view, 1), workspace.data(), workspace.size(), nullptr));
  EXPECT_THAT(CheckDecoded(workspace.data(), nullptr), StatusIs(absl::StatusCode::kDataLoss));
  DF11_ASSERT_OK(
      DecodeInterleaved(std::span(&check, 1), workspace.data(), workspace.size(), nullptr));
  EXPECT_THAT(CheckDecoded(workspace.data(), nullptr), StatusIs(absl::StatusCode::kDataLoss));
}

TEST_F(GpuInterleavedTest, RefusesBadLaunches) {
  DF11_ASSERT_OK_AND_ASSIGN(
      DeviceBuffer workspace,
      DeviceBuffer::Allocate(InterleavedWorkspaceBytes(kMaxUnitsPerLaunch + 1)));
  EXPECT_THAT(DecodeInterleaved({}, workspace.data(), workspace.size(), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<InterleavedView> many(kMaxUnitsPerLaunch + 1, InterleavedView{});
  EXPECT_THAT(DecodeInterleaved(many, workspace.data(), workspace.size(), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DecodeInterleaved(std::span(many.data(), 2), workspace.data(), 16, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace df11::codec::gpu
