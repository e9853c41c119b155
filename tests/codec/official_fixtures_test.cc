// The official DFloat11 encoder's output (tests/data/official, made by
// tools/make_official_fixtures.py with dfloat11 0.5.0) decodes bit-exactly with both CPU decoders,
// and df11's encoder reproduces the official bytes.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codec/architecture.h"
#include "codec/decoder.h"
#include "codec/encoder.h"
#include "codec/format.h"
#include "codec/huffman.h"
#include "codec/lut.h"
#include "codec/model.h"
#include "codec/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/codec/gpu_emulation.h"
#ifdef DF11_HAVE_CUDA
#include "codec/cuda/device_unit.h"
#include "codec/cuda/devices.h"
#endif
#include "tests/testing/checkpoint_compare.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_data_dir.h"

namespace df11::codec {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAreArray;

fs::path OfficialData() { return ::df11::testing::TestDataDir("official"); }

std::vector<uint8_t> Bytes(const TensorView& t) {
  const auto* p = reinterpret_cast<const uint8_t*>(t.data.data());
  return {p, p + t.data.size()};
}

std::vector<uint16_t> Bf16(const TensorView& t) {
  std::vector<uint16_t> v(t.data.size() / 2);
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

// df11 keeps 24-bit-prefix LUT rows free of pointers in the entries no code owns; the official
// builder carries a pointer into them. Every other byte must be equal.
void ExpectSameLuts(const std::vector<uint8_t>& ours, const std::vector<uint8_t>& official) {
  ASSERT_EQ(ours.size(), official.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    if (ours[i] == official[i]) continue;
    EXPECT_GE(official[i], format::kFirstPointerValue) << "LUT byte " << i;
    EXPECT_LT(ours[i], format::kFirstPointerValue) << "LUT byte " << i;
  }
}

class OfficialUnitTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OfficialUnitTest, DecodesBitExactlyWithEveryDecoder) {
  DF11_ASSERT_OK_AND_ASSIGN(SafetensorsFile file,
                            SafetensorsFile::Open(OfficialData() / "units" / GetParam()));
  std::vector<int64_t> splits;
  DF11_ASSERT_OK_AND_ASSIGN(UnitTensors tensors, FindUnitTensors(file, "unit", splits));
  DF11_ASSERT_OK_AND_ASSIGN(Unit unit, Unit::Validate(tensors, "unit"));
  const std::vector<uint16_t> expected = Bf16(*file.Find("expected"));

  std::vector<uint16_t> reference(unit.num_elements(), 0xFFFF);
  DF11_ASSERT_OK(DecodeReference(unit, reference));
  EXPECT_EQ(reference, expected);
  std::vector<uint16_t> parallel(unit.num_elements(), 0xFFFF);
  DF11_ASSERT_OK(DecodeParallel(unit, parallel, nullptr));
  EXPECT_EQ(parallel, expected);
  ThreadPool pool(3);
  std::fill(parallel.begin(), parallel.end(), 0xFFFF);
  DF11_ASSERT_OK(DecodeParallel(unit, parallel, &pool));
  EXPECT_EQ(parallel, expected);
  std::fill(parallel.begin(), parallel.end(), 0xFFFF);
  DF11_ASSERT_OK(::df11::testing::DecodeWithGpuStepsOnCpu(unit, parallel));
  EXPECT_EQ(parallel, expected);
#ifdef DF11_HAVE_CUDA
  absl::StatusOr<std::vector<cuda::DeviceInfo>> devices = cuda::ListDevices();
  if (devices.ok() && !devices->empty()) {
    std::fill(parallel.begin(), parallel.end(), 0xFFFF);
    DF11_ASSERT_OK(gpu::DecodeOnDevice(unit, parallel));
    EXPECT_EQ(parallel, expected);
  }
#endif
}

TEST_P(OfficialUnitTest, EncoderReproducesTheOfficialBytes) {
  DF11_ASSERT_OK_AND_ASSIGN(SafetensorsFile file,
                            SafetensorsFile::Open(OfficialData() / "units" / GetParam()));
  const std::vector<uint16_t> expected = Bf16(*file.Find("expected"));
  const nlohmann::json parts = nlohmann::json::parse(file.metadata().at("parts"));
  std::vector<std::span<const uint16_t>> spans;
  size_t offset = 0;
  for (const auto& shape : parts) {
    const size_t n = shape[0].get<size_t>() * shape[1].get<size_t>();
    spans.emplace_back(expected.data() + offset, n);
    offset += n;
  }
  ASSERT_EQ(offset, expected.size());
  DF11_ASSERT_OK_AND_ASSIGN(EncodedUnit ours, EncodeUnit(spans));

  auto official = [&](const char* field) {
    return Bytes(*file.Find(std::string("unit.") + field));
  };
  EXPECT_EQ(ours.encoded_exponent, official(format::kEncodedExponent));
  EXPECT_EQ(ours.sign_mantissa, official(format::kSignMantissa));
  EXPECT_EQ(ours.gaps, official(format::kGaps));
  ExpectSameLuts(ours.luts, official(format::kLuts));
  const auto* split_bytes = reinterpret_cast<const uint8_t*>(ours.split_positions.data());
  const std::vector<uint8_t> splits(split_bytes, split_bytes + 8 * ours.split_positions.size());
  EXPECT_EQ(splits, official(format::kSplitPositions));
  // df11 always writes n_blocks + 1 positions; the official writer can omit the last one (its
  // value is n_elements).
  std::vector<uint8_t> positions = official(format::kOutputPositions);
  const size_t n_blocks = format::NumBlocks(ours.encoded_exponent.size());
  if (positions.size() == 4 * n_blocks) {
    const uint32_t n = static_cast<uint32_t>(expected.size());
    for (int i = 0; i < 4; ++i) positions.push_back(static_cast<uint8_t>(n >> (8 * i)));
  }
  EXPECT_EQ(ours.output_positions, positions);
}

std::vector<std::string> UnitCases() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(OfficialData() / "units")) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Units, OfficialUnitTest, ::testing::ValuesIn(UnitCases()),
                         [](const auto& info) {
                           return info.param.substr(0, info.param.find('.'));
                         });

TEST(OfficialUnitTest, CorpusHoldsTheEdgeCases) {
  EXPECT_THAT(UnitCases(), ::testing::IsSupersetOf(
                               {"long_codes.safetensors", "missing_last_position.safetensors",
                                "byte_aligned_tail.safetensors", "tail_gap_chunk.safetensors",
                                "two_symbols.safetensors"}));
}

// codes.json: histograms -> the official code table and LUT bytes.
TEST(OfficialCodeTest, HuffmanCodeAndLutsMatchTheOfficialBuilder) {
  std::ifstream in(OfficialData() / "codes.json");
  ASSERT_TRUE(in) << "codes.json missing";
  const nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 20u);
  int limited = 0, compared = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    Histogram h{};
    for (const auto& [exponent, count] : c["counts"].items()) {
      h[std::stoi(exponent)] = count.get<uint64_t>();
    }
    DF11_ASSERT_OK_AND_ASSIGN(HuffmanCode code, BuildOfficialCode(h));
    EXPECT_EQ(code.limited, c["limited"].get<bool>());
    EXPECT_LE(code.max_length(), format::kMaxCodeLength);
    limited += code.limited;
    // Where counts tie at the limiter's k-th place, numpy's selection order decides the code;
    // df11 picks the smaller exponent, which gives another valid code.
    if (c.value("ties_at_boundary", false)) continue;
    for (const auto& [symbol, bits_value] : c["code"].items()) {
      const CodeWord w = symbol == "eof" ? code.eof : code.symbols[std::stoi(symbol)];
      EXPECT_EQ(w.length, bits_value[0].get<int>()) << "symbol " << symbol;
      EXPECT_EQ(w.bits, bits_value[1].get<uint32_t>()) << "symbol " << symbol;
    }
    DF11_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> luts, BuildLuts(code));
    const std::string hex = c["luts_hex"].get<std::string>();
    std::vector<uint8_t> official(hex.size() / 2);
    for (size_t i = 0; i < official.size(); ++i) {
      official[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    }
    ExpectSameLuts(luts, official);
    ++compared;
  }
  EXPECT_GE(limited, 2);
  EXPECT_GE(compared, 16);
}

// The worked example of codec/FORMAT.md: a non-canonical code and a carried LUT entry.
TEST(OfficialCodeTest, WorkedExampleFromTheFormatDocument) {
  Histogram h{};
  const int counts[] = {1, 2, 8, 40, 300, 1000, 2500, 4000, 1500, 400, 60, 4};
  for (int i = 0; i < 12; ++i) h[115 + i] = counts[i];
  DF11_ASSERT_OK_AND_ASSIGN(HuffmanCode code, BuildOfficialCode(h));
  EXPECT_EQ(code.symbols[120].length, 4);
  EXPECT_EQ(code.symbols[120].bits, 0b1111u);  // not canonical
  EXPECT_EQ(code.eof.length, 12);
  EXPECT_EQ(code.eof.bits, 0b111010000000u);
  DF11_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> luts, BuildLuts(code));
  ASSERT_EQ(luts.size(), 3u * 256);
  EXPECT_EQ(luts[0x00], 122);
  EXPECT_EQ(luts[0xE8], 255);        // pointer to row 1
  EXPECT_EQ(luts[256 + 0x00], 120);  // EOF's range, carried from row 0's last entry
  EXPECT_EQ(luts[256 + 0x10], 115);
  EXPECT_EQ(luts[512 + 115], 12);
}

// Whole models compressed by the official compress_model.
class OfficialModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OfficialModelTest, DecompressesToTheSourceCheckpoint) {
  const fs::path source = OfficialData() / GetParam();
  DF11_ASSERT_OK_AND_ASSIGN(Df11Model model,
                            Df11Model::Open(OfficialData() / (GetParam() + "_df11")));
  const fs::path out = fs::path(::testing::TempDir()) / ("restored_" + GetParam());
  fs::remove_all(out);
  DF11_ASSERT_OK(DecompressModel(model, out.string(), {}).status());
  ::df11::testing::ExpectSameCheckpoint(source, out);
}

TEST_P(OfficialModelTest, CompressWritesTheOfficialUnits) {
  const fs::path ours = fs::path(::testing::TempDir()) / ("ours_" + GetParam());
  fs::remove_all(ours);
  DF11_ASSERT_OK(CompressModel((OfficialData() / GetParam()).string(), ours.string(), {}).status());
  DF11_ASSERT_OK_AND_ASSIGN(Df11Model a, Df11Model::Open(ours.string()));
  DF11_ASSERT_OK_AND_ASSIGN(Df11Model b, Df11Model::Open(OfficialData() / (GetParam() + "_df11")));
  ASSERT_EQ(a.units().size(), b.units().size());
  for (size_t i = 0; i < a.units().size(); ++i) {
    const UnitTensors& x = a.units()[i].unit->tensors();
    const UnitTensors& y = b.units()[i].unit->tensors();
    SCOPED_TRACE(a.units()[i].path);
    EXPECT_EQ(a.units()[i].path, b.units()[i].path);
    EXPECT_THAT(x.encoded_exponent, ElementsAreArray(y.encoded_exponent));
    EXPECT_THAT(x.sign_mantissa, ElementsAreArray(y.sign_mantissa));
    EXPECT_THAT(x.gaps, ElementsAreArray(y.gaps));
    EXPECT_THAT(x.luts, ElementsAreArray(y.luts));
    EXPECT_THAT(x.split_positions, ElementsAreArray(y.split_positions));
  }
  ASSERT_EQ(a.passthrough().size(), b.passthrough().size());
  for (size_t i = 0; i < a.passthrough().size(); ++i) {
    EXPECT_EQ(a.passthrough()[i]->name, b.passthrough()[i]->name);
    EXPECT_EQ(Bytes(*a.passthrough()[i]), Bytes(*b.passthrough()[i]));
  }
}

// The official compressor ran with the pattern dict of the architecture's DF11 release
// (tiny_gemma3: gemma-3-*-it-DF11's, in transformers 5's model.language_model naming; tools/
// make_official_fixtures.py); DefaultPatternDict must give that dict, key order and spelling
// included.
TEST_P(OfficialModelTest, ConfigPatternDictIsTheDefault) {
  DF11_ASSERT_OK_AND_ASSIGN(Df11Model model,
                            Df11Model::Open(OfficialData() / (GetParam() + "_df11")));
  DF11_ASSERT_OK_AND_ASSIGN(ArchitectureInfo arch, ParseArchitecture(model.config()));
  // As CompressModel picks it: from where the checkpoint keeps the text tower's embeddings.
  for (const TensorView* t : model.passthrough()) {
    if (t->name == "model.language_model.embed_tokens.weight") {
      arch.text_tower_prefix = "model.language_model.";
    }
  }
  EXPECT_EQ(model.pattern_dict(), DefaultPatternDict(arch)) << arch.architecture;
}

INSTANTIATE_TEST_SUITE_P(Models, OfficialModelTest,
                         ::testing::Values("tiny_qwen3", "tiny_llama", "tiny_mistral", "tiny_phi3",
                                           "tiny_gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace df11::codec
