// Tests for codec/safetensors.h: writer/reader round trips, byte identity with the Python
// `safetensors` package, every corruption the reader must reject, and Checkpoint file selection.
#include "codec/safetensors.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace df11::codec {
namespace {

namespace fs = std::filesystem;
using ::df11::testing::IsOk;
using ::df11::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

std::span<const std::byte> AsBytes(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

std::string ToString(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// An 8-byte little-endian header length, the header bytes, then `data`.
std::string RawFile(std::string_view header, std::string_view data = "") {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(header.size() >> (8 * i)));
  out.append(header);
  out.append(data);
  return out;
}

std::string RawFileWithLength(uint64_t n, std::string_view rest) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
  out.append(rest);
  return out;
}

// The views point into `file`, which must outlive the result.
absl::StatusOr<SafetensorsFile> ParseString(const std::string& file) {
  return SafetensorsFile::Parse(AsBytes(file), "test.safetensors");
}
absl::StatusOr<SafetensorsFile> ParseString(std::string&& file) = delete;

// For inputs that must fail: only the status survives.
absl::Status ParseStatus(const std::string& file) { return ParseString(file).status(); }

// Produced once with Python 3.11, safetensors 0.8.0 and numpy 2.4.6:
//   import numpy as np, safetensors.numpy as stn
//   data = stn.save({
//       "b.weight": np.array([[1, 2], [3, 4]], dtype=np.float32),
//       "a": np.array([0.5, -1.0, 2.0], dtype=np.float16),
//       "mask": np.array([True, False]),
//       "step": np.array(7, dtype=np.int64),
//       "empty": np.zeros((0,), dtype=np.int8),
//       "u": np.array([1, 2, 255], dtype=np.uint8),
//       "zz": np.array([1.25], dtype=np.float64),
//       "q\"\\\n\x1b\u00e9": np.array([9], dtype=np.uint8),
//   }, metadata={"format": "np"})
// Header text: {"__metadata__":{"format":"np"},"step":{...I64...},"zz":{...F64...},
// "b.weight":{...F32...},"a":{...F16...},"empty":{...I8...},"q\"\\\n\u001bé":{...U8...},
// "u":{...U8...},"mask":{...BOOL...}} and four spaces of padding.
constexpr char kPythonGolden[] =
    "\xf8\x01\x00\x00\x00\x00\x00\x00\x7b\x22\x5f\x5f\x6d\x65\x74\x61"
    "\x64\x61\x74\x61\x5f\x5f\x22\x3a\x7b\x22\x66\x6f\x72\x6d\x61\x74"
    "\x22\x3a\x22\x6e\x70\x22\x7d\x2c\x22\x73\x74\x65\x70\x22\x3a\x7b"
    "\x22\x64\x74\x79\x70\x65\x22\x3a\x22\x49\x36\x34\x22\x2c\x22\x73"
    "\x68\x61\x70\x65\x22\x3a\x5b\x5d\x2c\x22\x64\x61\x74\x61\x5f\x6f"
    "\x66\x66\x73\x65\x74\x73\x22\x3a\x5b\x30\x2c\x38\x5d\x7d\x2c\x22"
    "\x7a\x7a\x22\x3a\x7b\x22\x64\x74\x79\x70\x65\x22\x3a\x22\x46\x36"
    "\x34\x22\x2c\x22\x73\x68\x61\x70\x65\x22\x3a\x5b\x31\x5d\x2c\x22"
    "\x64\x61\x74\x61\x5f\x6f\x66\x66\x73\x65\x74\x73\x22\x3a\x5b\x38"
    "\x2c\x31\x36\x5d\x7d\x2c\x22\x62\x2e\x77\x65\x69\x67\x68\x74\x22"
    "\x3a\x7b\x22\x64\x74\x79\x70\x65\x22\x3a\x22\x46\x33\x32\x22\x2c"
    "\x22\x73\x68\x61\x70\x65\x22\x3a\x5b\x32\x2c\x32\x5d\x2c\x22\x64"
    "\x61\x74\x61\x5f\x6f\x66\x66\x73\x65\x74\x73\x22\x3a\x5b\x31\x36"
    "\x2c\x33\x32\x5d\x7d\x2c\x22\x61\x22\x3a\x7b\x22\x64\x74\x79\x70"
    "\x65\x22\x3a\x22\x46\x31\x36\x22\x2c\x22\x73\x68\x61\x70\x65\x22"
    "\x3a\x5b\x33\x5d\x2c\x22\x64\x61\x74\x61\x5f\x6f\x66\x66\x73\x65"
    "\x74\x73\x22\x3a\x5b\x33\x32\x2c\x33\x38\x5d\x7d\x2c\x22\x65\x6d"
    "\x70\x74\x79\x22\x3a\x7b\x22\x64\x74\x79\x70\x65\x22\x3a\x22\x49"
    "\x38\x22\x2c\x22\x73\x68\x61\x70\x65\x22\x3a\x5b\x30\x5d\x2c\x22"
    "\x64\x61\x74\x61\x5f\x6f\x66\x66\x73\x65\x74\x73\x22\x3a\x5b\x33"
    "\x38\x2c\x33\x38\x5d\x7d\x2c\x22\x71\x5c\x22\x5c\x5c\x5c\x6e\x5c"
    "\x75\x30\x30\x31\x62\xc3\xa9\x22\x3a\x7b\x22\x64\x74\x79\x70\x65"
    "\x22\x3a\x22\x55\x38\x22\x2c\x22\x73\x68\x61\x70\x65\x22\x3a\x5b"
    "\x31\x5d\x2c\x22\x64\x61\x74\x61\x5f\x6f\x66\x66\x73\x65\x74\x73"
    "\x22\x3a\x5b\x33\x38\x2c\x33\x39\x5d\x7d\x2c\x22\x75\x22\x3a\x7b"
    "\x22\x64\x74\x79\x70\x65\x22\x3a\x22\x55\x38\x22\x2c\x22\x73\x68"
    "\x61\x70\x65\x22\x3a\x5b\x33\x5d\x2c\x22\x64\x61\x74\x61\x5f\x6f"
    "\x66\x66\x73\x65\x74\x73\x22\x3a\x5b\x33\x39\x2c\x34\x32\x5d\x7d"
    "\x2c\x22\x6d\x61\x73\x6b\x22\x3a\x7b\x22\x64\x74\x79\x70\x65\x22"
    "\x3a\x22\x42\x4f\x4f\x4c\x22\x2c\x22\x73\x68\x61\x70\x65\x22\x3a"
    "\x5b\x32\x5d\x2c\x22\x64\x61\x74\x61\x5f\x6f\x66\x66\x73\x65\x74"
    "\x73\x22\x3a\x5b\x34\x32\x2c\x34\x34\x5d\x7d\x7d\x20\x20\x20\x20"
    "\x07\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf4\x3f"
    "\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40"
    "\x00\x38\x00\xbc\x00\x40\x09\x01\x02\xff\x01\x00";

// The tensors above, added to `w` in an order unlike the file order.
struct GoldenTensors {
  const float b_weight[4] = {1, 2, 3, 4};
  const uint16_t a[3] = {0x3800, 0xBC00, 0x4000};  // float16 0.5, -1, 2
  const uint8_t mask[2] = {1, 0};
  const int64_t step = 7;
  const uint8_t u[3] = {1, 2, 255};
  const double zz = 1.25;
  const uint8_t q = 9;

  template <typename T>
  static std::span<const std::byte> Bytes(const T& v) {
    return std::as_bytes(std::span<const T>(&v, 1));
  }
  template <typename T, size_t N>
  static std::span<const std::byte> Bytes(const T (&v)[N]) {
    return std::as_bytes(std::span<const T>(v, N));
  }

  void AddTo(SafetensorsWriter& w) const {
    ASSERT_THAT(w.Add("b.weight", DType::kF32, {2, 2}, Bytes(b_weight)), IsOk());
    ASSERT_THAT(w.Add("a", DType::kF16, {3}, Bytes(a)), IsOk());
    ASSERT_THAT(w.Add("mask", DType::kBool, {2}, Bytes(mask)), IsOk());
    ASSERT_THAT(w.Add("step", DType::kI64, {}, Bytes(step)), IsOk());
    ASSERT_THAT(w.Add("empty", DType::kI8, {0}, {}), IsOk());
    ASSERT_THAT(w.Add("u", DType::kU8, {3}, Bytes(u)), IsOk());
    ASSERT_THAT(w.Add("zz", DType::kF64, {1}, Bytes(zz)), IsOk());
    ASSERT_THAT(w.Add("q\"\\\n\x1b\xc3\xa9", DType::kU8, {1}, Bytes(q)), IsOk());
    w.SetMetadata({{"format", "np"}});
  }
};

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           (std::string("safetensors_test_") + info->test_suite_name() + "_" + info->name() + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string PathOf(const std::string& name) const { return (dir_ / name).string(); }

  std::string WriteRaw(const std::string& name, const std::string& bytes) const {
    const std::string path = PathOf(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  fs::path dir_;
};

// --- DType ---------------------------------------------------------------------------------

TEST(DTypeTest, NamesAndSizesMatchSafetensors) {
  const std::vector<std::pair<DType, std::pair<std::string, size_t>>> expected = {
      {DType::kBool, {"BOOL", 1}},       {DType::kU8, {"U8", 1}},
      {DType::kI8, {"I8", 1}},           {DType::kF8_E5M2, {"F8_E5M2", 1}},
      {DType::kF8_E4M3, {"F8_E4M3", 1}}, {DType::kI16, {"I16", 2}},
      {DType::kU16, {"U16", 2}},         {DType::kF16, {"F16", 2}},
      {DType::kBF16, {"BF16", 2}},       {DType::kI32, {"I32", 4}},
      {DType::kU32, {"U32", 4}},         {DType::kF32, {"F32", 4}},
      {DType::kF64, {"F64", 8}},         {DType::kI64, {"I64", 8}},
      {DType::kU64, {"U64", 8}}};
  for (const auto& [dtype, name_size] : expected) {
    EXPECT_EQ(DTypeName(dtype), name_size.first);
    EXPECT_EQ(DTypeSize(dtype), name_size.second);
    absl::StatusOr<DType> parsed = ParseDType(name_size.first);
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(*parsed, dtype);
  }
}

TEST(DTypeTest, UnknownNameIsInvalidArgument) {
  EXPECT_THAT(ParseDType("bf16"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseDType("F4"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseDType(""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TensorViewTest, NumElementsIsProductAndOneForScalar) {
  TensorView t;
  EXPECT_EQ(t.num_elements(), 1);
  t.shape = {2, 3, 4};
  EXPECT_EQ(t.num_elements(), 24);
  t.shape = {5, 0};
  EXPECT_EQ(t.num_elements(), 0);
}

// --- Writer --------------------------------------------------------------------------------

TEST(SafetensorsWriterTest, SerializeMatchesPythonSafetensorsByteForByte) {
  GoldenTensors g;
  SafetensorsWriter w;
  g.AddTo(w);
  const std::string golden(kPythonGolden, sizeof(kPythonGolden) - 1);
  EXPECT_EQ(w.Serialize(), golden);
  EXPECT_EQ(w.SerializedSize(), golden.size());
}

TEST(SafetensorsWriterTest, EmptyWriterMatchesReference) {
  // safetensors.numpy.save({}) == b'\x08\x00\x00\x00\x00\x00\x00\x00{}      '
  EXPECT_EQ(SafetensorsWriter().Serialize(), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
}

TEST(SafetensorsWriterTest, MetadataComesFirstAndPaddingIsSpaces) {
  // safetensors.numpy.save({"x": np.array([1], dtype=np.uint8)}, metadata={"k": "v"})
  const uint8_t one = 1;
  SafetensorsWriter w;
  ASSERT_THAT(w.Add("x", DType::kU8, {1}, std::as_bytes(std::span(&one, 1))), IsOk());
  w.SetMetadata({{"k", "v"}});
  EXPECT_EQ(w.Serialize(),
            std::string("P\0\0\0\0\0\0\0", 8) +
                R"({"__metadata__":{"k":"v"},"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})"
                "  \x01");
}

TEST(SafetensorsWriterTest, SortsByDtypeDescendingThenName) {
  const std::byte two[2] = {};
  SafetensorsWriter w;
  ASSERT_THAT(w.Add("b", DType::kF16, {1}, two), IsOk());
  ASSERT_THAT(w.Add("a", DType::kF16, {1}, two), IsOk());
  ASSERT_THAT(w.Add("c", DType::kBF16, {1}, two), IsOk());
  ASSERT_THAT(w.Add("d", DType::kI16, {1}, two), IsOk());
  const std::string bytes = w.Serialize();
  DF11_ASSERT_OK_AND_ASSIGN(SafetensorsFile f, ParseString(bytes));
  std::vector<std::string> names;
  for (const TensorView& t : f.tensors()) names.push_back(t.name);
  EXPECT_THAT(names, ElementsAre("c", "a", "b", "d"));
}

TEST(SafetensorsWriterTest, HeaderIsPaddedToAMultipleOfEight) {
  for (int len = 1; len <= 9; ++len) {
    SafetensorsWriter w;
    ASSERT_THAT(w.Add(std::string(len, 'n'), DType::kU8, {0}, {}), IsOk());
    const std::string bytes = w.Serialize();
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);  // little-endian host
    EXPECT_EQ(n % 8, 0u) << len;
    EXPECT_EQ(bytes.size(), 8 + n) << len;
    EXPECT_EQ(bytes.find_last_not_of(' '), bytes.rfind('}')) << len;
  }
}

TEST(SafetensorsWriterTest, AddRejectsInvalidTensors) {
  const std::byte four[4] = {};
  SafetensorsWriter w;
  ASSERT_THAT(w.Add("t", DType::kF32, {1}, four), IsOk());
  EXPECT_THAT(w.Add("t", DType::kF32, {1}, four),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duplicate")));
  EXPECT_THAT(w.Add("neg", DType::kU8, {-4}, four),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative (-4)")));
  EXPECT_THAT(w.Add("size", DType::kF32, {2}, four),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs 8 bytes, data has 4")));
  EXPECT_THAT(w.Add("big", DType::kF32, {int64_t{1} << 62, 4}, four),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overflows")));
  EXPECT_THAT(w.Add("__metadata__", DType::kU8, {4}, four),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reserved")));
  EXPECT_THAT(w.Add("bad\xff", DType::kU8, {4}, four),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("UTF-8")));
}

TEST_F(SafetensorsTest, RoundTripPreservesTensorsAndMetadata) {
  const uint16_t bf16[6] = {0x3F80, 0x4000, 0x4040, 0xBF80, 0x0000, 0x7F80};
  const int32_t i32[2] = {-1, 123456};
  const uint8_t b = 1;
  SafetensorsWriter w;
  ASSERT_THAT(w.Add("layers.0.w", DType::kBF16, {2, 3}, std::as_bytes(std::span(bf16))), IsOk());
  ASSERT_THAT(w.Add("ids", DType::kI32, {2}, std::as_bytes(std::span(i32))), IsOk());
  ASSERT_THAT(w.Add("flag", DType::kBool, {}, std::as_bytes(std::span(&b, 1))), IsOk());
  ASSERT_THAT(w.Add("nothing", DType::kF32, {0, 7}, {}), IsOk());
  w.SetMetadata({{"format", "pt"}, {"dfloat11_config", "{\"a\": 1}"}});
  const std::string path = PathOf("rt.safetensors");
  ASSERT_THAT(w.WriteFile(path), IsOk());

  DF11_ASSERT_OK_AND_ASSIGN(SafetensorsFile f, SafetensorsFile::Open(path));
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.file_size(), w.SerializedSize());
  EXPECT_EQ(f.file_size(), fs::file_size(path));
  EXPECT_THAT(f.metadata(),
              ElementsAre(Pair("dfloat11_config", "{\"a\": 1}"), Pair("format", "pt")));
  // Written F32, I32, BF16, BOOL (descending dtype); the zero-size F32 tensor and "ids" share
  // offset 0 and the reader puts the zero-size one first.
  std::vector<std::string> names;
  for (const TensorView& t : f.tensors()) names.push_back(t.name);
  EXPECT_THAT(names, ElementsAre("nothing", "ids", "layers.0.w", "flag"));
  ASSERT_EQ(f.tensors().size(), 4u);
  const TensorView& ids = f.tensors()[1];
  EXPECT_EQ(ids.name, "ids");
  EXPECT_EQ(ids.dtype, DType::kI32);
  EXPECT_THAT(ids.shape, ElementsAre(2));
  EXPECT_EQ(ToString(ids.data), std::string(reinterpret_cast<const char*>(i32), 8));
  const TensorView* w0 = f.Find("layers.0.w");
  ASSERT_NE(w0, nullptr);
  EXPECT_EQ(w0->dtype, DType::kBF16);
  EXPECT_THAT(w0->shape, ElementsAre(2, 3));
  EXPECT_EQ(w0->num_elements(), 6);
  EXPECT_EQ(ToString(w0->data), std::string(reinterpret_cast<const char*>(bf16), 12));
  const TensorView* nothing = f.Find("nothing");
  ASSERT_NE(nothing, nullptr);
  EXPECT_THAT(nothing->shape, ElementsAre(0, 7));
  EXPECT_TRUE(nothing->data.empty());
  const TensorView* flag = f.Find("flag");
  ASSERT_NE(flag, nullptr);
  EXPECT_THAT(flag->shape, IsEmpty());
  EXPECT_EQ(flag->num_elements(), 1);
  EXPECT_EQ(ToString(flag->data), "\x01");
  EXPECT_EQ(f.Find("missing"), nullptr);
}

TEST_F(SafetensorsTest, WriteFileMatchesSerializeAndLeavesNoTempFile) {
  GoldenTensors g;
  SafetensorsWriter w;
  g.AddTo(w);
  const std::string path = PathOf("g.safetensors");
  WriteRaw("g.safetensors", "old contents");
  ASSERT_THAT(w.WriteFile(path), IsOk());
  std::ifstream in(path, std::ios::binary);
  const std::string contents((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(contents, std::string(kPythonGolden, sizeof(kPythonGolden) - 1));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
  EXPECT_THAT(names, ElementsAre("g.safetensors"));
}

TEST_F(SafetensorsTest, WriteFileIntoMissingDirectoryIsNotFound) {
  SafetensorsWriter w;
  EXPECT_THAT(w.WriteFile(PathOf("no/such/dir/x.safetensors")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("x.safetensors.tmp.")));
}

// --- Reader --------------------------------------------------------------------------------

TEST_F(SafetensorsTest, OpenMissingPathIsNotFound) {
  const std::string path = PathOf("absent.safetensors");
  EXPECT_THAT(SafetensorsFile::Open(path), StatusIs(absl::StatusCode::kNotFound, HasSubstr(path)));
}

TEST_F(SafetensorsTest, OpenDirectoryIsFailedPrecondition) {
  EXPECT_THAT(SafetensorsFile::Open(dir_.string()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not a regular file")));
}

TEST_F(SafetensorsTest, EmptyFileIsDataLoss) {
  const std::string path = WriteRaw("empty.safetensors", "");
  EXPECT_THAT(SafetensorsFile::Open(path),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr(path + ": file is 0 bytes")));
}

TEST_F(SafetensorsTest, TruncatedFileIsDataLoss) {
  const std::string path = WriteRaw("short.safetensors", std::string("\x08\0\0\0\0", 5));
  EXPECT_THAT(SafetensorsFile::Open(path),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("5 bytes, shorter than")));
}

TEST(SafetensorsParseTest, HeaderLengthTooLargeIsDataLoss) {
  EXPECT_THAT(ParseStatus(RawFileWithLength(kMaxSafetensorsHeaderBytes + 1, "{}")),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("header length 100000001 is larger than the limit")));
  EXPECT_THAT(ParseStatus(RawFileWithLength(~uint64_t{0}, "{}")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("larger than the limit")));
}

TEST(SafetensorsParseTest, HeaderLengthBeyondFileIsDataLoss) {
  EXPECT_THAT(ParseStatus(RawFileWithLength(100, "{}      ")),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("header length 100 runs beyond the end of the 16-byte file")));
}

TEST(SafetensorsParseTest, HeaderNotStartingWithBraceIsDataLoss) {
  EXPECT_THAT(ParseStatus(RawFile(" {}     ")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("does not start with '{'")));
  EXPECT_THAT(ParseStatus(RawFile("")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("does not start with '{'")));
}

TEST(SafetensorsParseTest, InvalidJsonIsDataLoss) {
  EXPECT_THAT(ParseStatus(RawFile(R"({"a":)")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("invalid JSON")));
  EXPECT_THAT(ParseStatus(RawFile("{} x")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("invalid JSON")));
  EXPECT_THAT(ParseStatus(RawFile(std::string("{}\0\0\0\0\0\0", 8))),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("invalid JSON")));
  EXPECT_THAT(ParseStatus(RawFile("{\"\xff\":1}")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("invalid JSON")));
}

TEST(SafetensorsParseTest, TrailingWhitespaceInHeaderIsAccepted) {
  const std::string bytes = RawFile("{}  \n\t\r ");
  DF11_ASSERT_OK_AND_ASSIGN(SafetensorsFile f, ParseString(bytes));
  EXPECT_THAT(f.tensors(), IsEmpty());
}

TEST(SafetensorsParseTest, DuplicateKeyIsDataLoss) {
  const std::string t = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  EXPECT_THAT(ParseStatus(RawFile("{\"a\":" + t + ",\"a\":" + t + "}", "x")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("duplicate key 'a'")));
  EXPECT_THAT(ParseStatus(RawFile(
                  R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("duplicate key 'dtype'")));
}

TEST(SafetensorsParseTest, DeepNestingIsDataLoss) {
  const std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_THAT(ParseStatus(RawFile(deep)),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("deeper than 8")));
}

TEST(SafetensorsParseTest, UnknownDtypeIsDataLoss) {
  EXPECT_THAT(ParseStatus(RawFile(R"({"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", "x")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("tensor 'w': unknown dtype 'F4'")));
}

TEST(SafetensorsParseTest, NegativeDimIsDataLoss) {
  EXPECT_THAT(ParseStatus(RawFile(R"({"w":{"dtype":"U8","shape":[2,-1],"data_offsets":[0,0]}})")),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("tensor 'w': shape dimension 1 is negative (-1)")));
}

TEST(SafetensorsParseTest, NonIntegerDimIsDataLoss) {
  EXPECT_THAT(
      ParseStatus(RawFile(R"({"w":{"dtype":"U8","shape":[2.0],"data_offsets":[0,2]}})", "xx")),
      StatusIs(absl::StatusCode::kDataLoss,
               HasSubstr("dimension 0 is a JSON number, not an integer")));
  EXPECT_THAT(ParseStatus(RawFile(R"({"w":{"dtype":"U8","shape":[18446744073709551615],)"
                                  R"("data_offsets":[0,0]}})")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("does not fit int64")));
}

TEST(SafetensorsParseTest, ShapeProductOverflowIsDataLoss) {
  EXPECT_THAT(ParseStatus(RawFile(
                  R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("overflows")));
  EXPECT_THAT(ParseStatus(RawFile(R"({"w":{"dtype":"F64","shape":[4611686018427387904],)"
                                  R"("data_offsets":[0,0]}})")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("overflows")));
}

TEST(SafetensorsParseTest, OffsetsOutOfRangeIsDataLoss) {
  EXPECT_THAT(
      ParseStatus(RawFile(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "xx")),
      StatusIs(absl::StatusCode::kDataLoss,
               HasSubstr("tensor 'w': data_offsets [0, 4] end beyond the 2-byte data")));
}

TEST(SafetensorsParseTest, BeginAfterEndIsDataLoss) {
  EXPECT_THAT(
      ParseStatus(RawFile(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}})", "xx")),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("begin 2 > end 1")));
}

TEST(SafetensorsParseTest, MalformedDataOffsetsIsDataLoss) {
  EXPECT_THAT(
      ParseStatus(RawFile(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", "x")),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("not an array of two integers")));
  EXPECT_THAT(
      ParseStatus(RawFile(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", "x")),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("not two non-negative integers")));
}

TEST(SafetensorsParseTest, SizeMismatchIsDataLoss) {
  EXPECT_THAT(
      ParseStatus(RawFile(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "xxxx")),
      StatusIs(absl::StatusCode::kDataLoss,
               HasSubstr("tensor 'w': size mismatch: shape [2] x F32 (4 bytes) = 8 "
                         "bytes, data_offsets [0, 4] span 4")));
}

TEST(SafetensorsParseTest, OverlapIsDataLoss) {
  EXPECT_THAT(ParseStatus(RawFile(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                  R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                                  "xxxxxx")),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("tensor 'b' at [2, 6) overlaps tensor 'a' at [0, 4)")));
}

TEST(SafetensorsParseTest, ZeroSizeTensorInsideAnotherIsOverlap) {
  EXPECT_THAT(ParseStatus(RawFile(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                  R"("z":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}})",
                                  "xxxx")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("tensor 'z' at [2, 2) overlaps")));
}

TEST(SafetensorsParseTest, HoleIsDataLoss) {
  EXPECT_THAT(ParseStatus(RawFile(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                                  R"("b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}})",
                                  "xxxxx")),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("hole: data section bytes [2, 3) belong to no tensor")));
}

TEST(SafetensorsParseTest, TrailingDataIsDataLoss) {
  EXPECT_THAT(
      ParseStatus(RawFile(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "xxxxx")),
      StatusIs(absl::StatusCode::kDataLoss,
               HasSubstr("3 trailing bytes: tensors end at 2 of the 5-byte data")));
  EXPECT_THAT(ParseStatus(RawFile("{}", "x")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("1 trailing bytes")));
}

TEST(SafetensorsParseTest, ZeroSizeTensorsMayShareAnOffset) {
  const std::string bytes = RawFile(R"({"z2":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                                    R"("a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                                    R"("z1":{"dtype":"U8","shape":[3,0],"data_offsets":[0,0]},)"
                                    R"("z3":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}})",
                                    "xy");
  DF11_ASSERT_OK_AND_ASSIGN(SafetensorsFile f, ParseString(bytes));
  std::vector<std::string> names;
  for (const TensorView& t : f.tensors()) names.push_back(t.name);
  EXPECT_THAT(names, ElementsAre("z1", "z2", "a", "z3"));
  EXPECT_EQ(ToString(f.Find("a")->data), "xy");
}

TEST(SafetensorsParseTest, NonStringMetadataIsDataLoss) {
  EXPECT_THAT(ParseStatus(RawFile(R"({"__metadata__":{"format":"pt","n":3}})")),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("__metadata__ value for key 'n' is a JSON number")));
  EXPECT_THAT(ParseStatus(RawFile(R"({"__metadata__":["pt"]})")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("__metadata__ is a JSON array")));
}

TEST(SafetensorsParseTest, MalformedEntryIsDataLoss) {
  EXPECT_THAT(
      ParseStatus(RawFile(R"({"w":[1]})")),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("tensor 'w': entry is a JSON array")));
  EXPECT_THAT(
      ParseStatus(RawFile(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":1}})")),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("unexpected key 'x'")));
  EXPECT_THAT(ParseStatus(RawFile(R"({"w":{"dtype":"U8","data_offsets":[0,0]}})")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("missing key 'shape'")));
  EXPECT_THAT(ParseStatus(RawFile(R"({"w":{"dtype":8,"shape":[0],"data_offsets":[0,0]}})")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("dtype is a JSON number")));
  EXPECT_THAT(ParseStatus(RawFile(R"({"w":{"dtype":"U8","shape":3,"data_offsets":[0,0]}})")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("shape is a JSON number")));
}

TEST_F(SafetensorsTest, ErrorsNameTheFile) {
  const std::string path = WriteRaw(
      "bad.safetensors", RawFile(R"({"w":{"dtype":"X","shape":[],"data_offsets":[0,0]}})"));
  EXPECT_THAT(SafetensorsFile::Open(path),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr(path + ": tensor 'w'")));
}

TEST(SafetensorsParseTest, MovedFileKeepsViewsAndFind) {
  GoldenTensors g;
  SafetensorsWriter w;
  g.AddTo(w);
  const std::string bytes = w.Serialize();
  DF11_ASSERT_OK_AND_ASSIGN(SafetensorsFile f, ParseString(bytes));
  const TensorView* step = f.Find("step");
  ASSERT_NE(step, nullptr);
  SafetensorsFile moved(std::move(f));
  EXPECT_EQ(moved.Find("step"), step);
  const std::string empty = RawFile("{}");
  DF11_ASSERT_OK_AND_ASSIGN(SafetensorsFile assigned, ParseString(empty));
  assigned = std::move(moved);
  EXPECT_EQ(assigned.Find("step"), step);
  EXPECT_EQ(ToString(step->data), std::string("\x07\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(assigned.metadata().at("format"), "np");
}

// --- Checkpoint ----------------------------------------------------------------------------

class CheckpointTest : public SafetensorsTest {
 protected:
  // Writes a file holding one U8 tensor of one byte per name.
  void WriteShard(const std::string& file, const std::vector<std::string>& tensors) {
    static const uint8_t kByte = 42;
    SafetensorsWriter w;
    for (const std::string& t : tensors) {
      ASSERT_THAT(w.Add(t, DType::kU8, {1}, std::as_bytes(std::span(&kByte, 1))), IsOk());
    }
    ASSERT_THAT(w.WriteFile(PathOf(file)), IsOk());
  }
};

TEST_F(CheckpointTest, OpensSingleModelFile) {
  WriteShard("model.safetensors", {"a", "b"});
  WriteShard("other.safetensors", {"c"});  // ignored: model.safetensors wins
  DF11_ASSERT_OK_AND_ASSIGN(Checkpoint c, Checkpoint::Open(dir_.string()));
  ASSERT_EQ(c.files().size(), 1u);
  EXPECT_EQ(c.files()[0].path(), PathOf("model.safetensors"));
  EXPECT_THAT(c.TensorNames(), ElementsAre("a", "b"));
  EXPECT_EQ(c.Find("c"), nullptr);
}

TEST_F(CheckpointTest, OpensShardsNamedByIndex) {
  WriteShard("model-00001-of-00002.safetensors", {"b", "a"});
  WriteShard("model-00002-of-00002.safetensors", {"c"});
  WriteShard("stray.safetensors", {"a"});  // not in the index, so not opened
  WriteRaw("model.safetensors.index.json",
           R"({"metadata":{"total_size":3},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
           R"("b":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}})");
  DF11_ASSERT_OK_AND_ASSIGN(Checkpoint opened, Checkpoint::Open(dir_.string()));
  Checkpoint c = std::move(opened);  // views survive the move
  ASSERT_EQ(c.files().size(), 2u);
  EXPECT_THAT(c.TensorNames(), ElementsAre("a", "b", "c"));
  const TensorView* t = c.Find("c");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t, c.files()[1].Find("c"));
  EXPECT_EQ(ToString(t->data), "*");
  EXPECT_EQ(c.Find("d"), nullptr);
}

TEST_F(CheckpointTest, IndexNamingMissingFileIsDataLoss) {
  WriteShard("model-00001-of-00002.safetensors", {"a"});
  WriteRaw("model.safetensors.index.json",
           R"({"weight_map":{"a":"model-00001-of-00002.safetensors",)"
           R"("b":"model-00002-of-00002.safetensors"}})");
  EXPECT_THAT(
      Checkpoint::Open(dir_.string()),
      StatusIs(absl::StatusCode::kDataLoss,
               HasSubstr("names 'model-00002-of-00002.safetensors', which does not exist")));
}

TEST_F(CheckpointTest, IndexMappingTensorTheShardLacksIsDataLoss) {
  WriteShard("s1.safetensors", {"a"});
  WriteShard("s2.safetensors", {"b"});
  WriteRaw("model.safetensors.index.json",
           R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}})");
  EXPECT_THAT(Checkpoint::Open(dir_.string()),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("maps tensor 'b' to s1.safetensors, which has no such tensor")));
}

TEST_F(CheckpointTest, IndexWithPathIsDataLoss) {
  WriteShard("s1.safetensors", {"a"});
  WriteRaw("model.safetensors.index.json", R"({"weight_map":{"a":"../s1.safetensors"}})");
  EXPECT_THAT(Checkpoint::Open(dir_.string()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("not a plain file name")));
  WriteRaw("model.safetensors.index.json", R"({"weight_map":{"a":".."}})");
  EXPECT_THAT(Checkpoint::Open(dir_.string()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("not a plain file name")));
}

TEST_F(CheckpointTest, MalformedIndexIsDataLoss) {
  WriteShard("s1.safetensors", {"a"});
  WriteRaw("model.safetensors.index.json", R"({"weight_map":["s1.safetensors"]})");
  EXPECT_THAT(Checkpoint::Open(dir_.string()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("\"weight_map\" object")));
  WriteRaw("model.safetensors.index.json", R"({"weight_map":{"a":1}})");
  EXPECT_THAT(Checkpoint::Open(dir_.string()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("is not a string")));
  WriteRaw("model.safetensors.index.json", "{");
  EXPECT_THAT(Checkpoint::Open(dir_.string()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("invalid JSON")));
}

TEST_F(CheckpointTest, DuplicateTensorAcrossShardsIsDataLoss) {
  WriteShard("a.safetensors", {"x", "shared"});
  WriteShard("b.safetensors", {"shared"});
  EXPECT_THAT(Checkpoint::Open(dir_.string()),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("tensor 'shared' appears in both " + PathOf("a.safetensors") +
                                 " and " + PathOf("b.safetensors"))));
}

TEST_F(CheckpointTest, AllFilesModeOpensEverySafetensorsFile) {
  WriteShard("model.safetensors", {"w"});
  WriteShard("dfloat11.safetensors", {"w.encoded"});
  WriteRaw("model.safetensors.index.json", R"({"weight_map":{"w":"model.safetensors"}})");
  WriteRaw("notes.txt", "not a tensor file");
  fs::create_directory(dir_ / "sub.safetensors");  // a directory, skipped
  DF11_ASSERT_OK_AND_ASSIGN(Checkpoint c, Checkpoint::Open(dir_.string(), /*all_files=*/true));
  ASSERT_EQ(c.files().size(), 2u);
  EXPECT_EQ(c.files()[0].path(), PathOf("dfloat11.safetensors"));
  EXPECT_EQ(c.files()[1].path(), PathOf("model.safetensors"));
  EXPECT_THAT(c.TensorNames(), ElementsAre("w", "w.encoded"));
}

TEST_F(CheckpointTest, WithoutIndexOrModelFileOpensEverySafetensorsFile) {
  WriteShard("b.safetensors", {"y"});
  WriteShard("a.safetensors", {"x"});
  DF11_ASSERT_OK_AND_ASSIGN(Checkpoint c, Checkpoint::Open(dir_.string()));
  ASSERT_EQ(c.files().size(), 2u);
  EXPECT_EQ(c.files()[0].path(), PathOf("a.safetensors"));
  EXPECT_THAT(c.TensorNames(), ElementsAre("x", "y"));
}

TEST_F(CheckpointTest, DirectoryWithoutSafetensorsIsNotFound) {
  WriteRaw("config.json", "{}");
  EXPECT_THAT(Checkpoint::Open(dir_.string()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no *.safetensors file")));
  EXPECT_THAT(Checkpoint::Open(PathOf("missing")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no such directory")));
}

TEST_F(CheckpointTest, CorruptShardIsDataLoss) {
  WriteRaw("model.safetensors", RawFile("{}", "junk"));
  EXPECT_THAT(Checkpoint::Open(dir_.string()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("trailing bytes")));
}

}  // namespace
}  // namespace df11::codec
