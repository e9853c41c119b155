// The GPU decoder on a real device (label gpu; skipped without one): several units in one launch,
// random stress from 1 to 10^9 elements with poisoned outputs, and corrupt layouts. The corpus of
// decoder_equivalence_test also runs through the kernel there.
#include <cstring>
#include <vector>

#include "codec/cuda/device_unit.h"
#include "codec/cuda/devices.h"
#include "codec/decoder.h"
#include "codec/encoder.h"
#include "codec/gpu_decoder.h"
#include "codec/gpu_layout.h"
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

class GpuDecoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<cuda::DeviceInfo>> devices = cuda::ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    ASSERT_FALSE(devices->empty());  // gpu_test_main runs the tests only with a device
    free_bytes_ = devices->front().free_bytes;
  }
  uint64_t free_bytes_ = 0;
};

struct Encoded {
  std::vector<uint16_t> input;
  EncodedUnit unit;
};

Encoded EncodeNormal(uint64_t seed, size_t n) {
  Encoded e{NormalBf16(seed, 0.02f, n), {}};
  const std::span<const uint16_t> part(e.input);
  e.unit = EncodeUnit(std::span(&part, 1)).value();
  return e;
}

TEST_F(GpuDecoderTest, SeveralUnitsInOneLaunch) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const size_t sizes[] = {1, 4097, 100000, 3 * 32768 + 17, 2000000};
  std::vector<Encoded> encoded;
  std::vector<Unit> units;
  std::vector<DeviceUnit> device_units;
  std::vector<DeviceBuffer> outs;
  std::vector<UnitView> views;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    encoded.push_back(EncodeNormal(DeriveSeed(seed, i), sizes[i]));
  }
  for (Encoded& e : encoded) {
    DF11_ASSERT_OK_AND_ASSIGN(Unit u, Unit::Validate(e.unit.tensors(), "unit"));
    units.push_back(std::move(u));
  }
  for (const Unit& u : units) {
    DF11_ASSERT_OK_AND_ASSIGN(GpuLayout layout, BuildGpuLayout(u, nullptr));
    DF11_ASSERT_OK_AND_ASSIGN(DeviceUnit d, DeviceUnit::Upload(u, layout));
    DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer out, DeviceBuffer::Allocate(2 * u.num_elements()));
    DF11_ASSERT_OK(out.Fill(0xFF));
    views.push_back(d.view(static_cast<uint16_t*>(out.data())));
    device_units.push_back(std::move(d));
    outs.push_back(std::move(out));
  }
  DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer workspace,
                            DeviceBuffer::Allocate(DecodeWorkspaceBytes(views.size())));
  DF11_ASSERT_OK(DecodeUnits(views, workspace.data(), workspace.size(), nullptr));
  DF11_ASSERT_OK(CheckDecoded(workspace.data(), nullptr));
  for (size_t i = 0; i < units.size(); ++i) {
    std::vector<uint16_t> out(units[i].num_elements());
    DF11_ASSERT_OK(outs[i].CopyToHost(out.data(), 2 * out.size()));
    EXPECT_EQ(out, encoded[i].input) << "unit " << i;
  }
}

TEST_F(GpuDecoderTest, RandomStressFromOneElementToABillion) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  ThreadPool pool(0);
  const size_t sizes[] = {1, 2, 3, 63, 1000, 32768, 1 << 20, 16'000'000, 200'000'000, 1'000'000'000};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    const size_t n = sizes[i];
    // Input, stream and output on the device, with room to spare.
    if (uint64_t{n} * 5 > free_bytes_) continue;
    SCOPED_TRACE(::testing::Message() << n << " elements");
    const uint64_t s = DeriveSeed(seed, 1000 + i);
    // Uniform exponents are codable only in quantity: a thousand draws over 240 exponents give a
    // lumpy histogram whose deep codes need more LUT rows than DF11 allows (the encoder refuses
    // it, and `df11 compress` would keep such a unit as BF16). Small and huge sizes are normal.
    std::vector<uint16_t> input = n >= 32768 && n <= 100'000'000
                                      ? ::df11::testing::UniformCodableBf16(s, n)
                                      : NormalBf16(s, 0.02f, n);
    const std::span<const uint16_t> part(input);
    DF11_ASSERT_OK_AND_ASSIGN(EncodedUnit encoded, EncodeUnit(std::span(&part, 1)));
    DF11_ASSERT_OK_AND_ASSIGN(Unit unit, Unit::Validate(encoded.tensors(), "stress"));
    std::vector<uint16_t> out(n, 0);
    DF11_ASSERT_OK(DecodeOnDevice(unit, out));  // the device output is poisoned first
    ASSERT_EQ(std::memcmp(out.data(), input.data(), 2 * n), 0);
  }
}

TEST_F(GpuDecoderTest, CorruptSegmentOffsetsAreDataLoss) {
  Encoded e = EncodeNormal(TestSeed(), 50000);
  DF11_ASSERT_OK_AND_ASSIGN(Unit unit, Unit::Validate(e.unit.tensors(), "corrupt"));
  DF11_ASSERT_OK_AND_ASSIGN(GpuLayout layout, BuildGpuLayout(unit, nullptr));
  layout.segment_offsets[5] += 1;  // thread 4 decodes one code too many, thread 5 one too few
  DF11_ASSERT_OK_AND_ASSIGN(DeviceUnit d, DeviceUnit::Upload(unit, layout));
  DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer out, DeviceBuffer::Allocate(2 * unit.num_elements()));
  DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer workspace, DeviceBuffer::Allocate(DecodeWorkspaceBytes(1)));
  const UnitView view = d.view(static_cast<uint16_t*>(out.data()));
  DF11_ASSERT_OK(DecodeUnits(std::span(&view, 1), workspace.data(), workspace.size(), nullptr));
  EXPECT_THAT(CheckDecoded(workspace.data(), nullptr), StatusIs(absl::StatusCode::kDataLoss));
}

// The layout pass on the device gives BuildGpuLayout's offsets, for many units in one launch.
TEST_F(GpuDecoderTest, SegmentOffsetsBuiltOnTheDeviceEqualTheCpuLayout) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const size_t sizes[] = {1, 4097, 100000, 3 * 32768 + 17, 2000000};
  std::vector<Encoded> encoded;
  std::vector<Unit> units;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    encoded.push_back(EncodeNormal(DeriveSeed(seed, 50 + i), sizes[i]));
  }
  for (Encoded& e : encoded) {
    DF11_ASSERT_OK_AND_ASSIGN(Unit u, Unit::Validate(e.unit.tensors(), "unit"));
    units.push_back(std::move(u));
  }
  std::vector<GpuLayout> layouts;
  std::vector<DeviceUnit> device_units;
  std::vector<DeviceBuffer> offsets;
  std::vector<UnitView> views;
  for (const Unit& u : units) {
    DF11_ASSERT_OK_AND_ASSIGN(GpuLayout layout, BuildGpuLayout(u, nullptr));
    DF11_ASSERT_OK_AND_ASSIGN(DeviceUnit d, DeviceUnit::Upload(u, layout));
    DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer o,
                              DeviceBuffer::Allocate(2 * layout.segment_offsets.size()));
    DF11_ASSERT_OK(o.Fill(0xFF));
    UnitView v = d.view(nullptr);
    v.segment_offsets = static_cast<const uint16_t*>(o.data());
    views.push_back(v);
    layouts.push_back(std::move(layout));
    device_units.push_back(std::move(d));
    offsets.push_back(std::move(o));
  }
  DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer workspace,
                            DeviceBuffer::Allocate(DecodeWorkspaceBytes(views.size())));
  DF11_ASSERT_OK(BuildSegmentOffsets(views, workspace.data(), workspace.size(), nullptr));
  DF11_ASSERT_OK(CheckDecoded(workspace.data(), nullptr));
  for (size_t i = 0; i < units.size(); ++i) {
    std::vector<uint16_t> built(layouts[i].segment_offsets.size());
    DF11_ASSERT_OK(offsets[i].CopyToHost(built.data(), 2 * built.size()));
    EXPECT_EQ(built, layouts[i].segment_offsets) << "unit " << i;
  }
  // A check-only decode (no output) with the device-built offsets passes.
  DF11_ASSERT_OK(DecodeUnits(views, workspace.data(), workspace.size(), nullptr));
  DF11_EXPECT_OK(CheckDecoded(workspace.data(), nullptr));
}

// Overwritten codes are found by the layout pass or by the check-only decode after it.
TEST_F(GpuDecoderTest, OverwrittenCodesAreDataLossOnTheDevice) {
  Encoded e = EncodeNormal(TestSeed(), 200000);
  for (size_t i = 1000; i < 3000; ++i) e.unit.encoded_exponent[i] = 0xFF;
  DF11_ASSERT_OK_AND_ASSIGN(Unit unit, Unit::Validate(e.unit.tensors(), "corrupt"));
  GpuLayout layout;
  layout.table = BuildDecodeTable(unit);
  layout.segment_offsets.assign(unit.num_blocks() * kSegmentsPerBlock, 0);
  DF11_ASSERT_OK_AND_ASSIGN(DeviceUnit d, DeviceUnit::Upload(unit, layout));
  DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer workspace,
                            DeviceBuffer::Allocate(DecodeWorkspaceBytes(1)));
  const UnitView view = d.view(nullptr);
  DF11_ASSERT_OK(
      BuildSegmentOffsets(std::span(&view, 1), workspace.data(), workspace.size(), nullptr));
  absl::Status found = CheckDecoded(workspace.data(), nullptr);
  if (found.ok()) {
    DF11_ASSERT_OK(DecodeUnits(std::span(&view, 1), workspace.data(), workspace.size(), nullptr));
    found = CheckDecoded(workspace.data(), nullptr);
  }
  EXPECT_THAT(found, StatusIs(absl::StatusCode::kDataLoss));
}

TEST_F(GpuDecoderTest, SmallWorkspaceIsInvalidArgument) {
  const UnitView view{};
  DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer workspace, DeviceBuffer::Allocate(8));
  EXPECT_THAT(DecodeUnits(std::span(&view, 1), workspace.data(), workspace.size(), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace df11::codec::gpu
