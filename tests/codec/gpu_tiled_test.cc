// The kernels of codec::TiledMatrix on a real device (label gpu; skipped without one): the
// standalone decoder bit for bit, and the fused product against a float64 reference and against
// cuBLAS on the decoded matrix, for 1 to 8 columns, BF16 or fp32 X and Y; determinism, column
// independence, several matrices per launch, and an inconsistent index. Their steps run on the CPU
// in tiled_matrix_test.
#include "codec/gpu_tiled.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "codec/cuda/devices.h"
#include "gtest/gtest.h"
#include "tests/codec/test_data.h"
#include "tests/testing/status_matchers.h"

namespace df11::codec::gpu {
namespace {

using ::df11::testing::StatusIs;
using ::df11::testing::TestSeed;

double Bf16Value(uint16_t bits) {
  const uint32_t u = uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

class GpuTiledTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<cuda::DeviceInfo>> devices = cuda::ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    ASSERT_FALSE(devices->empty());  // gpu_test_main runs the tests only with a device
    DF11_ASSERT_OK_AND_ASSIGN(workspace_, DeviceBuffer::Allocate(TiledWorkspaceBytes(64)));
  }
  DeviceBuffer workspace_;
  ThreadPool pool_{0};
};

// A matrix of N(0, 0.02^2) weights (or, with `uniform`, of every codable bit pattern: most
// exponents escaped, segments too long for the kernels' stage), tiled and resident.
struct Resident {
  Resident(int64_t r, int64_t c, uint64_t seed, ThreadPool& pool, bool uniform = false)
      : rows(r),
        cols(c),
        weights(uniform ? ::df11::testing::UniformCodableBf16(seed, r * c)
                        : ::df11::testing::NormalBf16(seed, 0.02f, r * c)) {
    host = std::make_unique<TiledMatrix>(TiledMatrix::Build(weights, r, c, &pool).value());
    device = std::make_unique<DeviceTiledMatrix>(DeviceTiledMatrix::Upload(*host).value());
  }
  int64_t rows, cols;
  std::vector<uint16_t> weights;
  std::unique_ptr<TiledMatrix> host;
  std::unique_ptr<DeviceTiledMatrix> device;
};

template <typename T>
DeviceBuffer Upload(const std::vector<T>& v) {
  DeviceBuffer b = DeviceBuffer::Allocate(v.size() * sizeof(T) + 16).value();
  EXPECT_TRUE(b.CopyFromHost(v.data(), v.size() * sizeof(T)).ok());
  return b;
}

template <typename T>
std::vector<T> Download(const DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  EXPECT_TRUE(b.CopyToHost(v.data(), n * sizeof(T)).ok());
  return v;
}

// The bound on an fp32 sum of K products whose magnitudes add up to `magnitude`: one rounding per
// tensor-core step of 16 and per partial sum.
double Tolerance(int64_t k, double magnitude) {
  return (double(k) / 16 + 16) * std::ldexp(1.0, -23) * magnitude + 1e-30;
}

TEST_F(GpuTiledTest, DecodesSeveralMatricesBitForBitInOneLaunch) {
  // More matrices than one kernel takes (8), the last two with escapes in bulk.
  const std::tuple<int64_t, int64_t, bool> shapes[] = {
      {1024, 4096, false}, {16, 32, false},   {48, 1056, false}, {4096, 12288, false},
      {32, 64, false},     {64, 1024, false}, {16, 4096, false}, {256, 512, false},
      {128, 2048, true},   {16, 32, true}};
  std::vector<std::unique_ptr<Resident>> matrices;
  std::vector<DeviceBuffer> outs;
  std::vector<TiledDecodeView> views;
  uint64_t seed = TestSeed();
  for (auto [rows, cols, uniform] : shapes) {
    matrices.push_back(std::make_unique<Resident>(rows, cols, seed++, pool_, uniform));
    DF11_ASSERT_OK_AND_ASSIGN(DeviceBuffer out, DeviceBuffer::Allocate(2 * rows * cols));
    DF11_ASSERT_OK(out.Fill(0xFF));
    views.push_back({matrices.back()->device->view(), static_cast<uint16_t*>(out.data()),
                     static_cast<uint64_t>(cols)});
    outs.push_back(std::move(out));
  }
  DF11_ASSERT_OK(DecodeTiled(views, workspace_.data(), workspace_.size(), nullptr));
  DF11_ASSERT_OK(CheckDecoded(workspace_.data(), nullptr));
  for (size_t i = 0; i < matrices.size(); ++i) {
    EXPECT_TRUE(Download<uint16_t>(outs[i], matrices[i]->weights.size()) == matrices[i]->weights)
        << "matrix " << i;
  }
}

// Y = W X on the device (n_cols columns, X and Y of the given types) against float64 and, for
// BF16 X, against cuBLAS on the decoded W. Returns Y as fp32.
std::vector<float> CheckProduct(const Resident& m, int n_cols, TiledType x_type, TiledType y_type,
                                void* workspace, size_t workspace_bytes) {
  SCOPED_TRACE(::testing::Message() << m.rows << " x " << m.cols << ", " << n_cols << " columns, X "
                                    << (x_type == TiledType::kBf16 ? "bf16" : "f32") << ", Y "
                                    << (y_type == TiledType::kBf16 ? "bf16" : "f32"));
  const std::vector<uint16_t> xb =
      ::df11::testing::NormalBf16(TestSeed() + 7 * n_cols, 1.0f, n_cols * m.cols);
  std::vector<double> x(xb.size());
  std::vector<float> xf(xb.size());
  for (size_t i = 0; i < xb.size(); ++i) {
    xf[i] = static_cast<float>(Bf16Value(xb[i]) * (1.0 + 0.3 * double(i % 977) / 977.0));
    x[i] = x_type == TiledType::kBf16 ? Bf16Value(xb[i]) : double(xf[i]);
  }
  DeviceBuffer dx = x_type == TiledType::kBf16 ? Upload(xb) : Upload(xf);
  DeviceBuffer dy = DeviceBuffer::Allocate(4 * n_cols * m.rows).value();
  EXPECT_TRUE(dy.Fill(0xFF).ok());
  const TiledGemvView view{m.device->view(), dx.data(), dy.data(), static_cast<uint64_t>(m.cols),
                           static_cast<uint64_t>(m.rows)};
  EXPECT_TRUE(
      TiledGemv(std::span(&view, 1), n_cols, x_type, y_type, workspace, workspace_bytes, nullptr)
          .ok());
  EXPECT_TRUE(CheckDecoded(workspace, nullptr).ok());
  std::vector<float> y(n_cols * m.rows);
  if (y_type == TiledType::kF32) {
    y = Download<float>(dy, y.size());
  } else {
    const std::vector<uint16_t> yb = Download<uint16_t>(dy, y.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(Bf16Value(yb[i]));
  }

  // cuBLAS on the decoded matrix (BF16 X only: it takes BF16 operands).
  std::vector<float> cublas_y;
  if (x_type == TiledType::kBf16) {
    DeviceBuffer w = DeviceBuffer::Allocate(2 * m.rows * m.cols).value();
    const TiledDecodeView dv{m.device->view(), static_cast<uint16_t*>(w.data()),
                             static_cast<uint64_t>(m.cols)};
    EXPECT_TRUE(DecodeTiled(std::span(&dv, 1), workspace, workspace_bytes, nullptr).ok());
    DeviceBuffer cy = DeviceBuffer::Allocate(4 * n_cols * m.rows).value();
    cublasHandle_t handle;
    EXPECT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
    const float alpha = 1, beta = 0;
    EXPECT_EQ(
        cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(m.rows), n_cols, int(m.cols), &alpha,
                     w.data(), CUDA_R_16BF, int(m.cols), dx.data(), CUDA_R_16BF, int(m.cols), &beta,
                     cy.data(), CUDA_R_32F, int(m.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cublasDestroy(handle);
    cublas_y = Download<float>(cy, n_cols * m.rows);
  }

  int bad = 0;
  for (int n = 0; n < n_cols; ++n) {
    for (int64_t r = 0; r < m.rows && bad < 10; ++r) {
      double want = 0, magnitude = 0;
      for (int64_t c = 0; c < m.cols; ++c) {
        const double p = Bf16Value(m.weights[r * m.cols + c]) * x[n * m.cols + c];
        want += p;
        magnitude += std::abs(p);
      }
      double tolerance = Tolerance(m.cols, magnitude);
      if (y_type == TiledType::kBf16) tolerance += std::abs(want) * std::ldexp(1.0, -8);
      const double got = y[n * m.rows + r];
      if (std::abs(got - want) > tolerance) {
        ++bad;
        ADD_FAILURE() << "row " << r << " column " << n << ": " << got << ", float64 " << want;
      }
      if (!cublas_y.empty() && y_type == TiledType::kF32 &&
          std::abs(got - cublas_y[n * m.rows + r]) > 2 * Tolerance(m.cols, magnitude)) {
        ++bad;
        ADD_FAILURE() << "row " << r << " column " << n << ": " << got << ", cuBLAS "
                      << cublas_y[n * m.rows + r];
      }
    }
  }
  return y;
}

TEST_F(GpuTiledTest, ProductsMatchFloat64AndCublas) {
  const Resident qwen_k(1024, 4096, TestSeed(), pool_);
  const Resident down(256, 12288, TestSeed() + 1, pool_);
  const Resident odd(48, 1056, TestSeed() + 2, pool_);
  const Resident escapes(64, 2048, TestSeed() + 3, pool_, /*uniform=*/true);
  for (const Resident* m : {&qwen_k, &down, &odd, &escapes}) {
    for (int n_cols : {1, 2, 3, 4, 8}) {
      CheckProduct(*m, n_cols, TiledType::kBf16, TiledType::kF32, workspace_.data(),
                   workspace_.size());
    }
    CheckProduct(*m, 5, TiledType::kF32, TiledType::kF32, workspace_.data(), workspace_.size());
    CheckProduct(*m, 1, TiledType::kBf16, TiledType::kBf16, workspace_.data(), workspace_.size());
  }
}

TEST_F(GpuTiledTest, ColumnsAreIndependentAndRunsRepeatBitForBit) {
  const Resident m(2048, 4096, TestSeed(), pool_);
  const std::vector<float> eight =
      CheckProduct(m, 8, TiledType::kBf16, TiledType::kF32, workspace_.data(), workspace_.size());
  const std::vector<float> again =
      CheckProduct(m, 8, TiledType::kBf16, TiledType::kF32, workspace_.data(), workspace_.size());
  EXPECT_TRUE(eight == again);
  // Column 0 alone: the same X row (the seed depends on n_cols, so rebuild it as for 8).
  const std::vector<uint16_t> xb = ::df11::testing::NormalBf16(TestSeed() + 56, 1.0f, 8 * m.cols);
  DeviceBuffer dx = Upload(xb);
  DeviceBuffer dy = DeviceBuffer::Allocate(4 * m.rows).value();
  for (int n = 0; n < 8; ++n) {
    const TiledGemvView view{m.device->view(), static_cast<const uint16_t*>(dx.data()) + n * m.cols,
                             dy.data(), static_cast<uint64_t>(m.cols),
                             static_cast<uint64_t>(m.rows)};
    DF11_ASSERT_OK(TiledGemv(std::span(&view, 1), 1, TiledType::kBf16, TiledType::kF32,
                             workspace_.data(), workspace_.size(), nullptr));
    const std::vector<float> one = Download<float>(dy, m.rows);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), eight.begin() + n * m.rows)) << "column " << n;
  }
}

TEST_F(GpuTiledTest, SeveralMatricesInOneLaunchGiveWhatEachGivesAlone) {
  // Qwen3-8B's q, k and v: one input, three outputs.
  std::vector<std::unique_ptr<Resident>> qkv;
  qkv.push_back(std::make_unique<Resident>(4096, 4096, TestSeed(), pool_));
  qkv.push_back(std::make_unique<Resident>(1024, 4096, TestSeed() + 1, pool_));
  qkv.push_back(std::make_unique<Resident>(1024, 4096, TestSeed() + 2, pool_));
  const std::vector<uint16_t> xb = ::df11::testing::NormalBf16(TestSeed(), 1.0f, 2 * 4096);
  DeviceBuffer dx = Upload(xb);
  std::vector<DeviceBuffer> together, alone;
  std::vector<TiledGemvView> views;
  for (const auto& m : qkv) {
    together.push_back(DeviceBuffer::Allocate(4 * 2 * m->rows).value());
    alone.push_back(DeviceBuffer::Allocate(4 * 2 * m->rows).value());
    views.push_back({m->device->view(), dx.data(), together.back().data(), 4096,
                     static_cast<uint64_t>(m->rows)});
  }
  DF11_ASSERT_OK(TiledGemv(views, 2, TiledType::kBf16, TiledType::kF32, workspace_.data(),
                           workspace_.size(), nullptr));
  for (size_t i = 0; i < qkv.size(); ++i) {
    TiledGemvView one = views[i];
    one.y = alone[i].data();
    DF11_ASSERT_OK(TiledGemv(std::span(&one, 1), 2, TiledType::kBf16, TiledType::kF32,
                             workspace_.data(), workspace_.size(), nullptr));
    EXPECT_TRUE(Download<float>(together[i], 2 * qkv[i]->rows) ==
                Download<float>(alone[i], 2 * qkv[i]->rows))
        << "matrix " << i;
  }
  DF11_ASSERT_OK(CheckDecoded(workspace_.data(), nullptr));
}

TEST_F(GpuTiledTest, AddsTheBiasInFp32BeforeRoundingOnce) {
  const Resident m(1024, 4096, TestSeed(), pool_);
  const int n_cols = 3;
  const std::vector<uint16_t> xb = ::df11::testing::NormalBf16(TestSeed() + 1, 1.0f, n_cols * 4096);
  const std::vector<uint16_t> bias = ::df11::testing::NormalBf16(TestSeed() + 2, 0.5f, 1024);
  DeviceBuffer dx = Upload(xb), db = Upload(bias);
  DeviceBuffer dy = DeviceBuffer::Allocate(2 * n_cols * 1024).value();
  const TiledGemvView view{
      m.device->view(), dx.data(), dy.data(), 4096, 1024, static_cast<const uint16_t*>(db.data())};
  DF11_ASSERT_OK(TiledGemv(std::span(&view, 1), n_cols, TiledType::kBf16, TiledType::kBf16,
                           workspace_.data(), workspace_.size(), nullptr));
  DF11_ASSERT_OK(CheckDecoded(workspace_.data(), nullptr));
  const std::vector<uint16_t> y = Download<uint16_t>(dy, n_cols * 1024);
  for (int n = 0; n < n_cols; ++n) {
    for (int r = 0; r < 1024; ++r) {
      double want = Bf16Value(bias[r]), magnitude = std::abs(want);
      for (int c = 0; c < 4096; ++c) {
        const double p = Bf16Value(m.weights[r * 4096 + c]) * Bf16Value(xb[n * 4096 + c]);
        want += p;
        magnitude += std::abs(p);
      }
      ASSERT_NEAR(Bf16Value(y[n * 1024 + r]), want,
                  Tolerance(4096, magnitude) + std::abs(want) * std::ldexp(1.0, -8))
          << "row " << r << " column " << n;
    }
  }
}

// Rows [a, b) of a matrix (a fused projection's piece, such as Phi-3's q of qkv_proj), with a
// bias: the same values as those rows of the whole product, bit for bit.
TEST_F(GpuTiledTest, RowRangesGiveTheirRowsOfTheWholeProduct) {
  const Resident m(6144, 4096, TestSeed(), pool_);
  const std::vector<uint16_t> xb = ::df11::testing::NormalBf16(TestSeed() + 1, 1.0f, 2 * 4096);
  const std::vector<uint16_t> bias = ::df11::testing::NormalBf16(TestSeed() + 2, 0.5f, 6144);
  DeviceBuffer dx = Upload(xb), db = Upload(bias);
  DeviceBuffer whole = DeviceBuffer::Allocate(4 * 2 * 6144).value();
  DeviceBuffer part = DeviceBuffer::Allocate(4 * 2 * 1024).value();
  const TiledImage image = m.host->image();
  const char* base = reinterpret_cast<const char*>(m.device->view().words) - image.words;
  const TiledGemvView all{image.View(base),
                          dx.data(),
                          whole.data(),
                          4096,
                          6144,
                          static_cast<const uint16_t*>(db.data())};
  const TiledGemvView piece{image.RowsView(base, 4096, 1024),
                            dx.data(),
                            part.data(),
                            4096,
                            1024,
                            static_cast<const uint16_t*>(db.data()) + 4096};
  DF11_ASSERT_OK(TiledGemv(std::span(&all, 1), 2, TiledType::kBf16, TiledType::kF32,
                           workspace_.data(), workspace_.size(), nullptr));
  DF11_ASSERT_OK(TiledGemv(std::span(&piece, 1), 2, TiledType::kBf16, TiledType::kF32,
                           workspace_.data(), workspace_.size(), nullptr));
  DF11_ASSERT_OK(CheckDecoded(workspace_.data(), nullptr));
  const std::vector<float> a = Download<float>(whole, 2 * 6144),
                           b = Download<float>(part, 2 * 1024);
  for (int n = 0; n < 2; ++n) {
    EXPECT_TRUE(
        std::equal(b.begin() + n * 1024, b.begin() + (n + 1) * 1024, a.begin() + n * 6144 + 4096))
        << "column " << n;
  }
}

TEST_F(GpuTiledTest, AnIndexThatDoesNotMatchTheStreamsIsDataLoss) {
  const Resident m(64, 1024, TestSeed(), pool_);
  std::vector<uint16_t> lane_bits(m.host->lane_bits().begin(), m.host->lane_bits().end());
  lane_bits[32 + 3] += 1;
  lane_bits[32 + 4] -= 1;
  const TiledView v = m.device->view();
  ASSERT_EQ(cudaMemcpy(const_cast<uint16_t*>(v.lane_bits), lane_bits.data(),
                       lane_bits.size() * sizeof(uint16_t), cudaMemcpyHostToDevice),
            cudaSuccess);
  DeviceBuffer out = DeviceBuffer::Allocate(2 * 64 * 1024).value();
  const TiledDecodeView dv{v, static_cast<uint16_t*>(out.data()), 1024};
  DF11_ASSERT_OK(DecodeTiled(std::span(&dv, 1), workspace_.data(), workspace_.size(), nullptr));
  EXPECT_THAT(CheckDecoded(workspace_.data(), nullptr), StatusIs(absl::StatusCode::kDataLoss));
}

TEST_F(GpuTiledTest, RefusesBadLaunches) {
  const Resident m(16, 64, TestSeed(), pool_);
  DeviceBuffer x = DeviceBuffer::Allocate(4 * 8 * 64).value();
  DeviceBuffer y = DeviceBuffer::Allocate(4 * 8 * 16).value();
  TiledGemvView v{m.device->view(), x.data(), y.data(), 64, 16};
  const auto gemv = [&](const TiledGemvView& view, int n_cols, size_t workspace_bytes) {
    return TiledGemv(std::span(&view, 1), n_cols, TiledType::kF32, TiledType::kF32,
                     workspace_.data(), workspace_bytes, nullptr);
  };
  EXPECT_THAT(gemv(v, 0, workspace_.size()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(gemv(v, 9, workspace_.size()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(gemv(v, 1, 8), StatusIs(absl::StatusCode::kInvalidArgument));
  TiledGemvView odd = v;
  odd.x = static_cast<const char*>(x.data()) + 4;  // fp32 X must be 8-byte aligned
  EXPECT_THAT(gemv(odd, 1, workspace_.size()), StatusIs(absl::StatusCode::kInvalidArgument));
  odd = v;
  odd.ldx = 32;
  EXPECT_THAT(gemv(odd, 1, workspace_.size()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(TiledGemv({}, 1, TiledType::kBf16, TiledType::kF32, workspace_.data(),
                        workspace_.size(), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  DF11_ASSERT_OK(gemv(v, 8, workspace_.size()));
  DF11_ASSERT_OK(CheckDecoded(workspace_.data(), nullptr));
}

}  // namespace
}  // namespace df11::codec::gpu
