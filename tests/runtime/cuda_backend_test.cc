// The CUDA backend: models placed in the arena, every byte accounted, every block decoded on the
// device equal to the CPU decoder's output bit for bit, corrupt units, compaction, and thousands of
// load/unload cycles. Built twice: cuda_backend_test runs it on EmulatedGpuDevice (host memory,
// the kernel's per-thread steps run one by one) in every build; cuda_backend_gpu_test (label gpu,
// CUDA builds) runs the same tests on CUDA device 0 and skips without one. Fault injection and
// the emulator's leak check (at the backend's destruction) apply to the emulated device only.
#include "daemon/runtime/backends/cuda/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>
#include <tuple>

#include "codec/base/status_macros.h"
#include "codec/model.h"
#include "codec/thread_pool.h"
#include "tools/df11/synth.h"
#include "daemon/runtime/backends/cpu/cpu_backend.h"
#include "daemon/runtime/engine/estimate.h"
#include "daemon/runtime/backends/cuda/gpu_placement.h"
#include "daemon/runtime/engine/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/codec/test_data.h"
#include "tests/runtime/emulated_gpu_device.h"
#include "tests/testing/logits.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_data_dir.h"
#if defined(DF11_TEST_ON_GPU)
#include "codec/cuda/devices.h"
#include "daemon/runtime/backends/cuda/device/cuda_device.h"
#endif

namespace df11::runtime {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::Argmax;
using ::df11::testing::RelativeL2;
using ::df11::testing::StatusIs;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;

// The DF11 directory of engine fixture `name`, compressed once per test program.
std::string Df11Dir(const std::string& name) {
  const fs::path dst = fs::path(::testing::TempDir()) / ("cuda_backend_" + name + "_df11");
  if (!fs::exists(dst / "config.json")) {
    fs::remove_all(dst);
    EXPECT_TRUE(codec::CompressModel((::df11::testing::TestDataDir("engine") / name).string(),
                                     dst.string(), {})
                    .ok());
  }
  return dst.string();
}

// Every DF11 layout the tests meet: df11's compressor (embedding and head as units, or tied) and
// the official encoder (tests/data/official).
std::vector<std::string> Df11Models() {
  return {Df11Dir("qwen3"), Df11Dir("qwen2"), Df11Dir("llama3"),
          (::df11::testing::TestDataDir("official") / "tiny_qwen3_df11").string(),
          (::df11::testing::TestDataDir("official") / "tiny_llama_df11").string()};
}

std::string Bf16Dir() { return (::df11::testing::TestDataDir("engine") / "qwen3").string(); }

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(DF11_TEST_ON_GPU)
    absl::StatusOr<std::vector<::df11::cuda::DeviceInfo>> devices = ::df11::cuda::ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    ASSERT_FALSE(devices->empty());  // gpu_test_main runs the tests only with a device
#endif
  }

  static CudaBackend::Options SmallOptions() {
    return CudaBackend::Options{.budget = 64 * kMiB,
                                .kv_pool_bytes = 4 * kMiB,
                                .kv_page_bytes = 64 << 10,
                                .granule = 64 << 10,
                                .staging_bytes = 1 * kMiB,
                                .staging_buffers = 2,
                                .threads = 2,
                                .library_workspace_bytes = 1 * kMiB};
  }

  std::unique_ptr<GpuDevice> NewDevice() {
#if defined(DF11_TEST_ON_GPU)
    return cuda::OpenDevice(0).value();
#else
    auto device = std::make_unique<::df11::testing::EmulatedGpuDevice>(256 * kMiB);
    emulated_ = device.get();
    return device;
#endif
  }

  std::unique_ptr<CudaBackend> NewBackend(const CudaBackend::Options& options) {
    absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
        CudaBackend::Create(NewDevice(), options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? *std::move(backend) : nullptr;
  }

  static absl::StatusOr<std::unique_ptr<PlacedModel>> Place(CudaBackend& backend,
                                                            const std::string& dir) {
    DF11_ASSIGN_OR_RETURN(std::unique_ptr<Model> host, Model::Load(dir, backend.HostLoadOptions()));
    return backend.Place(std::move(host), {});
  }

  // The arena's allocations equal the models' bytes plus the shared kinds, byte for byte.
  static void ExpectEveryByteAccounted(CudaBackend& backend,
                                       const std::vector<const PlacedModel*>& models) {
    const BackendMemory m = backend.Memory();
    uint64_t weights = 0;
    for (const PlacedModel* p : models) weights += p->unit_bytes() + p->plain_bytes();
    EXPECT_EQ(weights + m.scratch + m.workspace + m.kv_cache + m.kv_pool_free,
              backend.arena_allocated_bytes());
    EXPECT_EQ(m.kv_cache + m.kv_pool_free, m.kv_pool);
    EXPECT_LE(backend.arena_allocated_bytes(), m.arena);
  }

  ::df11::testing::EmulatedGpuDevice* emulated_ = nullptr;  // null on a real GPU
};

// Reads `tensor` of `model` back as BF16 values.
std::vector<uint16_t> ReadBack(CudaBackend& backend, const PlacedModel& model,
                               const DeviceTensor& tensor) {
  std::vector<uint16_t> out(tensor.bytes / 2);
  const absl::Status s = backend.Read(model, tensor, std::as_writable_bytes(std::span(out)));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Every layer's tensors, the output head and embedding rows, decoded on the device, against the
// CPU decoder of the same files.
void ExpectDecodesLikeTheCpu(CudaBackend& backend, const PlacedModel& model,
                             const std::string& dir) {
  SCOPED_TRACE(dir);
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> cpu, Model::Load(dir, {.interleave = false}));
  const ModelConfig& c = cpu->config();
  codec::ThreadPool pool(2);
  std::vector<uint16_t> scratch(
      std::max(cpu->layer_scratch_elements(), cpu->head_scratch_elements()));
  auto expect_equal = [](const std::vector<uint16_t>& device, const uint16_t* host, size_t n) {
    ASSERT_EQ(device.size(), n);
    EXPECT_EQ(std::memcmp(device.data(), host, 2 * n), 0);
  };
  for (int64_t l = 0; l < c.num_layers; ++l) {
    SCOPED_TRACE(::testing::Message() << "layer " << l);
    DF11_ASSERT_OK(backend.DecodeLayer(model, l));
    DF11_ASSERT_OK(backend.FinishDecodes());
    DF11_ASSERT_OK_AND_ASSIGN(LayerWeights w, cpu->Layer(l, scratch, &pool));
    const std::vector<const uint16_t*> host = {w.q_proj.data,
                                               w.k_proj.data,
                                               w.v_proj.data,
                                               w.o_proj.data,
                                               w.gate_proj.data,
                                               w.up_proj.data,
                                               w.down_proj.data,
                                               w.input_norm,
                                               w.mlp_norm,
                                               w.q_norm,
                                               w.k_norm,
                                               w.q_bias,
                                               w.k_bias,
                                               w.v_bias,
                                               w.o_bias,
                                               w.gate_bias,
                                               w.up_bias,
                                               w.down_bias,
                                               w.attention_output_norm,
                                               w.mlp_output_norm};
    ASSERT_EQ(host.size(), kLayerTensors);
    for (size_t k = 0; k < kLayerTensors; ++k) {
      const DeviceTensor t = backend.LayerTensor(model, l, k);
      EXPECT_EQ(t.space == DeviceTensor::Space::kAbsent, host[k] == nullptr) << "tensor " << k;
      if (host[k] == nullptr) continue;
      expect_equal(ReadBack(backend, model, t), host[k], t.bytes / 2);
    }
  }
  DF11_ASSERT_OK(backend.DecodeLmHead(model));
  DF11_ASSERT_OK_AND_ASSIGN(MatrixRef head, cpu->LmHead(scratch, &pool));
  expect_equal(ReadBack(backend, model, backend.LmHead(model)), head.data,
               static_cast<size_t>(c.vocab_size * c.hidden_size));
  // The first and last rows, and rows that straddle blocks.
  const std::vector<int32_t> tokens = {0, static_cast<int32_t>(c.vocab_size - 1), 1, 7,
                                       static_cast<int32_t>(c.vocab_size / 2)};
  std::vector<float> embedded(tokens.size() * c.hidden_size);
  DF11_ASSERT_OK(cpu->EmbedTokens(tokens, embedded.data()));
  const size_t per_call = static_cast<size_t>(
      std::min<int64_t>(backend.EmbeddingRowsPerCall(model), static_cast<int64_t>(tokens.size())));
  ASSERT_GE(per_call, 1u);
  std::vector<DeviceTensor> rows(per_call);
  for (size_t k = 0; k < tokens.size(); ++k) {
    // Rows are read before the next call reuses the scratch.
    if (k % per_call == 0) {
      const size_t n = std::min(per_call, tokens.size() - k);
      DF11_ASSERT_OK(backend.DecodeEmbeddingRows(model, std::span(tokens).subspan(k, n), rows));
    }
    const std::vector<uint16_t> row = ReadBack(backend, model, rows[k % per_call]);
    ASSERT_EQ(row.size(), static_cast<size_t>(c.hidden_size));
    for (int64_t i = 0; i < c.hidden_size; ++i) {
      const uint32_t bits = uint32_t{row[i]} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      ASSERT_EQ(f, embedded[k * c.hidden_size + i]) << "token " << tokens[k] << " element " << i;
    }
  }
}

TEST_F(CudaBackendTest, EveryBlockDecodesLikeTheCpuDecoder) {
  std::unique_ptr<CudaBackend> backend = NewBackend(SmallOptions());
  ASSERT_NE(backend, nullptr);
  std::vector<std::unique_ptr<PlacedModel>> models;
  std::vector<std::string> dirs = Df11Models();
  dirs.push_back(Bf16Dir());
  for (const std::string& dir : dirs) {
    DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> model, Place(*backend, dir));
    EXPECT_EQ(model->device(), "cuda:0");
    models.push_back(std::move(model));
  }
  // Decoded with every model resident, each into scratch shared by all.
  for (size_t i = 0; i < dirs.size(); ++i) ExpectDecodesLikeTheCpu(*backend, *models[i], dirs[i]);
}

TEST_F(CudaBackendTest, EstimateFromHeadersIsExact) {
  std::unique_ptr<CudaBackend> backend = NewBackend(SmallOptions());
  ASSERT_NE(backend, nullptr);
  std::vector<std::string> dirs = Df11Models();
  dirs.push_back(Bf16Dir());
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    DF11_ASSERT_OK_AND_ASSIGN(ModelEstimate estimate, EstimateModel(dir));
    const PlacementEstimate e = backend->EstimatePlacement(estimate);
    DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> model, Place(*backend, dir));
    EXPECT_EQ(e.unit_bytes, model->unit_bytes());
    EXPECT_EQ(e.plain_bytes, model->plain_bytes());
    EXPECT_EQ(model->is_df11(), estimate.df11);
    // A listing's upper bound holds too.
    ModelEstimate listed = estimate;
    listed.from_headers = false;
    listed.units.clear();
    listed.plain_tensors.clear();
    const PlacementEstimate bound = backend->EstimatePlacement(listed);
    EXPECT_GE(bound.unit_bytes + bound.plain_bytes, model->resident_bytes());
  }
}

TEST_F(CudaBackendTest, EveryByteIsAccountedThroughLoadsAndUnloadsInRandomOrder) {
  const uint64_t seed = ::df11::testing::TestSeed();
  SCOPED_TRACE(::df11::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::unique_ptr<GpuDevice> device = NewDevice();
  GpuDevice* raw = device.get();
  DF11_ASSERT_OK_AND_ASSIGN(GpuDevice::MemoryInfo before, raw->GetMemoryInfo());
  const CudaBackend::Options options = SmallOptions();
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<CudaBackend> backend,
                            CudaBackend::Create(std::move(device), options));
  // One placement first: a real driver loads the kernels' code at their first launch.
  DF11_ASSERT_OK(Place(*backend, Df11Models()[0]).status());
  DF11_ASSERT_OK_AND_ASSIGN(GpuDevice::MemoryInfo after_create, raw->GetMemoryInfo());
  // The arena is all the device memory the backend takes (a real driver adds a little for its
  // streams, events and kernel code).
  EXPECT_GE(before.free - after_create.free, options.budget);
  EXPECT_LE(before.free - after_create.free, options.budget + 16 * kMiB);
  const BackendMemory empty = backend->Memory();
  EXPECT_EQ(empty.arena, options.budget);
  EXPECT_EQ(empty.scratch, 0);
  EXPECT_EQ(empty.kv_pool, options.kv_pool_bytes);
  ExpectEveryByteAccounted(*backend, {});

  const std::vector<std::string> dirs = Df11Models();
  std::vector<std::unique_ptr<PlacedModel>> resident;
  std::unique_ptr<KvCache> cache;
  for (int round = 0; round < 40; ++round) {
    if (resident.empty() || (resident.size() < dirs.size() && rng() % 2 == 0)) {
      DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> m,
                                Place(*backend, dirs[rng() % dirs.size()]));
      resident.push_back(std::move(m));
      if (cache == nullptr) {
        DF11_ASSERT_OK_AND_ASSIGN(cache, backend->NewCache(resident.back()->config(), 100));
      }
    } else {
      resident.erase(resident.begin() + static_cast<ptrdiff_t>(rng() % resident.size()));
      if (rng() % 2 == 0) cache.reset();
    }
    std::vector<const PlacedModel*> models;
    for (const auto& m : resident) models.push_back(m.get());
    ExpectEveryByteAccounted(*backend, models);
    // Loads and unloads take nothing from the driver: everything is in the arena.
    DF11_ASSERT_OK_AND_ASSIGN(GpuDevice::MemoryInfo now, raw->GetMemoryInfo());
    EXPECT_EQ(now.free, after_create.free) << "round " << round;
    EXPECT_EQ(backend->Memory().device_free, now.free);
  }
  cache.reset();
  resident.clear();
  // Unloaded, every byte is back: only the workspace and the KV pool stay allocated.
  const BackendMemory m = backend->Memory();
  EXPECT_EQ(m.scratch, 0);
  EXPECT_EQ(m.kv_cache, 0);
  EXPECT_EQ(backend->arena_allocated_bytes(), m.workspace + m.kv_pool);
}

TEST_F(CudaBackendTest, ScratchIsSizedByTheLargestResidentModel) {
  std::unique_ptr<CudaBackend> backend = NewBackend(SmallOptions());
  ASSERT_NE(backend, nullptr);
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> small_host,
                            Model::Load(Df11Dir("qwen2"), backend->HostLoadOptions()));
  DF11_ASSERT_OK_AND_ASSIGN(GpuModelPlan small_plan, PlanGpuModel(*small_host, 64 << 10));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> small,
                            backend->Place(std::move(small_host), {}));
  const uint64_t small_scratch = backend->Memory().scratch;
  EXPECT_EQ(small_scratch,
            (small_plan.scratch_elements[0] * 2 + (64 << 10) - 1) / (64 << 10) * (64 << 10) +
                (small_plan.scratch_elements[1] * 2 + (64 << 10) - 1) / (64 << 10) * (64 << 10));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> large, Place(*backend, Df11Dir("llama3")));
  EXPECT_GT(backend->Memory().scratch, small_scratch);
  large.reset();
  EXPECT_EQ(backend->Memory().scratch, small_scratch);
  small.reset();
  EXPECT_EQ(backend->Memory().scratch, 0);
}

TEST_F(CudaBackendTest, ALoadThatDoesNotFitIsResourceExhaustedAndOthersKeepDecoding) {
  CudaBackend::Options options = SmallOptions();
  options.budget = 8 * kMiB;
  options.kv_pool_bytes = 1 * kMiB;
  std::unique_ptr<CudaBackend> backend = NewBackend(options);
  ASSERT_NE(backend, nullptr);
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> small, Place(*backend, Df11Dir("qwen2")));
  const uint64_t allocated = backend->arena_allocated_bytes();
  std::vector<std::unique_ptr<PlacedModel>> more;
  absl::Status status;
  while (status.ok()) {
    absl::StatusOr<std::unique_ptr<PlacedModel>> m = Place(*backend, Df11Dir("llama3"));
    if (m.ok()) more.push_back(*std::move(m));
    status = m.status();
  }
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kResourceExhausted,
                               HasSubstr("bytes on cuda:0; the arena of 8388608 bytes has")));
  std::vector<const PlacedModel*> models = {small.get()};
  for (const auto& m : more) models.push_back(m.get());
  ExpectEveryByteAccounted(*backend, models);
  ExpectDecodesLikeTheCpu(*backend, *small, Df11Dir("qwen2"));
  more.clear();
  EXPECT_EQ(backend->arena_allocated_bytes(), allocated);
}

// Models of different sizes loaded and unloaded leave holes; a load that fits only in the sum of
// the holes compacts the arena, and the models that moved still decode exactly.
TEST_F(CudaBackendTest, FragmentationIsCompactedAway) {
  CudaBackend::Options options = SmallOptions();
  std::unique_ptr<CudaBackend> probe = NewBackend(options);
  ASSERT_NE(probe, nullptr);
  DF11_ASSERT_OK_AND_ASSIGN(ModelEstimate small_e, EstimateModel(Df11Dir("qwen2")));
  DF11_ASSERT_OK_AND_ASSIGN(ModelEstimate large_e, EstimateModel(Df11Dir("llama3")));
  const uint64_t small_bytes =
      probe->EstimatePlacement(small_e).unit_bytes + probe->EstimatePlacement(small_e).plain_bytes;
  const uint64_t large_bytes =
      probe->EstimatePlacement(large_e).unit_bytes + probe->EstimatePlacement(large_e).plain_bytes;
  ASSERT_GT(large_bytes, small_bytes);
  // Room for the workspace, pool, scratch and six small models: then two holes of one small model
  // each, which only together hold the large one.
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> first, Place(*probe, Df11Dir("qwen2")));
  const uint64_t fixed = probe->arena_allocated_bytes() - small_bytes;
  first.reset();
  probe.reset();
  const uint64_t holes_needed = (large_bytes + small_bytes - 1) / small_bytes;
  ASSERT_LE(holes_needed, 3u);
  // Large models need more scratch; give the arena that growth too.
  options.budget = fixed + 6 * small_bytes + 8 * kMiB;
  options.budget = options.budget / options.granule * options.granule;
  std::unique_ptr<CudaBackend> backend = NewBackend(options);
  ASSERT_NE(backend, nullptr);
  std::vector<std::unique_ptr<PlacedModel>> models;
  while (true) {
    absl::StatusOr<std::unique_ptr<PlacedModel>> m = Place(*backend, Df11Dir("qwen2"));
    if (!m.ok()) break;
    models.push_back(*std::move(m));
  }
  ASSERT_GE(models.size(), 4u);
  // Free every other model: holes of one small model each.
  for (size_t i = 0; i < models.size(); i += 2) models[i].reset();
  EXPECT_EQ(backend->compactions(), 0);
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> large, Place(*backend, Df11Dir("llama3")));
  EXPECT_GE(backend->compactions(), 1);
  for (const auto& m : models) {
    if (m != nullptr) ExpectDecodesLikeTheCpu(*backend, *m, Df11Dir("qwen2"));
  }
  ExpectDecodesLikeTheCpu(*backend, *large, Df11Dir("llama3"));
}

TEST_F(CudaBackendTest, ACorruptUnitIsDataLossForThatModelOnly) {
  std::unique_ptr<CudaBackend> backend = NewBackend(SmallOptions());
  ASSERT_NE(backend, nullptr);
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> good, Place(*backend, Df11Dir("qwen3")));
  const uint64_t allocated = backend->arena_allocated_bytes();
  // A copy of qwen3 whose layer-1 stream is overwritten: its decoder layout cannot be built.
  const fs::path corrupt = fs::path(::testing::TempDir()) / "cuda_backend_corrupt";
  fs::remove_all(corrupt);
  fs::copy(Df11Dir("qwen3"), corrupt);
  {
    DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> m,
                              Model::Load(corrupt.string(), {.interleave = false}));
    DF11_ASSERT_OK_AND_ASSIGN(WeightLocation w, m->Locate("model.layers.1.mlp.up_proj.weight"));
    const auto& stream = m->units()[w.unit]->unit->tensors().encoded_exponent;
    // Find the stream's bytes in its file and overwrite the middle of it.
    const fs::path file = corrupt / "model_layers_1.safetensors";
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string needle(reinterpret_cast<const char*>(stream.data()), stream.size());
    const size_t at = bytes.find(needle);
    ASSERT_NE(at, std::string::npos);
    for (size_t i = stream.size() / 4; i < stream.size() / 2; ++i) bytes[at + i] = '\xff';
    m.reset();
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  }
  EXPECT_THAT(Place(*backend, corrupt.string()).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("model.layers.1")));
  EXPECT_EQ(backend->arena_allocated_bytes(), allocated);  // nothing of it is left
  ExpectDecodesLikeTheCpu(*backend, *good, Df11Dir("qwen3"));
}

#if !defined(DF11_TEST_ON_GPU)
// Fault injection: the emulated device only.
TEST_F(CudaBackendTest, ADecodeThatFailsOnTheDeviceNamesTheModelAndLayer) {
  std::unique_ptr<CudaBackend> backend = NewBackend(SmallOptions());
  ASSERT_NE(backend, nullptr);
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> model, Place(*backend, Df11Dir("qwen3")));
  emulated_->FailDecodes(true);
  DF11_ASSERT_OK(backend->DecodeLayer(*model, 2));
  EXPECT_THAT(backend->FinishDecodes(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("decoding layer 2 of ")));
  emulated_->FailDecodes(false);
  DF11_ASSERT_OK(backend->DecodeLayer(*model, 2));
  DF11_EXPECT_OK(backend->FinishDecodes());
}
#endif

TEST_F(CudaBackendTest, ManyLoadUnloadCyclesLeakNothing) {
#if defined(DF11_TEST_ON_GPU)
  constexpr int kCycles = 10000;
#else
  constexpr int kCycles = 1000;  // the emulator re-runs the same host logic; CI time is finite
#endif
  const uint64_t seed = ::df11::testing::TestSeed();
  SCOPED_TRACE(::df11::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  CudaBackend::Options options = SmallOptions();
  options.budget = 16 * kMiB;
  std::unique_ptr<CudaBackend> backend = NewBackend(options);
  ASSERT_NE(backend, nullptr);
  const std::vector<std::string> dirs = Df11Models();
  std::vector<std::unique_ptr<PlacedModel>> resident;
  const uint64_t baseline = backend->arena_allocated_bytes();
  int placed = 0;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    if (resident.size() < 6 && rng() % 3 != 0) {
      absl::StatusOr<std::unique_ptr<PlacedModel>> m = Place(*backend, dirs[rng() % dirs.size()]);
      if (m.ok()) {
        resident.push_back(*std::move(m));
        ++placed;
      } else {
        ASSERT_THAT(m.status(), StatusIs(absl::StatusCode::kResourceExhausted))
            << "cycle " << cycle;
        ASSERT_FALSE(resident.empty()) << "an empty arena refused a model: " << m.status();
        resident.erase(resident.begin());
      }
    } else if (!resident.empty()) {
      resident.erase(resident.begin() + static_cast<ptrdiff_t>(rng() % resident.size()));
    }
  }
  EXPECT_GT(placed, kCycles / 3);
  resident.clear();
  EXPECT_EQ(backend->arena_allocated_bytes(), baseline);
  EXPECT_EQ(backend->arena_allocations(), 2);  // workspace and KV pool
  // The emulated device aborts if the backend leaves anything behind when it is destroyed.
  backend.reset();
}

// The scratch an estimate assumes from the config covers what the files need.
TEST_F(CudaBackendTest, ScratchFromTheConfigCoversThePlan) {
  for (const std::string& dir : Df11Models()) {
    SCOPED_TRACE(dir);
    DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> host, Model::Load(dir, {.interleave = false}));
    DF11_ASSERT_OK_AND_ASSIGN(GpuModelPlan plan, PlanGpuModel(*host, 64 << 10));
    const std::array<uint64_t, 2> config = ScratchElementsFromConfig(host->config(), true);
    EXPECT_LE(plan.scratch_elements[0], config[0]);
    EXPECT_LE(plan.scratch_elements[1], config[1]);
    // One unit per layer holding its seven matrices: exactly the config's layer.
    EXPECT_EQ(plan.layers[0].decode.units.size(), 1u);
    EXPECT_EQ(plan.layers[0].decode.scratch_elements, host->layer_scratch_elements());
  }
}

// The products that share an input are adjacent where a pass reads them: in a DF11 unit's scratch
// (its tensors in order) and among a BF16 model's plain tensors (laid out so), unless padding
// between small tensors separates them.
TEST_F(CudaBackendTest, ProductsThatShareAnInputAreAdjacent) {
  for (const std::string& dir :
       {Df11Dir("llama3"), (::df11::testing::TestDataDir("engine") / "llama3").string()}) {
    SCOPED_TRACE(dir);
    DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> host, Model::Load(dir, {.interleave = false}));
    DF11_ASSERT_OK_AND_ASSIGN(GpuModelPlan plan, PlanGpuModel(*host, 64 << 10));
    for (const LayerPlan& layer : plan.layers) {
      EXPECT_TRUE(layer.qkv_adjacent);
      EXPECT_TRUE(layer.gate_up_adjacent);
      EXPECT_EQ(layer.tensors[1].offset, layer.tensors[0].offset + layer.tensors[0].bytes);
      EXPECT_EQ(layer.tensors[5].offset, layer.tensors[4].offset + layer.tensors[4].bytes);
    }
  }
  // qwen2's biases of 96 and 32 values are padded apart: no grouped product there.
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> qwen2,
                            Model::Load(Df11Dir("qwen2"), {.interleave = false}));
  DF11_ASSERT_OK_AND_ASSIGN(GpuModelPlan plan, PlanGpuModel(*qwen2, 64 << 10));
  EXPECT_FALSE(plan.layers[0].qkv_adjacent);
  EXPECT_TRUE(plan.layers[0].gate_up_adjacent);
}

TEST_F(CudaBackendTest, KvCachesTakePagesOfThePool) {
  std::unique_ptr<CudaBackend> backend = NewBackend(SmallOptions());
  ASSERT_NE(backend, nullptr);
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> model, Place(*backend, Df11Dir("qwen3")));
  const ModelConfig& c = model->config();
  const uint64_t per_position = backend->KvBytesPerPosition(c);
  EXPECT_EQ(per_position, 2ull * c.num_layers * c.num_kv_heads * c.head_dim * 2);
  const uint64_t per_page = (64 << 10) / per_position;
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<KvCache> cache, backend->NewCache(c, 1000));
  EXPECT_EQ(cache->capacity(), 1000);
  EXPECT_EQ(cache->bytes(), (1000 + per_page - 1) / per_page * (64 << 10));
  EXPECT_EQ(backend->Memory().kv_cache, cache->bytes());
  EXPECT_THAT(backend->NewCache(c, 1000000),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("the KV pool has")));
  cache.reset();
  EXPECT_EQ(backend->Memory().kv_cache, 0);
}

const nlohmann::json& EngineGoldens() {
  static const nlohmann::json* goldens = [] {
    std::ifstream in(::df11::testing::TestDataDir("engine") / "goldens.json");
    return new nlohmann::json(nlohmann::json::parse(in));
  }();
  return *goldens;
}

// Every architecture of the engine goldens (tests/data/engine, from transformers), from its DF11
// and its BF16 directory: transformers' greedy token after the prompt, and its next-token logits
// within relative L2 2e-2 (BF16 activations against transformers' fp32: 1.5 % on gemma3, under
// 1 % on the others); and the step's logits the same whether a sequence runs alone or batched
// with others.
class CudaForwardTest
    : public CudaBackendTest,
      public ::testing::WithParamInterface<std::tuple<std::string, CudaBackend::GpuLayout>> {};

TEST_P(CudaForwardTest, GivesTransformersLogitsAloneAndBatched) {
  const auto [name, layout] = GetParam();
  CudaBackend::Options options = SmallOptions();
  options.layout = layout;
  std::unique_ptr<CudaBackend> backend = NewBackend(options);
  ASSERT_NE(backend, nullptr);
  for (const std::string& dir :
       {Df11Dir(name), (::df11::testing::TestDataDir("engine") / name).string()}) {
    SCOPED_TRACE(dir);
    DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> model, Place(*backend, dir));
    const int64_t V = model->config().vocab_size;
    if (layout == CudaBackend::GpuLayout::kTiled) {
      // DF11 projections are tiled, and short passes multiply by them without decoding them.
      EXPECT_EQ(backend->tiled_units(*model) > 0, model->is_df11());
      EXPECT_EQ(backend->fused(*model, 0), model->is_df11());
    } else {
      // Every DF11 unit is in the lane-stream layout: short passes multiply by the projections
      // whose rows the fused product takes (multiples of 256 weights: few in these small
      // models), and decode the others.
      EXPECT_EQ(backend->lane_units(*model) > 0, model->is_df11());
      EXPECT_EQ(backend->tiled_units(*model), 0u);
    }
    const auto& cases = EngineGoldens()["models"][name];
    std::vector<std::unique_ptr<KvCache>> caches;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::vector<float>> alone;
    std::vector<int32_t> firsts;  // each prompt's greedy token
    for (const auto& c : cases) {
      prompts.push_back(c["prompt"].get<std::vector<int32_t>>());
      DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<KvCache> cache,
                                backend->NewCache(model->config(), 64));
      SequenceStep step{cache.get(), prompts.back()};
      std::vector<float> logits(V);
      DF11_ASSERT_OK(backend->Forward(*model, std::span(&step, 1), logits));
      EXPECT_LE(RelativeL2(logits, c["next_token_logits"].get<std::vector<double>>()), 2e-2)
          << "prompt of " << prompts.back().size() << " tokens";
      // A decode step from the cache, fed transformers' greedy token after the prompt (so that
      // a miss here is not counted twice).
      const int32_t next = c["greedy"][0].get<int32_t>();
      EXPECT_EQ(Argmax(logits), next);
      firsts.push_back(next);
      SequenceStep decode{cache.get(), std::span(&next, 1)};
      DF11_ASSERT_OK(backend->Forward(*model, std::span(&decode, 1), logits));
      EXPECT_EQ(cache->length(), static_cast<int64_t>(prompts.back().size()) + 1);
      // The decode step's attention (FlashInfer's for heads of 128 and 256 on a GPU) gives
      // transformers' next greedy token.
      EXPECT_EQ(Argmax(logits), c["greedy"][1].get<int32_t>()) << "the decode step's token";
      alone.push_back(logits);
      caches.push_back(std::move(cache));
    }
    // The same two steps, every sequence in one batch.
    std::vector<std::unique_ptr<KvCache>> batched_caches;
    std::vector<SequenceStep> steps;
    for (const auto& p : prompts) {
      DF11_ASSERT_OK_AND_ASSIGN(batched_caches.emplace_back(),
                                backend->NewCache(model->config(), 64));
      steps.push_back({batched_caches.back().get(), p});
    }
    std::vector<float> logits(steps.size() * V);
    DF11_ASSERT_OK(backend->Forward(*model, steps, logits));
    size_t batched_rows = 0;
    for (const auto& p : prompts) batched_rows += p.size();
    // Whether short passes multiply by any lane-stream unit (a layer's or the head's).
    bool any_lane_fused = false;
    if (layout == CudaBackend::GpuLayout::kLane) {
      for (int64_t l = -1; l < model->config().num_layers; ++l) {
        any_lane_fused = any_lane_fused || backend->fused(*model, l);
      }
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      EXPECT_EQ(Argmax(std::span(logits).subspan(i * V, V)), firsts[i]) << "sequence " << i;
      steps[i].tokens = std::span(&firsts[i], 1);
    }
    DF11_ASSERT_OK(backend->Forward(*model, steps, logits));
    for (size_t i = 0; i < steps.size(); ++i) {
      const std::span<const float> mine = std::span(logits).subspan(i * V, V);
      // The emulated device's passes agree bit for bit, and a GPU's within 1e-3, except where a
      // sequence's prompt went through the fused lane-stream product alone (a short pass) and
      // through decoded weights in the batch (a long one): the two sum in different orders, and
      // the differences, rounded into BF16 activations, take the bound used against transformers.
      const bool same_products = layout == CudaBackend::GpuLayout::kTiled || !any_lane_fused ||
                                 (prompts[i].size() > ForwardOps::kMaxTiledRows) ==
                                     (batched_rows > ForwardOps::kMaxTiledRows);
      const std::vector<double> reference(alone[i].begin(), alone[i].end());
      if (!same_products) {
        EXPECT_LE(RelativeL2(mine, reference), 2e-2) << "sequence " << i;
      } else if (emulated_ != nullptr) {
        EXPECT_TRUE(std::equal(mine.begin(), mine.end(), alone[i].begin())) << "sequence " << i;
      } else {
        EXPECT_LE(RelativeL2(mine, reference), 1e-3) << "sequence " << i;
      }
    }
    ExpectEveryByteAccounted(*backend, {model.get()});
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, CudaForwardTest,
                         ::testing::Combine(::testing::Values("llama3", "qwen2", "qwen3", "mistral",
                                                              "gemma2", "gemma3", "gemma3_mm",
                                                              "phi3", "qwen3_h128", "gemma2_h256"),
                                            ::testing::Values(CudaBackend::GpuLayout::kTiled,
                                                              CudaBackend::GpuLayout::kLane)));

// The lane-stream layout on a model whose rows the fused product takes (multiples of 256): long
// passes decode its units into scratch and give what DF11's layout gives, bit for bit; short
// passes multiply by the compressed units (projections and the untied head) and agree with the
// decoded ones up to fp32 summation order (whose differences, rounded into BF16 activations,
// carry through the layers and the KV cache), with the same greedy tokens.
TEST_F(CudaBackendTest, LaneLayoutMultipliesByTheCompressedUnitsInShortPasses) {
  const fs::path bf16 = fs::path(::testing::TempDir()) / "lane_synth";
  const fs::path df11 = fs::path(::testing::TempDir()) / "lane_synth_df11";
  DF11_ASSERT_OK(tool::WriteSyntheticModel(bf16.string(), {.arch = "qwen3",
                                                           .layers = 2,
                                                           .hidden = 256,
                                                           .intermediate = 768,
                                                           .heads = 4,
                                                           .kv_heads = 2,
                                                           .head_dim = 64,
                                                           .vocab = 512}));
  DF11_ASSERT_OK(codec::CompressModel(bf16.string(), df11.string(), {}));
  CudaBackend::Options lane_options = SmallOptions(), df11_options = SmallOptions();
  lane_options.layout = CudaBackend::GpuLayout::kLane;
  df11_options.fused_max_rows = 0;
  std::unique_ptr<CudaBackend> lane = NewBackend(lane_options);
  std::unique_ptr<CudaBackend> plain = NewBackend(df11_options);
  ASSERT_NE(lane, nullptr);
  ASSERT_NE(plain, nullptr);
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> a, Place(*lane, df11.string()));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> b, Place(*plain, df11.string()));
  EXPECT_GT(lane->lane_units(*a), 0u);
  EXPECT_TRUE(lane->fused(*a, 0));
  EXPECT_TRUE(lane->fused(*a, -1));  // the untied head
  EXPECT_EQ(plain->lane_units(*b), 0u);
  EXPECT_EQ(a->unit_bytes() + a->plain_bytes(), b->unit_bytes() + b->plain_bytes());
  const int64_t V = a->config().vocab_size;
  std::vector<int32_t> tokens = {1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45};
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<KvCache> ca, lane->NewCache(a->config(), 64));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<KvCache> cb, plain->NewCache(b->config(), 64));
  std::vector<float> la(V), lb(V);
  for (int step = 0; step < 5; ++step) {
    SequenceStep sa{ca.get(), tokens}, sb{cb.get(), tokens};
    DF11_ASSERT_OK(lane->Forward(*a, std::span(&sa, 1), la));
    DF11_ASSERT_OK(plain->Forward(*b, std::span(&sb, 1), lb));
    if (step == 0) {
      EXPECT_TRUE(la == lb) << "the prompt's pass decodes: the same weights, the same logits";
    } else {
      EXPECT_LE(RelativeL2(la, std::vector<double>(lb.begin(), lb.end())), 1e-2) << step;
      EXPECT_EQ(Argmax(la), Argmax(lb)) << step;
    }
    tokens = {Argmax(lb)};
  }
  ExpectEveryByteAccounted(*lane, {a.get()});
}

// Short passes through tiled projections give what the decoded projections give (bit for bit on
// the emulated device, whose products are the reference's; within fp32 summation order on a GPU);
// with fused_max_rows 0 nothing is tiled. Passes longer than fused_max_rows decode as before.
TEST_F(CudaBackendTest, TiledProjectionsGiveWhatDecodedOnesGive) {
  CudaBackend::Options decoded_options = SmallOptions();
  decoded_options.fused_max_rows = 0;
  std::unique_ptr<CudaBackend> tiled = NewBackend(SmallOptions());
  std::unique_ptr<CudaBackend> decoded = NewBackend(decoded_options);
  ASSERT_NE(tiled, nullptr);
  ASSERT_NE(decoded, nullptr);
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> a, Place(*tiled, Df11Dir("llama3")));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> b, Place(*decoded, Df11Dir("llama3")));
  EXPECT_GT(tiled->tiled_units(*a), 0u);
  EXPECT_TRUE(tiled->fused(*a, -1));  // llama3's untied head too
  EXPECT_EQ(decoded->tiled_units(*b), 0u);
  EXPECT_FALSE(decoded->fused(*b, 0));
  EXPECT_EQ(a->unit_bytes() + a->plain_bytes(), b->unit_bytes() + b->plain_bytes());
  const int64_t V = a->config().vocab_size;
  // A prompt of 12 tokens (decoded in both), then 1-token steps (tiled in one).
  std::vector<int32_t> tokens = {1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45};
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<KvCache> ca, tiled->NewCache(a->config(), 64));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<KvCache> cb, decoded->NewCache(b->config(), 64));
  std::vector<float> la(V), lb(V);
  for (int step = 0; step < 4; ++step) {
    SequenceStep sa{ca.get(), tokens}, sb{cb.get(), tokens};
    DF11_ASSERT_OK(tiled->Forward(*a, std::span(&sa, 1), la));
    DF11_ASSERT_OK(decoded->Forward(*b, std::span(&sb, 1), lb));
    if (emulated_ != nullptr) {
      EXPECT_TRUE(la == lb) << "step " << step;
    } else {
      EXPECT_LE(RelativeL2(la, std::vector<double>(lb.begin(), lb.end())), 1e-3) << "step " << step;
    }
    tokens = {Argmax(lb)};
  }
  ExpectEveryByteAccounted(*tiled, {a.get()});
}

// Hot swaps: while one model generates, other models are loaded and unloaded (the scratch grows
// and shrinks, the arena compacts); every step's logits are those of a run with nothing else
// going on, bit for bit.
TEST_F(CudaBackendTest, LoadsAndUnloadsDuringGenerationChangeNothing) {
  std::unique_ptr<CudaBackend> backend = NewBackend(SmallOptions());
  ASSERT_NE(backend, nullptr);
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> model, Place(*backend, Df11Dir("qwen3")));
  const int64_t V = model->config().vocab_size;
  // A prompt of 8 tokens (decoded projections), then 1-token steps (tiled ones).
  auto generate = [&](std::vector<std::vector<float>>& out) {
    absl::StatusOr<std::unique_ptr<KvCache>> cache = backend->NewCache(model->config(), 64);
    ASSERT_TRUE(cache.ok()) << cache.status();
    std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6};
    std::vector<float> logits(V);
    for (int step = 0; step < 12; ++step) {
      SequenceStep s{cache->get(), tokens};
      DF11_ASSERT_OK(backend->Forward(*model, std::span(&s, 1), logits));
      out.push_back(logits);
      tokens = {Argmax(logits)};
    }
  };
  std::vector<std::vector<float>> quiet;
  generate(quiet);
  ASSERT_EQ(quiet.size(), 12u);

  std::atomic<bool> stop = false;
  std::atomic<int> swaps = 0;
  std::thread churn([&] {
    const std::vector<std::string> others = {Df11Dir("llama3"), Df11Dir("phi3"), Bf16Dir(),
                                             Df11Dir("qwen2")};
    while (!stop) {
      for (const std::string& dir : others) {
        absl::StatusOr<std::unique_ptr<PlacedModel>> other = Place(*backend, dir);
        EXPECT_TRUE(other.ok()) << other.status();
        ++swaps;  // and unloaded here
      }
    }
  });
  // Six runs at least, and until a load and an unload have overlapped one (a slow machine may
  // finish six before the first load).
  for (int run = 0; run < 6 || (swaps.load() < 2 && run < 500); ++run) {
    std::vector<std::vector<float>> busy;
    generate(busy);
    ASSERT_EQ(busy.size(), quiet.size());
    for (size_t step = 0; step < quiet.size(); ++step) {
      EXPECT_TRUE(busy[step] == quiet[step]) << "run " << run << ", step " << step;
    }
  }
  stop = true;
  churn.join();
  EXPECT_GT(swaps.load(), 0);
  ExpectEveryByteAccounted(*backend, {model.get()});
}

// Prompts longer than a pass run in several passes; the logits and the next steps are the same.
TEST_F(CudaBackendTest, LongPromptsRunInPassesWithTheSameResults) {
  CudaBackend::Options small_passes = SmallOptions();
  small_passes.max_pass_tokens = 4;
  std::unique_ptr<CudaBackend> whole = NewBackend(SmallOptions());
  std::unique_ptr<CudaBackend> passes = NewBackend(small_passes);
  ASSERT_NE(whole, nullptr);
  ASSERT_NE(passes, nullptr);
  const std::string dir = Df11Dir("gemma3");
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> a, Place(*whole, dir));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> b, Place(*passes, dir));
  const int64_t V = a->config().vocab_size;
  // Three sequences of 17, 1 and 6 tokens: passes split the first across sequences' boundaries.
  const std::vector<std::vector<int32_t>> prompts = {
      {11, 250, 12, 13, 14, 15, 16, 200, 201, 3, 4, 5, 6, 7, 8, 9, 10}, {5}, {3, 17, 42, 7, 99, 1}};
  std::vector<float> expected(prompts.size() * V), got(prompts.size() * V);
  std::vector<std::unique_ptr<KvCache>> caches;
  for (auto [backend, model, out] :
       {std::tuple{whole.get(), a.get(), &expected}, {passes.get(), b.get(), &got}}) {
    std::vector<SequenceStep> steps;
    for (const auto& p : prompts) {
      DF11_ASSERT_OK_AND_ASSIGN(caches.emplace_back(), backend->NewCache(model->config(), 32));
      steps.push_back({caches.back().get(), p});
    }
    DF11_ASSERT_OK(backend->Forward(*model, steps, *out));
    for (size_t i = 0; i < steps.size(); ++i) {
      EXPECT_EQ(steps[i].cache->length(), static_cast<int64_t>(prompts[i].size()));
    }
  }
  if (emulated_ != nullptr) {
    EXPECT_EQ(got, expected);
  } else {
    EXPECT_LE(RelativeL2(got, std::vector<double>(expected.begin(), expected.end())), 1e-3);
  }
  caches.clear();
}

// The passes' buffers stay as workspace between passes, and give way to a model that needs room.
TEST_F(CudaBackendTest, ForwardBuffersStayUntilAModelNeedsTheRoom) {
  std::unique_ptr<CudaBackend> backend = NewBackend(SmallOptions());
  ASSERT_NE(backend, nullptr);
  const uint64_t idle = backend->Memory().workspace;
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> model, Place(*backend, Df11Dir("qwen3")));
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<KvCache> cache, backend->NewCache(model->config(), 32));
  const std::vector<int32_t> prompt = {3, 17, 42, 7, 99};
  SequenceStep step{cache.get(), prompt};
  std::vector<float> logits(model->config().vocab_size);
  DF11_ASSERT_OK(backend->Forward(*model, std::span(&step, 1), logits));
  const uint64_t kept = backend->Memory().workspace;
  EXPECT_GT(kept, idle);
  ExpectEveryByteAccounted(*backend, {model.get()});
  std::vector<std::unique_ptr<PlacedModel>> copies;
  std::vector<const PlacedModel*> all = {model.get()};
  while (true) {
    absl::StatusOr<std::unique_ptr<PlacedModel>> copy = Place(*backend, Bf16Dir());
    if (!copy.ok()) {
      EXPECT_THAT(copy.status(), StatusIs(absl::StatusCode::kResourceExhausted));
      break;
    }
    all.push_back(copy->get());
    copies.push_back(*std::move(copy));
  }
  EXPECT_EQ(backend->Memory().workspace, idle);
  ExpectEveryByteAccounted(*backend, all);
  // The next pass takes its buffers again where there is room, or says why not.
  copies.clear();
  const int32_t next = 1;
  SequenceStep decode{cache.get(), std::span(&next, 1)};
  DF11_ASSERT_OK(backend->Forward(*model, std::span(&decode, 1), logits));
  EXPECT_GT(backend->Memory().workspace, idle);
}

TEST_F(CudaBackendTest, ForwardRefusesBadSteps) {
  std::unique_ptr<CudaBackend> backend = NewBackend(SmallOptions());
  ASSERT_NE(backend, nullptr);
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> model, Place(*backend, Df11Dir("qwen3")));
  std::vector<float> logits(model->config().vocab_size);
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<KvCache> cache, backend->NewCache(model->config(), 2));
  const int32_t tokens[] = {1, 2, 3};
  SequenceStep too_long{cache.get(), tokens};
  EXPECT_THAT(backend->Forward(*model, std::span(&too_long, 1), logits),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds 2 positions")));
  const int32_t outside = static_cast<int32_t>(model->config().vocab_size);
  SequenceStep bad_token{cache.get(), std::span(&outside, 1)};
  EXPECT_THAT(backend->Forward(*model, std::span(&bad_token, 1), logits),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside the vocabulary")));
  std::vector<float> small(3);
  SequenceStep one{cache.get(), std::span(tokens, 1)};
  EXPECT_THAT(backend->Forward(*model, std::span(&one, 1), small),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("logits hold 3")));
  CpuBackend cpu({.threads = 1});
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<KvCache> cpu_cache, cpu.NewCache(model->config(), 2));
  SequenceStep foreign{cpu_cache.get(), std::span(tokens, 1)};
  EXPECT_THAT(backend->Forward(*model, std::span(&foreign, 1), logits),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("another backend")));
  EXPECT_EQ(cache->length(), 0);
  // A model placed elsewhere (the CPU's own) is refused.
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> host, Model::Load(Df11Dir("qwen3")));
  EXPECT_THAT(backend->Forward(*host, std::span(&one, 1), logits),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("placed on cpu")));
  EXPECT_THAT(backend->DecodeLayer(*host, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(backend->DecodeLayer(*model, 99), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(CudaBackendTest, PlacementReportsProgressAndCanBeCancelled) {
  std::unique_ptr<CudaBackend> backend = NewBackend(SmallOptions());
  ASSERT_NE(backend, nullptr);
  const uint64_t allocated = backend->arena_allocated_bytes();
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> host,
                            Model::Load(Df11Dir("llama3"), backend->HostLoadOptions()));
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  DF11_ASSERT_OK_AND_ASSIGN(std::unique_ptr<PlacedModel> model,
                            backend->Place(std::move(host), [&](uint64_t done, uint64_t total) {
                              calls.emplace_back(done, total);
                              return true;
                            }));
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back().first, calls.back().second);
  EXPECT_GT(calls.back().second, model->unit_bytes() / 2);
  model.reset();
  DF11_ASSERT_OK_AND_ASSIGN(host, Model::Load(Df11Dir("llama3"), backend->HostLoadOptions()));
  EXPECT_THAT(backend->Place(std::move(host), [](uint64_t, uint64_t) { return false; }).status(),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(backend->arena_allocated_bytes(), allocated);
}

TEST_F(CudaBackendTest, CreateRefusesBudgetsThatDoNotFit) {
  CudaBackend::Options options = SmallOptions();
  options.kv_pool_bytes = options.budget;
  EXPECT_THAT(CudaBackend::Create(NewDevice(), options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("leaves no room for models")));
  options = SmallOptions();
  options.granule = 3000;
  EXPECT_THAT(CudaBackend::Create(NewDevice(), options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("power of two")));
  options = SmallOptions();
  options.budget = uint64_t{1} << 50;  // a petabyte
  EXPECT_THAT(CudaBackend::Create(NewDevice(), options).status(),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

}  // namespace
}  // namespace df11::runtime
