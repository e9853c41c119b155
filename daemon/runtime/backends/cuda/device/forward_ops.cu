// ForwardOps on a CUDA device: matrix products by cuBLAS (BF16 inputs, fp32 accumulation), the
// other operations by the kernels of forward_kernels.cuh, launched on the pass's stream.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "codec/base/status_macros.h"
#include "codec/cuda/cuda_status.h"
#include "codec/gpu_lane.h"
#include "codec/gpu_tiled.h"
#include "daemon/runtime/backends/cuda/device/forward_kernels.cuh"
#if DF11_HAVE_FLASHINFER
#include "daemon/runtime/backends/cuda/device/flashinfer_decode.h"
#endif
#include "daemon/runtime/backends/cuda/device/forward_ops.h"

namespace df11::runtime::cuda {
namespace {

int Blocks(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

cudaStream_t AsCuda(void* stream) { return static_cast<cudaStream_t>(stream); }

absl::Status LaunchError(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

absl::Status Cublas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cublasGetStatusString(s)));
}

// Bytes of the workspace kept for TiledLinear's launches: its error flag and up to 64 views.
constexpr uint64_t kTiledWorkspace = 8 << 10;
// FlashInfer's share of a workspace of at least kFlashInferFrom bytes: its plan's arrays and its
// split KV's partial outputs, at most (query heads per KV head) x (blocks of the grid) x head_dim
// floats: 8 x 1,056 x 256 x 4 bytes = 8.25 MiB for groups of 8 at 8 blocks per SM on 132 SMs.
// A plan that does not fit, or a smaller workspace, leaves attention to the project's kernel.
constexpr uint64_t kFlashInferIntBytes = 1 << 20;
constexpr uint64_t kFlashInferFloatBytes = 16 << 20;
constexpr uint64_t kFlashInferFrom = 32 << 20;

class CudaForwardOps final : public ForwardOps {
 public:
  CudaForwardOps(cublasHandle_t handle, cublasLtHandle_t lt,
                 std::shared_ptr<std::atomic<uint64_t>> launches)
      : handle_(handle), lt_(lt), launches_(std::move(launches)) {}
  ~CudaForwardOps() override {
#if DF11_HAVE_FLASHINFER
    if (flashinfer_.pinned != nullptr) cudaFreeHost(flashinfer_.pinned);
#endif
    for (auto& [shape, plan] : bias_plans_) plan.Destroy();
    cublasLtDestroy(lt_);
    cublasDestroy(handle_);
  }

  // The first kTiledWorkspace bytes serve TiledLinear's launches (its error flag and views); then
  // FlashInfer's share when the workspace is large enough; cuBLAS has the rest.
  absl::Status UseWorkspace(void* device, uint64_t bytes) override {
    if (bytes < 2 * kTiledWorkspace) {
      return absl::InvalidArgumentError(
          absl::StrCat("a workspace of ", bytes, " bytes; at least ", 2 * kTiledWorkspace));
    }
    tiled_workspace_ = device;
    uint64_t used = kTiledWorkspace;
#if DF11_HAVE_FLASHINFER
    // Without page-locked memory for its plan, FlashInfer is left out.
    if (bytes >= kFlashInferFrom && flashinfer_.pinned == nullptr &&
        cudaMallocHost(&flashinfer_.pinned, kFlashInferIntBytes) == cudaSuccess) {
      flashinfer_.int_buffer = static_cast<char*>(device) + used;
      flashinfer_.int_bytes = kFlashInferIntBytes;
      flashinfer_.float_buffer = static_cast<char*>(device) + used + kFlashInferIntBytes;
      flashinfer_.float_bytes = kFlashInferFloatBytes;
      used += kFlashInferIntBytes + kFlashInferFloatBytes;
    }
#endif
    cublas_workspace_ = static_cast<char*>(device) + used;
    cublas_workspace_bytes_ = bytes - used;
    // The backend's streams do not wait for the legacy stream: finish the clear here.
    DF11_CUDA_RETURN_IF_ERROR(cudaMemset(device, 0, kTiledWorkspace));
    DF11_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    return Cublas(cublasSetWorkspace(handle_, cublas_workspace_, cublas_workspace_bytes_),
                  "cublasSetWorkspace");
  }

  absl::Status GatherRows(const char* base, const uint64_t* offsets, int64_t n, int64_t row_bytes,
                          void* out, Stream stream) override {
    DF11_RETURN_IF_ERROR(CheckRowBytes(row_bytes));
    if (n == 0 || row_bytes == 0) return absl::OkStatus();
    GatherRowsKernel<<<static_cast<unsigned>(n), kThreads, 0, AsCuda(stream)>>>(
        base, offsets, row_bytes / 2, static_cast<uint16_t*>(out));
    return Launched("GatherRows");
  }

  absl::Status SplitColumns(const uint16_t* in, int64_t rows, int64_t in_width,
                            std::span<const ColumnRange> pieces, Stream stream) override {
    for (const ColumnRange& p : pieces) {
      DF11_RETURN_IF_ERROR(CheckColumns(p.first, p.width, in_width));
      if (rows * p.width == 0) continue;
      SplitColumnsKernel<<<Blocks(rows * p.width), kThreads, 0, AsCuda(stream)>>>(
          in, rows, in_width, p.first, p.width, p.out);
      DF11_RETURN_IF_ERROR(Launched("SplitColumns"));
    }
    return absl::OkStatus();
  }

  absl::Status TiledLinear(const uint16_t* x, int64_t rows, std::span<const TiledProduct> products,
                           bool y_fp32, Stream stream) override {
    if (rows == 0 || products.empty()) return absl::OkStatus();
    if (tiled_workspace_ == nullptr)
      return absl::FailedPreconditionError("TiledLinear: no workspace");
    // The backend passes at most 3 products (q, k, v): no allocation per call.
    absl::InlinedVector<codec::gpu::TiledGemvView, 3> views;
    for (const TiledProduct& p : products) {
      views.push_back(
          {.matrix = p.w, .x = x, .y = p.y, .ldx = p.w.cols, .ldy = p.w.rows, .bias = p.bias});
    }
    ++*launches_;
    return codec::gpu::TiledGemv(
        views, static_cast<int>(rows), codec::gpu::TiledType::kBf16,
        y_fp32 ? codec::gpu::TiledType::kF32 : codec::gpu::TiledType::kBf16, tiled_workspace_,
        kTiledWorkspace, stream, 0,
        /*keep_error=*/true);
  }

  absl::Status LaneLinear(const uint16_t* x, int64_t rows,
                          std::span<const codec::gpu::LaneProduct> products, bool y_fp32,
                          void* workspace, uint64_t workspace_bytes, Stream stream) override {
    if (rows == 0 || products.empty()) return absl::OkStatus();
    *launches_ += 2;  // the pieces and their sums
    return codec::gpu::LaneGemv(products, x, static_cast<int>(rows), y_fp32, workspace,
                                workspace_bytes, stream, /*keep_error=*/true);
  }

  absl::Status CheckTiled(Stream stream) override {
    if (tiled_workspace_ == nullptr) return absl::OkStatus();
    const absl::Status s = codec::gpu::CheckDecoded(tiled_workspace_, stream);
    if (absl::IsDataLoss(s)) {
      DF11_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(tiled_workspace_, 0, 4, AsCuda(stream)));
      return absl::DataLossError(absl::StrCat("tiled product: ", s.message()));
    }
    return s;
  }

  absl::Status Linear(const uint16_t* x, const uint16_t* w, const uint16_t* bias, int64_t rows,
                      int64_t in, int64_t out, void* y, bool y_fp32, Stream stream) override {
    if (rows == 0) return absl::OkStatus();
    if (bias != nullptr && !y_fp32) return BiasLinear(x, w, bias, rows, in, out, y, stream);
    const float alpha = 1.0f, beta = bias != nullptr ? 1.0f : 0.0f;
    if (bias != nullptr) {
      BroadcastBias<<<Blocks(rows * out), kThreads, 0, AsCuda(stream)>>>(bias, rows, out,
                                                                          static_cast<float*>(y));
      DF11_RETURN_IF_ERROR(Launched("bias"));
    }
    DF11_RETURN_IF_ERROR(UseStream(AsCuda(stream)));
    // Column-major: y^T [out x rows] = W [out x in] · x^T [in x rows]; W row-major is W^T
    // column-major, hence OP_T.
    ++*launches_;
    return Cublas(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out),
                               static_cast<int>(rows), static_cast<int>(in), &alpha, w,
                               CUDA_R_16BF, static_cast<int>(in), x, CUDA_R_16BF,
                               static_cast<int>(in), &beta, y, y_fp32 ? CUDA_R_32F : CUDA_R_16BF,
                               static_cast<int>(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  "cublasGemmEx");
  }

  absl::Status RmsNorm(const uint16_t* x, const uint16_t* w, int64_t rows, int64_t n, float eps,
                       float offset, uint16_t* y, Stream stream) override {
    if (rows == 0) return absl::OkStatus();
    RmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, AsCuda(stream)>>>(x, w, n, eps,
                                                                                 offset, y);
    return Launched("RmsNorm");
  }

  absl::Status FloatRmsNorm(const float* x, const uint16_t* w, int64_t rows, int64_t n, float eps,
                            float offset, void* y, bool y_fp32, Stream stream) override {
    if (rows == 0) return absl::OkStatus();
    if (y_fp32) {
      RmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, AsCuda(stream)>>>(
          x, w, n, eps, offset, static_cast<float*>(y));
    } else {
      RmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, AsCuda(stream)>>>(
          x, w, n, eps, offset, static_cast<uint16_t*>(y));
    }
    return Launched("FloatRmsNorm");
  }

  absl::Status AddRmsNorm(float* x, const float* y, const uint16_t* w, int64_t rows, int64_t n,
                          float eps, float offset, uint16_t* out, Stream stream) override {
    if (rows == 0) return absl::OkStatus();
    AddRmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, AsCuda(stream)>>>(
        x, y, w, n, eps, offset, out);
    return Launched("AddRmsNorm");
  }

  absl::Status Rope(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim,
                    const int32_t* row_position, const RopeTable& table, Stream stream) override {
    DF11_RETURN_IF_ERROR(CheckHeads(head_dim, table.rotary_dim));
    const int64_t n = rows * heads * (table.rotary_dim / 2);
    if (n == 0) return absl::OkStatus();
    RopeKernel<<<Blocks(n), kThreads, 0, AsCuda(stream)>>>(x, rows, heads, head_dim, row_position,
                                                           table);
    return Launched("Rope");
  }

  absl::Status WriteKv(const uint16_t* k, const uint16_t* v, int64_t rows, const PagedKv& kv,
                       Stream stream) override {
    const int64_t n = rows * kv.kv_heads * kv.head_dim;
    if (n == 0) return absl::OkStatus();
    WriteKvKernel<<<Blocks(n), kThreads, 0, AsCuda(stream)>>>(k, v, rows, kv);
    return Launched("WriteKv");
  }

  absl::Status PrepareHeadsAndStoreKv(uint16_t* q, uint16_t* k, const uint16_t* v, int64_t rows,
                                      int64_t heads, const uint16_t* q_norm,
                                      const uint16_t* k_norm, float eps, float offset,
                                      const RopeTable& table, const PagedKv& kv,
                                      Stream stream) override {
    DF11_RETURN_IF_ERROR(CheckHeads(kv.head_dim, table.rotary_dim));
    if (rows == 0) return absl::OkStatus();
    PrepareHeadsKernel<<<static_cast<unsigned>(rows * (heads + kv.kv_heads)), kHeadThreads, 0,
                         AsCuda(stream)>>>(q, k, v, heads, q_norm, k_norm, eps, offset, table, kv);
    return Launched("PrepareHeadsAndStoreKv");
  }

  // A decode step's attention is FlashInfer's when it takes the model's heads, has its share of
  // the workspace and its plan fits there; otherwise the project's kernel attends.
  absl::Status PlanAttention(const DecodeBatch& batch, const AttentionShape& shape,
                             int64_t positions_per_page, Stream stream) override {
    decode_rows_ = 0;
#if DF11_HAVE_FLASHINFER
    if (batch.sequences == 0 || flashinfer_.pinned == nullptr || shape.kv_heads <= 0 ||
        shape.heads % shape.kv_heads != 0 ||
        !FlashInferDecodes(shape.head_dim, shape.heads / shape.kv_heads)) {
      return absl::OkStatus();
    }
    const absl::Status planned =
        decode_.Plan(flashinfer_, batch, shape, positions_per_page, AsCuda(stream));
    if (absl::IsResourceExhausted(planned)) return absl::OkStatus();
    DF11_RETURN_IF_ERROR(planned);
    decode_rows_ = batch.sequences;
#endif
    return absl::OkStatus();
  }

  absl::Status Attention(const uint16_t* q, int64_t rows, const AttentionShape& shape,
                         const PagedKv& kv, uint16_t* out, Stream stream) override {
    DF11_RETURN_IF_ERROR(CheckHeads(shape.head_dim, 0));
    if (rows == 0) return absl::OkStatus();
#if DF11_HAVE_FLASHINFER
    // FlashInfer loads 16 bytes at a time from every page; a sliding window is the project
    // kernel's, which reads only the window.
    const bool aligned = kv.page_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(kv.pool) % 16 == 0;
    if (decode_rows_ == rows && shape.window == 0 && aligned) {
      *launches_ += decode_.launches();
      return decode_.Run(q, shape, kv, out, AsCuda(stream));
    }
#endif
    AttentionKernel<<<static_cast<unsigned>(rows * shape.heads), kThreads, 0, AsCuda(stream)>>>(
        q, shape, kv, out);
    return Launched("Attention");
  }

  absl::Status GatedActivation(const uint16_t* gate, const uint16_t* up, int64_t n,
                               Activation activation, uint16_t* y, Stream stream) override {
    if (n == 0) return absl::OkStatus();
    GatedActivationKernel<<<Blocks(n), kThreads, 0, AsCuda(stream)>>>(
        gate, up, n, activation == Activation::kGeluTanh, y);
    return Launched("GatedActivation");
  }

  absl::Status Add(float* x, const float* y, int64_t n, Stream stream) override {
    if (n == 0) return absl::OkStatus();
    AddKernel<<<Blocks(n), kThreads, 0, AsCuda(stream)>>>(x, y, n);
    return Launched("Add");
  }

  absl::Status Widen(const uint16_t* in, int64_t n, float scale, float* out,
                     Stream stream) override {
    if (n == 0) return absl::OkStatus();
    WidenKernel<<<Blocks(n), kThreads, 0, AsCuda(stream)>>>(in, n, scale, out);
    return Launched("Widen");
  }

  absl::Status SoftCap(float* x, int64_t n, float cap, Stream stream) override {
    if (n == 0) return absl::OkStatus();
    SoftCapKernel<<<Blocks(n), kThreads, 0, AsCuda(stream)>>>(x, n, cap);
    return Launched("SoftCap");
  }

 private:
  // A cuBLASLt product with its bias added in the epilogue, in fp32 before the one rounding to
  // BF16 (what the reference and PyTorch's linear give), per shape: descriptors and algorithm.
  struct BiasPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo = {};
    void Destroy() {
      if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
      if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
      if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
      if (op != nullptr) cublasLtMatmulDescDestroy(op);
    }
  };

  absl::StatusOr<BiasPlan*> BiasPlanFor(int64_t rows, int64_t in, int64_t out) {
    const auto key = std::make_tuple(rows, in, out);
    if (auto it = bias_plans_.find(key); it != bias_plans_.end()) return &it->second;
    // Every prompt length is a shape of its own: past kMaxBiasPlans the plans are dropped and
    // made again as passes need them, so the daemon's life does not grow the map.
    if (bias_plans_.size() >= kMaxBiasPlans) {
      for (auto& [shape, plan] : bias_plans_) plan.Destroy();
      bias_plans_.clear();
    }
    BiasPlan plan;
    absl::Status s = [&]() -> absl::Status {
      DF11_RETURN_IF_ERROR(
          Cublas(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLt"));
      const cublasOperation_t transpose = CUBLAS_OP_T;
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      DF11_RETURN_IF_ERROR(Cublas(
          cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                         sizeof(transpose)),
          "cublasLt TRANSA"));
      DF11_RETURN_IF_ERROR(Cublas(
          cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                         sizeof(epilogue)),
          "cublasLt EPILOGUE"));
      // Column-major, as Linear: W^T is [in x out], x^T [in x rows], y^T [out x rows].
      DF11_RETURN_IF_ERROR(
          Cublas(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, in, out, in), "cublasLt A"));
      DF11_RETURN_IF_ERROR(
          Cublas(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, in, rows, in), "cublasLt B"));
      DF11_RETURN_IF_ERROR(
          Cublas(cublasLtMatrixLayoutCreate(&plan.d, CUDA_R_16BF, out, rows, out), "cublasLt D"));
      cublasLtMatmulPreference_t preference = nullptr;
      DF11_RETURN_IF_ERROR(
          Cublas(cublasLtMatmulPreferenceCreate(&preference), "cublasLt preference"));
      const size_t workspace = cublas_workspace_bytes_;
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace, sizeof(workspace));
      cublasLtMatmulHeuristicResult_t result = {};
      int found = 0;
      const cublasStatus_t h = cublasLtMatmulAlgoGetHeuristic(
          lt_, plan.op, plan.a, plan.b, plan.d, plan.d, preference, 1, &result, &found);
      cublasLtMatmulPreferenceDestroy(preference);
      DF11_RETURN_IF_ERROR(Cublas(h, "cublasLtMatmulAlgoGetHeuristic"));
      if (found == 0) {
        return absl::InternalError(absl::StrCat("cuBLASLt has no algorithm for a product of ",
                                                rows, " x ", in, " by ", in, " x ", out,
                                                " with a bias"));
      }
      plan.algo = result.algo;
      return absl::OkStatus();
    }();
    if (!s.ok()) {
      plan.Destroy();
      return s;
    }
    return &bias_plans_.emplace(key, plan).first->second;
  }

  absl::Status BiasLinear(const uint16_t* x, const uint16_t* w, const uint16_t* bias,
                          int64_t rows, int64_t in, int64_t out, void* y, Stream stream) {
    DF11_ASSIGN_OR_RETURN(BiasPlan * plan, BiasPlanFor(rows, in, out));
    DF11_RETURN_IF_ERROR(Cublas(cublasLtMatmulDescSetAttribute(plan->op,
                                                               CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                               &bias, sizeof(bias)),
                                "cublasLt BIAS_POINTER"));
    const float alpha = 1.0f, beta = 0.0f;
    ++*launches_;
    return Cublas(cublasLtMatmul(lt_, plan->op, &alpha, w, plan->a, x, plan->b, &beta, y, plan->d,
                                 y, plan->d, &plan->algo, cublas_workspace_,
                                 cublas_workspace_bytes_, AsCuda(stream)),
                  "cublasLtMatmul");
  }

  // cublasSetStream puts cuBLAS back on its own workspace pool, outside the arena's accounting:
  // the arena's workspace is set again after each change of stream.
  absl::Status UseStream(cudaStream_t stream) {
    if (stream == stream_) return absl::OkStatus();
    DF11_RETURN_IF_ERROR(Cublas(cublasSetStream(handle_, stream), "cublasSetStream"));
    stream_ = stream;
    if (cublas_workspace_ == nullptr) return absl::OkStatus();
    return Cublas(cublasSetWorkspace(handle_, cublas_workspace_, cublas_workspace_bytes_),
                  "cublasSetWorkspace");
  }

  // Counts a kernel launch (or a library call), then reports the launch's error.
  absl::Status Launched(const char* what) {
    ++*launches_;
    return LaunchError(what);
  }

  const cublasHandle_t handle_;
  const cublasLtHandle_t lt_;
  const std::shared_ptr<std::atomic<uint64_t>> launches_;
  static constexpr size_t kMaxBiasPlans = 256;
  absl::flat_hash_map<std::tuple<int64_t, int64_t, int64_t>, BiasPlan> bias_plans_;
  void* tiled_workspace_ = nullptr;
  void* cublas_workspace_ = nullptr;
  uint64_t cublas_workspace_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  int64_t decode_rows_ = 0;  // the pass's decode step's, when FlashInfer planned it
#if DF11_HAVE_FLASHINFER
  FlashInferBuffers flashinfer_;
  FlashInferDecode decode_;
#endif
};

}  // namespace

absl::Status CheckKernelImage(const std::string& device) {
  // Loading a kernel's attributes loads the module for the current device: its machine code, or
  // its PTX compiled by the driver; neither there is cudaErrorNoKernelImageForDevice (or
  // cudaErrorInvalidDeviceFunction).
  cudaFuncAttributes attributes{};
  const cudaError_t e = cudaFuncGetAttributes(&attributes, AddKernel);
  if (e == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();  // clears a non-sticky error
  if (e != cudaErrorNoKernelImageForDevice && e != cudaErrorInvalidDeviceFunction) {
    // Any other error (a device a fault has left unusable, an out-of-memory) is not a missing
    // architecture: say what it is.
    return absl::InternalError(
        absl::StrCat(device, ": cudaFuncGetAttributes failed: ", cudaGetErrorString(e)));
  }
  int index = 0, major = 0, minor = 0;
  cudaGetDevice(&index);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index);
  return absl::FailedPreconditionError(absl::StrCat(
      device, " has compute capability ", major, ".", minor,
      ", for which this build has no code (built for CUDA architectures ", DF11_CUDA_ARCHITECTURES,
      ": ", cudaGetErrorString(e), "); rebuild with -DCMAKE_CUDA_ARCHITECTURES=", major, minor,
      " or serve from another GPU"));
}

absl::StatusOr<std::unique_ptr<ForwardOps>> NewForwardOps(
    std::shared_ptr<std::atomic<uint64_t>> launches) {
  cublasHandle_t handle = nullptr;
  DF11_RETURN_IF_ERROR(Cublas(cublasCreate(&handle), "cublasCreate"));
  // Tensor-core products in fp32 accumulation. cuBLAS's default lets split-K products reduce
  // their partial sums in the output type (BF16 here), which costs the result up to an ulp of
  // the partials: disallowed.
  const cublasStatus_t s = cublasSetMathMode(
      handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                        CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  if (s != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(handle);
    return Cublas(s, "cublasSetMathMode");
  }
  cublasLtHandle_t lt = nullptr;
  if (const cublasStatus_t l = cublasLtCreate(&lt); l != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(handle);
    return Cublas(l, "cublasLtCreate");
  }
  return std::unique_ptr<ForwardOps>(new CudaForwardOps(handle, lt, std::move(launches)));
}

}  // namespace df11::runtime::cuda
