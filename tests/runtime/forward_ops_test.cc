// The forward pass's operations (daemon/runtime/backends/cuda/forward_ops.h). The reference
// (ReferenceForwardOps) is checked against independent computations: the CPU engine's RoPE, sums
// in double, attention written out position by position over pages out of order. A device's
// operations are then checked against the reference on random inputs of the sizes models use:
// in forward_ops_test, the emulated device's, which run the CUDA kernels' per-thread steps on the
// host (EmulatedForwardOps); in forward_ops_gpu_test (label gpu, CUDA builds), the CUDA kernels
// on a GPU.
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "codec/format.h"
#include "codec/tiled_matrix.h"
#include "daemon/runtime/backends/cuda/forward_reference.h"
#include "daemon/runtime/backends/cuda/gpu_device.h"
#include "daemon/runtime/engine/model_config.h"
#include "daemon/runtime/engine/rotary_embedding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runtime/emulated_gpu_device.h"
#include "tests/testing/status_matchers.h"
#if defined(DF11_TEST_ON_GPU)
#include "codec/cuda/devices.h"
#include "daemon/runtime/backends/cuda/device/cuda_device.h"
#endif

namespace df11::runtime {
namespace {

using format::Bf16ToFloat;

std::vector<uint16_t> RandomBf16(size_t n, uint64_t seed, float stddev = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) x = format::FloatToBf16(normal(rng));
  return v;
}

std::vector<float> ToFloat(const std::vector<uint16_t>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = Bf16ToFloat(v[i]);
  return f;
}

// A KV pool of `pages` pages for one layer-0 sequence, its pages listed out of order.
struct Pages {
  int64_t positions_per_page, kv_heads, head_dim, layers;
  std::vector<uint32_t> order;
  std::vector<char> pool;
  uint64_t page_bytes() const {
    return uint64_t(layers) * 2 * positions_per_page * kv_heads * head_dim * 2 + 64;
  }
  PagedKv For(int64_t layer, const int32_t* first_page, const int32_t* position) {
    return PagedKv{.pool = pool.data(),
                   .page_bytes = page_bytes(),
                   .positions_per_page = positions_per_page,
                   .layer = layer,
                   .kv_heads = kv_heads,
                   .head_dim = head_dim,
                   .pages = order.data(),
                   .row_first_page = first_page,
                   .row_position = position};
  }
};

TEST(ReferenceForwardOpsTest, RopeIsTheEnginesRoundedOnce) {
  for (RopeConfig::Type type : {RopeConfig::Type::kDefault, RopeConfig::Type::kLongRope}) {
    RopeConfig config{.type = type, .theta = 10000.0, .original_max_position_embeddings = 5};
    config.short_factor = {1.0, 1.5, 2.0, 3.0};
    config.long_factor = {2.0, 3.0, 5.0, 7.0};
    config.attention_factor = type == RopeConfig::Type::kLongRope ? 1.2 : 1.0;
    const int64_t heads = 3, d = 12, rotary = 8;
    const RotaryEmbedding rope(config, rotary);
    DF11_ASSERT_OK_AND_ASSIGN(const RopeTable table, RopeTable::Of(rope, rotary));
    const std::vector<int32_t> positions = {0, 4, 5, 77};
    std::vector<uint16_t> x = RandomBf16(positions.size() * heads * d, 7);
    std::vector<float> expected = ToFloat(x);
    for (size_t r = 0; r < positions.size(); ++r) {
      rope.Apply(&expected[r * heads * d], heads, d, positions[r]);
    }
    ReferenceForwardOps ops;
    DF11_ASSERT_OK(
        ops.Rope(x.data(), positions.size(), heads, d, positions.data(), table, nullptr));
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], format::FloatToBf16(expected[i])) << i;
  }
}

TEST(ReferenceForwardOpsTest, LinearAndNormsAgreeWithDoubleSums) {
  const int64_t rows = 3, in = 40, out = 7;
  const std::vector<uint16_t> x = RandomBf16(rows * in, 1), w = RandomBf16(out * in, 2, 0.1f),
                              bias = RandomBf16(out, 3);
  ReferenceForwardOps ops;
  std::vector<float> y(rows * out);
  DF11_ASSERT_OK(
      ops.Linear(x.data(), w.data(), bias.data(), rows, in, out, y.data(), true, nullptr));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = Bf16ToFloat(bias[o]);
      for (int64_t i = 0; i < in; ++i)
        sum += double(Bf16ToFloat(x[r * in + i])) * Bf16ToFloat(w[o * in + i]);
      EXPECT_NEAR(y[r * out + o], sum, 1e-5 * (1 + std::abs(sum)));
    }
  }
  // (1 + w) norms (Gemma): the fp32 and BF16 inputs give the same BF16 rows.
  const std::vector<uint16_t> norm = RandomBf16(in, 4, 0.1f);
  std::vector<uint16_t> from_bf16(rows * in), from_fp32(rows * in);
  const std::vector<float> x32 = ToFloat(x);
  DF11_ASSERT_OK(
      ops.RmsNorm(x.data(), norm.data(), rows, in, 1e-6f, 1.0f, from_bf16.data(), nullptr));
  DF11_ASSERT_OK(ops.FloatRmsNorm(x32.data(), norm.data(), rows, in, 1e-6f, 1.0f, from_fp32.data(),
                                  false, nullptr));
  EXPECT_EQ(from_bf16, from_fp32);
  for (int64_t r = 0; r < rows; ++r) {
    double squares = 0;
    for (int64_t i = 0; i < in; ++i) squares += double(x32[r * in + i]) * x32[r * in + i];
    const double scale = 1 / std::sqrt(squares / in + 1e-6);
    for (int64_t i = 0; i < in; ++i) {
      const double expected = x32[r * in + i] * scale * (1 + Bf16ToFloat(norm[i]));
      EXPECT_NEAR(Bf16ToFloat(from_bf16[r * in + i]), expected, 1e-2 * (1 + std::abs(expected)));
    }
  }
}

// The fused add + norm: the residual stream gets the branch, and the norm is of the new stream,
// against double sums.
TEST(ReferenceForwardOpsTest, AddRmsNormNormalisesTheSum) {
  const int64_t rows = 2, n = 48;
  const std::vector<float> y = ToFloat(RandomBf16(rows * n, 5));
  std::vector<float> x = ToFloat(RandomBf16(rows * n, 6));
  const std::vector<float> x0 = x;
  const std::vector<uint16_t> norm = RandomBf16(n, 7, 0.1f);
  std::vector<uint16_t> out(rows * n);
  ReferenceForwardOps ops;
  DF11_ASSERT_OK(
      ops.AddRmsNorm(x.data(), y.data(), norm.data(), rows, n, 1e-6f, 0.0f, out.data(), nullptr));
  for (int64_t r = 0; r < rows; ++r) {
    double squares = 0;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(x[r * n + i], x0[r * n + i] + y[r * n + i]);
      squares += double(x[r * n + i]) * x[r * n + i];
    }
    const double scale = 1 / std::sqrt(squares / n + 1e-6);
    for (int64_t i = 0; i < n; ++i) {
      const double expected = x[r * n + i] * scale * Bf16ToFloat(norm[i]);
      EXPECT_NEAR(Bf16ToFloat(out[r * n + i]), expected, 1e-2 * (1 + std::abs(expected)));
    }
  }
}

TEST(ReferenceForwardOpsTest, PagedAttentionWithWindowAndSoftCap) {
  // One sequence of 11 positions over pages of 4 (held in pages 5, 2, 0 of the pool), GQA 4/2.
  Pages p{.positions_per_page = 4, .kv_heads = 2, .head_dim = 8, .layers = 2, .order = {5, 2, 0}};
  p.pool.resize(6 * p.page_bytes());
  const int64_t heads = 4, d = 8, positions = 11, layer = 1;
  const std::vector<uint16_t> k = RandomBf16(positions * 2 * d, 11),
                              v = RandomBf16(positions * 2 * d, 12);
  const std::vector<uint16_t> q = RandomBf16(positions * heads * d, 13);
  std::vector<int32_t> first_page(positions, 0), position(positions);
  for (int32_t i = 0; i < positions; ++i) position[i] = i;
  const PagedKv kv = p.For(layer, first_page.data(), position.data());
  ReferenceForwardOps ops;
  DF11_ASSERT_OK(ops.WriteKv(k.data(), v.data(), positions, kv, nullptr));
  const AttentionShape shape{
      .heads = heads, .kv_heads = 2, .head_dim = d, .window = 5, .scale = 0.3f, .softcap = 2.0f};
  std::vector<uint16_t> out(positions * heads * d);
  DF11_ASSERT_OK(ops.Attention(q.data(), positions, shape, kv, out.data(), nullptr));
  for (int64_t r = 0; r < positions; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kvh = h / 2, first = std::max<int64_t>(0, r - 4);
      std::vector<double> weights;
      double total = 0;
      for (int64_t j = first; j <= r; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) {
          dot += double(Bf16ToFloat(q[(r * heads + h) * d + i])) *
                 Bf16ToFloat(k[(j * 2 + kvh) * d + i]);
        }
        const double score = std::tanh(dot * 0.3f / 2.0) * 2.0;
        weights.push_back(std::exp(score));
        total += weights.back();
      }
      for (int64_t i = 0; i < d; ++i) {
        double expected = 0;
        for (int64_t j = first; j <= r; ++j) {
          expected += weights[j - first] / total * Bf16ToFloat(v[(j * 2 + kvh) * d + i]);
        }
        EXPECT_NEAR(Bf16ToFloat(out[(r * heads + h) * d + i]), expected,
                    1e-2 * (1 + std::abs(expected)))
            << "row " << r << " head " << h;
      }
    }
  }
  // Layer 0's planes of the pages are untouched.
  for (uint32_t page : p.order) {
    const char* base = p.pool.data() + page * p.page_bytes();
    EXPECT_TRUE(std::all_of(base, base + kv.KeyOffset(0), [](char c) { return c == 0; }));
  }
}

TEST(ReferenceForwardOpsTest, GatherRowsCopiesEachRowFromItsOffset) {
  ReferenceForwardOps ops;
  const std::vector<uint16_t> base = {10, 11, 12, 13, 14, 15, 16, 17};
  const std::vector<uint64_t> offsets = {6 * 2, 0, 2 * 2};  // bytes
  std::vector<uint16_t> out(6, 0xFFFF);
  DF11_ASSERT_OK(ops.GatherRows(reinterpret_cast<const char*>(base.data()), offsets.data(), 3, 4,
                                out.data(), nullptr));
  EXPECT_EQ(out, (std::vector<uint16_t>{16, 17, 10, 11, 12, 13}));
  EXPECT_EQ(ops.GatherRows(reinterpret_cast<const char*>(base.data()), offsets.data(), 1, 3,
                           out.data(), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceForwardOpsTest, SplitColumnsCopiesEachRange) {
  ReferenceForwardOps ops;
  const std::vector<uint16_t> in = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 2 rows of 5
  std::vector<uint16_t> a(4), b(2, 0xFFFF);
  const ForwardOps::ColumnRange pieces[] = {{0, 2, a.data()}, {3, 1, b.data()}};
  DF11_ASSERT_OK(ops.SplitColumns(in.data(), 2, 5, pieces, nullptr));
  EXPECT_EQ(a, (std::vector<uint16_t>{1, 2, 6, 7}));
  EXPECT_EQ(b, (std::vector<uint16_t>{4, 9}));
  const ForwardOps::ColumnRange outside[] = {{4, 2, a.data()}};
  EXPECT_EQ(ops.SplitColumns(in.data(), 2, 5, outside, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

// A device's operations against the reference, on device copies of the same inputs.
class DeviceForwardOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(DF11_TEST_ON_GPU)
    absl::StatusOr<std::vector<::df11::cuda::DeviceInfo>> devices = ::df11::cuda::ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    ASSERT_FALSE(devices->empty());  // gpu_test_main runs the tests only with a device
    device_ = cuda::OpenDevice(0).value();
#else
    device_ = std::make_unique<::df11::testing::EmulatedGpuDevice>(uint64_t{256} << 20);
#endif
    stream_ = device_->CreateStream().value();
    ASSERT_NE(device_->forward_ops(), nullptr);
    workspace_ = Upload(std::vector<char>(32 << 20));
    DF11_ASSERT_OK(device_->forward_ops()->UseWorkspace(workspace_, 32 << 20));
  }
  void TearDown() override {
    if (device_ == nullptr) return;
    for (void* p : allocations_) device_->Free(p);
    device_->DestroyStream(stream_);
  }
  template <typename T>
  T* Upload(const std::vector<T>& host) {
    void* p = device_->Allocate(std::max<size_t>(1, host.size() * sizeof(T))).value();
    allocations_.push_back(p);
    EXPECT_TRUE(device_->CopyAsync(p, host.data(), host.size() * sizeof(T), stream_).ok());
    return static_cast<T*>(p);
  }
  template <typename T>
  std::vector<T> Download(const T* device, size_t n) {
    std::vector<T> host(n);
    EXPECT_TRUE(device_->CopyAsync(host.data(), device, n * sizeof(T), stream_).ok());
    EXPECT_TRUE(device_->StreamSynchronize(stream_).ok());
    return host;
  }
  // BF16 outputs within two units in the last place of each other, or 1e-3 absolute.
  static void ExpectClose(const std::vector<uint16_t>& gpu, const std::vector<uint16_t>& ref) {
    ASSERT_EQ(gpu.size(), ref.size());
    for (size_t i = 0; i < gpu.size(); ++i) {
      const float a = Bf16ToFloat(gpu[i]), b = Bf16ToFloat(ref[i]);
      EXPECT_LE(std::abs(a - b), std::max(1e-3f, std::abs(b) * (2.0f / 128))) << i;
    }
  }
  std::unique_ptr<GpuDevice> device_;
  GpuDevice::Stream stream_ = nullptr;
  std::vector<void*> allocations_;
  void* workspace_ = nullptr;
  ReferenceForwardOps reference_;
};

// Products with a bias: apart from the other operations, because compute-sanitizer's racecheck
// stops inside cuBLASLt's bias kernel on an H200 (run-gpu-checks.sh leaves this case out of it).
TEST_F(DeviceForwardOpsTest, LinearWithBiasMatchesTheReference) {
  ForwardOps& gpu = *device_->forward_ops();
  for (auto [rows, in, out] :
       {std::array<int64_t, 3>{1, 4096, 1024}, {5, 96, 160}, {64, 512, 96}}) {
    const std::vector<uint16_t> x = RandomBf16(rows * in, 1), w = RandomBf16(out * in, 2, 0.05f),
                                bias = RandomBf16(out, 3);
    std::vector<uint16_t> expected(rows * out);
    DF11_ASSERT_OK(reference_.Linear(x.data(), w.data(), bias.data(), rows, in, out,
                                     expected.data(), false, nullptr));
    uint16_t* y = Upload(std::vector<uint16_t>(rows * out));
    DF11_ASSERT_OK(
        gpu.Linear(Upload(x), Upload(w), Upload(bias), rows, in, out, y, false, stream_));
    ExpectClose(Download(y, rows * out), expected);
  }
}

TEST_F(DeviceForwardOpsTest, NormsRopeAndActivationsMatchTheReference) {
  ForwardOps& gpu = *device_->forward_ops();
  const int64_t rows = 6, n = 4096;
  const std::vector<uint16_t> x = RandomBf16(rows * n, 4), w = RandomBf16(n, 5, 0.1f);
  std::vector<uint16_t> expected(rows * n);
  DF11_ASSERT_OK(
      reference_.RmsNorm(x.data(), w.data(), rows, n, 1e-6f, 1.0f, expected.data(), nullptr));
  uint16_t* y = Upload(std::vector<uint16_t>(rows * n));
  DF11_ASSERT_OK(gpu.RmsNorm(Upload(x), Upload(w), rows, n, 1e-6f, 1.0f, y, stream_));
  ExpectClose(Download(y, rows * n), expected);

  RopeConfig config{.theta = 1e6};
  DF11_ASSERT_OK_AND_ASSIGN(const RopeTable table,
                            RopeTable::Of(RotaryEmbedding(config, 128), 128));
  const std::vector<int32_t> positions = {0, 1, 1000, 4095, 70000, 3};
  std::vector<uint16_t> rotated = RandomBf16(rows * 8 * 128, 6);
  uint16_t* q = Upload(rotated);
  DF11_ASSERT_OK(reference_.Rope(rotated.data(), rows, 8, 128, positions.data(), table, nullptr));
  DF11_ASSERT_OK(gpu.Rope(q, rows, 8, 128, Upload(positions), table, stream_));
  ExpectClose(Download(q, rotated.size()), rotated);

  const std::vector<uint16_t> gate = RandomBf16(rows * n, 7), up = RandomBf16(rows * n, 8);
  for (Activation a : {Activation::kSilu, Activation::kGeluTanh}) {
    DF11_ASSERT_OK(
        reference_.GatedActivation(gate.data(), up.data(), rows * n, a, expected.data(), nullptr));
    DF11_ASSERT_OK(gpu.GatedActivation(Upload(gate), Upload(up), rows * n, a, y, stream_));
    ExpectClose(Download(y, rows * n), expected);
  }
}

TEST_F(DeviceForwardOpsTest, AddRmsNormMatchesTheReference) {
  ForwardOps& gpu = *device_->forward_ops();
  const int64_t rows = 5, n = 4096;
  const std::vector<float> y = ToFloat(RandomBf16(rows * n, 22));
  std::vector<float> x = ToFloat(RandomBf16(rows * n, 23));
  const std::vector<uint16_t> norm = RandomBf16(n, 24, 0.1f);
  float* device_x = Upload(x);
  std::vector<uint16_t> expected(rows * n);
  DF11_ASSERT_OK(reference_.AddRmsNorm(x.data(), y.data(), norm.data(), rows, n, 1e-6f, 1.0f,
                                       expected.data(), nullptr));
  uint16_t* out = Upload(std::vector<uint16_t>(rows * n));
  DF11_ASSERT_OK(
      gpu.AddRmsNorm(device_x, Upload(y), Upload(norm), rows, n, 1e-6f, 1.0f, out, stream_));
  EXPECT_EQ(Download(device_x, x.size()), x);  // the sums, exactly
  ExpectClose(Download(out, expected.size()), expected);
}

TEST_F(DeviceForwardOpsTest, GatherRowsMatchesTheReference) {
  ForwardOps& gpu = *device_->forward_ops();
  const int64_t width = 4096;  // BF16 values of a row
  const std::vector<uint16_t> table = RandomBf16(64 * width, 21);
  const std::vector<uint64_t> offsets = {63 * width * 2, 0, 17 * width * 2, 17 * width * 2};
  std::vector<uint16_t> expected(offsets.size() * width);
  DF11_ASSERT_OK(reference_.GatherRows(reinterpret_cast<const char*>(table.data()),
                                       offsets.data(), 4, width * 2, expected.data(), nullptr));
  uint16_t* out = Upload(std::vector<uint16_t>(expected.size()));
  DF11_ASSERT_OK(gpu.GatherRows(reinterpret_cast<const char*>(Upload(table)), Upload(offsets), 4,
                                width * 2, out, stream_));
  EXPECT_EQ(Download(out, expected.size()), expected);
}

TEST_F(DeviceForwardOpsTest, SplitColumnsAndTiledLinearMatchTheReference) {
  ForwardOps& gpu = *device_->forward_ops();
  const int64_t rows = 3, width = 6144;
  const std::vector<uint16_t> in = RandomBf16(rows * width, 11);
  std::vector<uint16_t> expected(rows * 1024);
  const ForwardOps::ColumnRange host_piece[] = {{4096, 1024, expected.data()}};
  DF11_ASSERT_OK(reference_.SplitColumns(in.data(), rows, width, host_piece, nullptr));
  uint16_t* out = Upload(std::vector<uint16_t>(rows * 1024));
  const ForwardOps::ColumnRange piece[] = {{4096, 1024, out}};
  DF11_ASSERT_OK(gpu.SplitColumns(Upload(in), rows, width, piece, stream_));
  EXPECT_EQ(Download(out, rows * 1024), expected);

  // Two tiled matrices from one input, with and without a bias; BF16 and fp32 outputs.
  const int64_t in_features = 2048;
  std::vector<codec::TiledMatrix> matrices;
  for (int64_t out_features : {1024, 512}) {
    matrices.push_back(codec::TiledMatrix::Build(RandomBf16(out_features * in_features, 12, 0.05f),
                                                 out_features, in_features, nullptr)
                           .value());
  }
  const std::vector<uint16_t> x = RandomBf16(rows * in_features, 13), bias = RandomBf16(1024, 14);
  for (const bool y_fp32 : {false, true}) {
    std::vector<ForwardOps::TiledProduct> host_products, products;
    std::vector<std::vector<char>> host_images;
    std::vector<void*> ys;
    for (size_t i = 0; i < matrices.size(); ++i) {
      const codec::TiledImage image = matrices[i].image();
      std::vector<char> bytes(image.bytes);
      matrices[i].CopyImage(bytes.data());
      const char* device_image = reinterpret_cast<const char*>(Upload(bytes));
      const uint64_t n = rows * image.rows * (y_fp32 ? 4 : 2);
      host_products.push_back(
          {.w = image.View(bytes.data()), .bias = i == 0 ? bias.data() : nullptr, .y = nullptr});
      products.push_back({.w = image.View(device_image),
                          .bias = i == 0 ? Upload(bias) : nullptr,
                          .y = Upload(std::vector<char>(n))});
      host_images.push_back(std::move(bytes));
    }
    std::vector<std::vector<char>> want(matrices.size());
    for (size_t i = 0; i < matrices.size(); ++i) {
      want[i].resize(rows * matrices[i].rows() * (y_fp32 ? 4 : 2));
      host_products[i].y = want[i].data();
    }
    DF11_ASSERT_OK(reference_.TiledLinear(x.data(), rows, host_products, y_fp32, nullptr));
    DF11_ASSERT_OK(gpu.TiledLinear(Upload(x), rows, products, y_fp32, stream_));
    DF11_ASSERT_OK(gpu.CheckTiled(stream_));
    for (size_t i = 0; i < matrices.size(); ++i) {
      const size_t n = rows * matrices[i].rows();
      if (y_fp32) {
        std::vector<float> got = Download(static_cast<const float*>(products[i].y), n), ref(n);
        std::memcpy(ref.data(), want[i].data(), n * 4);
        for (size_t j = 0; j < n; ++j) EXPECT_NEAR(got[j], ref[j], 1e-3 + 1e-3 * std::abs(ref[j]));
      } else {
        std::vector<uint16_t> ref(n);
        std::memcpy(ref.data(), want[i].data(), n * 2);
        ExpectClose(Download(static_cast<const uint16_t*>(products[i].y), n), ref);
      }
    }
  }
}

TEST_F(DeviceForwardOpsTest, PagedAttentionMatchesTheReference) {
  ForwardOps& gpu = *device_->forward_ops();
  for (int64_t d : {64, 128, 256}) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << d);
    // Two sequences: 300 positions (a prefill chunk of its last 40) and a decode step at 99.
    Pages p{.positions_per_page = 16, .kv_heads = 2, .head_dim = d, .layers = 2};
    for (uint32_t i = 0; i < 26; ++i) p.order.push_back((i * 7) % 26);
    p.pool.resize(26 * p.page_bytes());
    std::vector<int32_t> first_page, position;
    for (int32_t i = 0; i < 300; ++i) {
      first_page.push_back(0);
      position.push_back(i);
    }
    first_page.push_back(19);
    position.push_back(99);
    const int64_t rows = static_cast<int64_t>(position.size()), heads = 8;
    const std::vector<uint16_t> k = RandomBf16(rows * 2 * d, 21), v = RandomBf16(rows * 2 * d, 22);
    const std::vector<uint16_t> q = RandomBf16(rows * heads * d, 23, 0.3f);
    for (auto [window, softcap] : {std::pair<int64_t, float>{0, 0.0f}, {33, 30.0f}}) {
      const AttentionShape shape{.heads = heads,
                                 .kv_heads = 2,
                                 .head_dim = d,
                                 .window = window,
                                 .scale = 1.0f / std::sqrt(float(d)),
                                 .softcap = softcap};
      const PagedKv host_kv = p.For(1, first_page.data(), position.data());
      DF11_ASSERT_OK(reference_.WriteKv(k.data(), v.data(), rows, host_kv, nullptr));
      std::vector<uint16_t> expected(rows * heads * d);
      DF11_ASSERT_OK(
          reference_.Attention(q.data(), rows, shape, host_kv, expected.data(), nullptr));
      PagedKv device_kv = host_kv;
      device_kv.pool = Upload(std::vector<char>(p.pool.size()));
      device_kv.pages = Upload(p.order);
      device_kv.row_first_page = Upload(first_page);
      device_kv.row_position = Upload(position);
      DF11_ASSERT_OK(gpu.WriteKv(Upload(k), Upload(v), rows, device_kv, stream_));
      EXPECT_EQ(Download(device_kv.pool, p.pool.size()), p.pool);  // the same bytes written
      uint16_t* out = Upload(std::vector<uint16_t>(expected.size()));
      DF11_ASSERT_OK(gpu.Attention(Upload(q), rows, shape, device_kv, out, stream_));
      ExpectClose(Download(out, expected.size()), expected);
    }
  }
}

// A decode step: one row per sequence, each sequence's pages listed on their own (a DecodeBatch),
// of lengths from one position to many pages, query groups of 4 and 1, with and without a window
// and soft-capping. On a GPU, heads of 128 and 256 without a window are FlashInfer's decode (when
// the build has it); the emulated device checks the batch against the rows and runs the
// project's kernel.
TEST_F(DeviceForwardOpsTest, DecodeStepAttentionMatchesTheReference) {
  ForwardOps& ops = *device_->forward_ops();
  const std::vector<int32_t> lengths = {1, 17, 300, 64, 1000};
  const int64_t per_page = 16, S = static_cast<int64_t>(lengths.size());
  for (int64_t d : {64, 128, 256}) {
    for (auto [heads, kv_heads] : {std::pair<int64_t, int64_t>{8, 2}, {4, 4}}) {
      SCOPED_TRACE(::testing::Message()
                   << "head_dim " << d << ", heads " << heads << "/" << kv_heads);
      Pages p{.positions_per_page = per_page, .kv_heads = kv_heads, .head_dim = d, .layers = 2};
      std::vector<int32_t> indptr = {0}, last_length, first_page, position;
      for (int32_t length : lengths) {
        first_page.push_back(indptr.back());
        position.push_back(length - 1);
        indptr.push_back(indptr.back() + (length + per_page - 1) / per_page);
        last_length.push_back((length - 1) % per_page + 1);
      }
      const auto n_pages = static_cast<uint32_t>(indptr.back());
      for (uint32_t i = 0; i < n_pages; ++i) p.order.push_back((i * 7 + 3) % n_pages);
      const std::vector<uint16_t> values = RandomBf16(n_pages * p.page_bytes() / 2, 41);
      p.pool.resize(n_pages * p.page_bytes());
      std::memcpy(p.pool.data(), values.data(), p.pool.size());
      const std::vector<uint16_t> q = RandomBf16(S * heads * d, 42, 0.3f);
      for (auto [window, softcap] : {std::pair<int64_t, float>{0, 0.0f}, {33, 30.0f}}) {
        const AttentionShape shape{.heads = heads,
                                   .kv_heads = kv_heads,
                                   .head_dim = d,
                                   .window = window,
                                   .scale = 1.0f / std::sqrt(float(d)),
                                   .softcap = softcap};
        const PagedKv host_kv = p.For(1, first_page.data(), position.data());
        std::vector<uint16_t> expected(S * heads * d);
        DF11_ASSERT_OK(reference_.Attention(q.data(), S, shape, host_kv, expected.data(), nullptr));
        PagedKv device_kv = host_kv;
        device_kv.pool = Upload(p.pool);
        device_kv.pages = Upload(p.order);
        device_kv.row_first_page = Upload(first_page);
        device_kv.row_position = Upload(position);
        device_kv.page_indptr = Upload(indptr);
        device_kv.last_page_length = Upload(last_length);
        const DecodeBatch batch{.sequences = S, .page_indptr = indptr.data()};
        DF11_ASSERT_OK(ops.PlanAttention(batch, shape, per_page, stream_));
        uint16_t* out = Upload(std::vector<uint16_t>(expected.size()));
        DF11_ASSERT_OK(ops.Attention(Upload(q), S, shape, device_kv, out, stream_));
        ExpectClose(Download(out, expected.size()), expected);
        // A pass that is no decode step plans nothing.
        DF11_ASSERT_OK(ops.PlanAttention(DecodeBatch{}, shape, per_page, stream_));
      }
    }
  }
}

// The fused head preparation against RmsNorm, Rope and WriteKv of the reference, with and without
// q/k norms, partial rotary dimensions and head sizes up to 256.
TEST_F(DeviceForwardOpsTest, PrepareHeadsAndStoreKvMatchesTheReference) {
  ForwardOps& gpu = *device_->forward_ops();
  for (auto [d, rotary] : {std::pair<int64_t, int64_t>{64, 64}, {128, 128}, {96, 32}, {256, 256}}) {
    for (const bool norms : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "head_dim " << d << ", norms " << norms);
      Pages p{.positions_per_page = 16, .kv_heads = 2, .head_dim = d, .layers = 2};
      for (uint32_t i = 0; i < 4; ++i) p.order.push_back(3 - i);
      p.pool.resize(4 * p.page_bytes());
      const std::vector<int32_t> first_page = {0, 0, 0, 2}, position = {5, 6, 7, 20};
      const int64_t rows = 4, heads = 8;
      std::vector<uint16_t> q = RandomBf16(rows * heads * d, 31), k = RandomBf16(rows * 2 * d, 32);
      const std::vector<uint16_t> v = RandomBf16(rows * 2 * d, 33);
      const std::vector<uint16_t> q_norm = RandomBf16(d, 34, 0.1f), k_norm = RandomBf16(d, 35, 0.1f);
      DF11_ASSERT_OK_AND_ASSIGN(
          const RopeTable table,
          RopeTable::Of(RotaryEmbedding(RopeConfig{.theta = 1e6}, rotary), rotary));
      uint16_t* device_q = Upload(q);
      uint16_t* device_k = Upload(k);
      PagedKv device_kv = p.For(0, first_page.data(), position.data());
      device_kv.pool = Upload(std::vector<char>(p.pool.size()));
      device_kv.pages = Upload(p.order);
      device_kv.row_first_page = Upload(first_page);
      device_kv.row_position = Upload(position);
      const PagedKv host_kv = p.For(0, first_page.data(), position.data());
      DF11_ASSERT_OK(reference_.PrepareHeadsAndStoreKv(
          q.data(), k.data(), v.data(), rows, heads, norms ? q_norm.data() : nullptr,
          norms ? k_norm.data() : nullptr, 1e-6f, 0.0f, table, host_kv, nullptr));
      DF11_ASSERT_OK(gpu.PrepareHeadsAndStoreKv(
          device_q, device_k, Upload(v), rows, heads, norms ? Upload(q_norm) : nullptr,
          norms ? Upload(k_norm) : nullptr, 1e-6f, 0.0f, table, device_kv, stream_));
      ExpectClose(Download(device_q, q.size()), q);
      ExpectClose(Download(device_k, k.size()), k);
      // The pages hold the keys as k now is on the device, and the values exactly.
      std::vector<char> pool = Download(device_kv.pool, p.pool.size());
      std::vector<uint16_t> stored_k(rows * 2 * d), stored_v(rows * 2 * d);
      PagedKv read_kv = host_kv;
      read_kv.pool = pool.data();
      for (int64_t r = 0; r < rows; ++r) {
        const uint64_t page = p.order[first_page[r] + position[r] / 16];
        const int64_t slot = position[r] % 16;
        std::memcpy(&stored_k[r * 2 * d], pool.data() + page * p.page_bytes() + read_kv.KeyOffset(slot),
                    2 * d * 2);
        std::memcpy(&stored_v[r * 2 * d],
                    pool.data() + page * p.page_bytes() + read_kv.ValueOffset(slot), 2 * d * 2);
      }
      EXPECT_EQ(stored_k, Download(device_k, k.size()));
      EXPECT_EQ(stored_v, v);
    }
  }
}

}  // namespace
}  // namespace df11::runtime
