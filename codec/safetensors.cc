// safetensors reader (strict, zero-copy over mmap) and byte-exact writer.
//
// The writer follows safetensors/src/tensor.rs in huggingface/safetensors (`prepare`, `serialize`,
// `impl Serialize for Metadata`; read at a 0.4-era revision and at v0.8, and compared byte for byte
// with the Python package 0.8.0 in tests/codec/safetensors_test.cc):
//   * entries sorted by `right.dtype().cmp(&left.dtype()).then(lname.cmp(rname))`, i.e. by the
//     Rust Dtype enum order descending, then by name ascending (bytewise);
//   * serde_json compact output: {"__metadata__":{...},"name":{"dtype":"F32","shape":[1,2],
//     "data_offsets":[0,8]},...}, "__metadata__" only when metadata is given;
//   * the JSON padded with b' ' to a multiple of 8 (N_LEN), N written as u64 little-endian.
// The reader accepts what the reference reader (`read_metadata`, `Metadata::validate`) accepts,
// minus what this project rejects on purpose: extra keys in a tensor entry, duplicate JSON keys,
// a header not starting with '{', raw NUL bytes in the header, nesting deeper than needed.
#include "codec/base/read_file.h"
#include "codec/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codec/base/check.h"
#include "codec/base/status_macros.h"
#include "codec/mapping_guard.h"
#include "nlohmann/json.hpp"

namespace df11::codec {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kLengthFieldBytes = 8;  // N_LEN in the reference
constexpr char kMetadataKey[] = "__metadata__";
// A valid header nests 3 deep (root > entry > shape); deeper input is hostile or wrong. The limit
// bounds the parse stack and keeps nlohmann's recursive destructor shallow.
constexpr int kMaxJsonDepth = 8;
constexpr char kIndexFileName[] = "model.safetensors.index.json";
constexpr char kSingleFileName[] = "model.safetensors";
constexpr std::string_view kSafetensorsSuffix = ".safetensors";

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

// In enum order, so kDTypes[static_cast<int>(d)].dtype == d.
constexpr DTypeInfo kDTypes[] = {
    {DType::kBool, "BOOL", 1},       {DType::kU8, "U8", 1},           {DType::kI8, "I8", 1},
    {DType::kF8_E5M2, "F8_E5M2", 1}, {DType::kF8_E4M3, "F8_E4M3", 1}, {DType::kI16, "I16", 2},
    {DType::kU16, "U16", 2},         {DType::kF16, "F16", 2},         {DType::kBF16, "BF16", 2},
    {DType::kI32, "I32", 4},         {DType::kU32, "U32", 4},         {DType::kF32, "F32", 4},
    {DType::kF64, "F64", 8},         {DType::kI64, "I64", 8},         {DType::kU64, "U64", 8},
};

// Debian's Abseil 20220623 is built with its own absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW
// is 0), which StrCat does not accept from a std::string_view; convert explicitly.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

const DTypeInfo& Info(DType dtype) {
  const auto i = static_cast<size_t>(dtype);
  DF11_CHECK(i < std::size(kDTypes));
  return kDTypes[i];
}

// A name or key for an error message: C-escaped and cut to 128 bytes, so hostile headers cannot
// make messages huge or unprintable.
std::string Quote(std::string_view s) {
  constexpr size_t kMaxShown = 128;
  std::string out = absl::StrCat("'", absl::CHexEscape(Sv(s.substr(0, kMaxShown))), "'");
  if (s.size() > kMaxShown) absl::StrAppend(&out, "... (", s.size(), " bytes)");
  return out;
}

// strerror_r is the GNU or the XSI variant depending on the libc; accept either.
[[maybe_unused]] std::string StrErrorResult(int rc, const char* buf) {
  return rc == 0 ? std::string(buf) : std::string("unknown error");
}
[[maybe_unused]] std::string StrErrorResult(const char* text, const char* /*buf*/) {
  return std::string(text);
}
std::string ErrnoText(int err) {
  char buf[256] = {};
  return absl::StrCat(StrErrorResult(strerror_r(err, buf, sizeof(buf)), buf), " (errno ", err, ")");
}

// `what` is the operation and path ("open /x"); maps the usual errno values to status codes.
absl::Status ErrnoStatus(int err, std::string_view what) {
  std::string message = absl::StrCat(Sv(what), ": ", ErrnoText(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM || err == EROFS) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

int OpenRetryingEintr(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path, flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// Bytes of a tensor of `shape` (non-negative dims) and `dtype`, or nullopt if the element count
// overflows int64 or the byte count overflows uint64.
std::optional<uint64_t> ShapeBytes(const std::vector<int64_t>& shape, DType dtype) {
  uint64_t elements = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements)) return std::nullopt;
  }
  uint64_t bytes;
  if (elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
      __builtin_mul_overflow(elements, DTypeSize(dtype), &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

// `s` as a JSON string literal. With ensure_ascii=false nlohmann escapes exactly as serde_json's
// compact formatter (checked against both sources): '"' and '\\' backslashed; \b \t \n \f \r;
// other bytes below 0x20 as \u00xx in lowercase hex; DEL and non-ASCII verbatim. Malformed UTF-8
// (which serde cannot hold) becomes U+FFFD.
std::string JsonString(const std::string& s) {
  return Json(s).dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

// Well-formed UTF-8 (no overlongs, no surrogates), as Rust and Python strings are.
bool IsValidUtf8(const std::string& s) {
  try {
    (void)Json(s).dump();  // error_handler_t::strict throws type_error 316 on malformed UTF-8
    return true;
  } catch (const Json::type_error&) {
    return false;
  }
}

// nlohmann SAX handler that builds the DOM like json::parse, but fails on duplicate keys (the DOM
// would silently keep the last one) and on nesting deeper than kMaxJsonDepth. Pointers on `stack_`
// are ancestors of the value being parsed; siblings are only appended after a child closes, so
// they stay valid.
class StrictJsonBuilder {
 public:
  Json& root() { return root_; }
  const std::string& error() const { return error_; }

  bool null() { return Put(Json(nullptr)); }
  bool boolean(bool v) { return Put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return Put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Put(Json(v)); }
  bool number_float(Json::number_float_t v, const std::string& /*text*/) { return Put(Json(v)); }
  bool string(std::string& v) { return Put(Json(std::move(v))); }
  bool binary(Json::binary_t& /*v*/) {  // the JSON lexer never produces binary values
    error_ = "unexpected binary value";
    return false;
  }
  bool start_object(size_t /*size*/) { return Open(Json::object()); }
  bool start_array(size_t /*size*/) { return Open(Json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& k) {
    Json& object = *stack_.back();
    auto [it, inserted] = object.get_ref<Json::object_t&>().try_emplace(k);
    if (!inserted) {
      error_ = absl::StrCat("duplicate key ", Quote(k));
      return false;
    }
    slot_ = &it->second;
    return true;
  }
  bool parse_error(size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) {
    error_ = ex.what();
    return false;
  }

 private:
  bool Put(Json v) {
    Store(std::move(v));
    return true;
  }
  // Stores `v` where the parser is and returns its address.
  Json* Store(Json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    *slot_ = std::move(v);
    return slot_;
  }
  bool Open(Json container) {
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      error_ = absl::StrCat("JSON nests deeper than ", kMaxJsonDepth, " levels");
      return false;
    }
    stack_.push_back(Store(std::move(container)));
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }

  Json root_;
  std::vector<Json*> stack_;
  Json* slot_ = nullptr;  // the value slot of the last key
  std::string error_;
};

// Parses `text` strictly (one JSON value, trailing whitespace only) into a DOM. kDataLoss naming
// `what` on any error; nlohmann exceptions never escape.
absl::StatusOr<Json> ParseStrictJson(std::string_view text, std::string_view what) {
  // nlohmann's lexer takes a raw NUL for the end of input, so "{}\0junk" would parse. Valid JSON
  // never holds a raw NUL (inside strings it must be escaped).
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return absl::DataLossError(absl::StrCat(Sv(what), ": invalid JSON: NUL byte at offset ", nul));
  }
  StrictJsonBuilder builder;
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &builder, Json::input_format_t::json,
                         /*strict=*/true, /*ignore_comments=*/false);
  } catch (const std::exception& e) {  // nlohmann::json::exception or std::bad_alloc
    return absl::DataLossError(absl::StrCat(Sv(what), ": invalid JSON: ", e.what()));
  }
  if (!ok) {
    return absl::DataLossError(absl::StrCat(
        Sv(what), ": invalid JSON: ", builder.error().empty() ? "parse failed" : builder.error()));
  }
  return std::move(builder.root());
}

// A non-negative JSON integer, or nullopt (negative, float, or not a number).
std::optional<uint64_t> NonNegativeInteger(const Json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>();  // e.g. "-0"
  return std::nullopt;
}

struct ParsedEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

// Validates one tensor entry of the header against a data section of `data_size` bytes.
absl::StatusOr<ParsedEntry> ParseEntry(std::string_view source, const std::string& name,
                                       const Json& entry, uint64_t data_size) {
  const std::string where = absl::StrCat(Sv(source), ": tensor ", Quote(name));
  if (!entry.is_object()) {
    return absl::DataLossError(
        absl::StrCat(where, ": entry is a JSON ", entry.type_name(), ", not an object"));
  }
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return absl::DataLossError(absl::StrCat(where, ": unexpected key ", Quote(key),
                                              " (want exactly dtype, shape, data_offsets)"));
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) {
      return absl::DataLossError(absl::StrCat(where, ": missing key '", key, "'"));
    }
  }
  ParsedEntry out{name, DType::kU8, {}, 0, 0};

  const Json& dtype = entry["dtype"];
  if (!dtype.is_string()) {
    return absl::DataLossError(
        absl::StrCat(where, ": dtype is a JSON ", dtype.type_name(), ", not a string"));
  }
  absl::StatusOr<DType> parsed_dtype = ParseDType(dtype.get_ref<const std::string&>());
  if (!parsed_dtype.ok()) {
    return absl::DataLossError(
        absl::StrCat(where, ": unknown dtype ", Quote(dtype.get_ref<const std::string&>())));
  }
  out.dtype = *parsed_dtype;

  const Json& shape = entry["shape"];
  if (!shape.is_array()) {
    return absl::DataLossError(
        absl::StrCat(where, ": shape is a JSON ", shape.type_name(), ", not an array"));
  }
  out.shape.reserve(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    const Json& dim = shape[i];
    if (dim.is_number_integer() && !dim.is_number_unsigned() && dim.get<int64_t>() < 0) {
      return absl::DataLossError(
          absl::StrCat(where, ": shape dimension ", i, " is negative (", dim.get<int64_t>(), ")"));
    }
    std::optional<uint64_t> d = NonNegativeInteger(dim);
    if (!d.has_value()) {  // type only: printing the value could print a 100 MB string
      return absl::DataLossError(absl::StrCat(where, ": shape dimension ", i, " is a JSON ",
                                              dim.type_name(), ", not an integer"));
    }
    if (*d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::DataLossError(
          absl::StrCat(where, ": shape dimension ", i, " (", *d, ") does not fit int64"));
    }
    out.shape.push_back(static_cast<int64_t>(*d));
  }
  const std::optional<uint64_t> nbytes = ShapeBytes(out.shape, out.dtype);
  if (!nbytes.has_value()) {
    return absl::DataLossError(absl::StrCat(where, ": shape [", absl::StrJoin(out.shape, ","),
                                            "] overflows the element or byte count"));
  }

  const Json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    return absl::DataLossError(absl::StrCat(where, ": data_offsets is a JSON ", offsets.type_name(),
                                            " of size ", offsets.size(),
                                            ", not an array of two integers"));
  }
  std::optional<uint64_t> begin = NonNegativeInteger(offsets[0]);
  std::optional<uint64_t> end = NonNegativeInteger(offsets[1]);
  if (!begin.has_value() || !end.has_value()) {
    return absl::DataLossError(absl::StrCat(where, ": data_offsets (JSON ", offsets[0].type_name(),
                                            ", ", offsets[1].type_name(),
                                            ") are not two non-negative integers"));
  }
  out.begin = *begin;
  out.end = *end;
  if (out.begin > out.end) {
    return absl::DataLossError(
        absl::StrCat(where, ": data_offsets begin ", out.begin, " > end ", out.end));
  }
  if (out.end > data_size) {
    return absl::DataLossError(absl::StrCat(where, ": data_offsets [", out.begin, ", ", out.end,
                                            "] end beyond the ", data_size, "-byte data section"));
  }
  if (out.end - out.begin != *nbytes) {
    return absl::DataLossError(absl::StrCat(
        where, ": size mismatch: shape [", absl::StrJoin(out.shape, ","), "] x ",
        Sv(DTypeName(out.dtype)), " (", DTypeSize(out.dtype), " bytes) = ", *nbytes,
        " bytes, data_offsets [", out.begin, ", ", out.end, "] span ", out.end - out.begin));
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> ParseMetadata(std::string_view source,
                                                                 const Json& metadata) {
  if (!metadata.is_object()) {
    return absl::DataLossError(absl::StrCat(Sv(source), ": __metadata__ is a JSON ",
                                            metadata.type_name(), ", not an object"));
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) {
      return absl::DataLossError(absl::StrCat(Sv(source), ": __metadata__ value for key ",
                                              Quote(key), " is a JSON ", value.type_name(),
                                              ", not a string"));
    }
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

}  // namespace

std::string_view DTypeName(DType dtype) { return Info(dtype).name; }

absl::StatusOr<DType> ParseDType(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown safetensors dtype ", Quote(name)));
}

size_t DTypeSize(DType dtype) { return Info(dtype).size; }

int64_t TensorView::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---------------------------------------------------------------------------------------------
// SafetensorsFile

// Guarded (codec/mapping_guard.h): where the program installed the guard, a truncation of the file
// turns reads past its end into zeros and a fault recorded here, instead of SIGBUS.
struct SafetensorsFile::Mapping {
  Mapping(void* a, size_t s) : addr(a), size(s), guard(GuardMapping(a, s)) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    UnguardMapping(guard);
    munmap(addr, size);
  }
  void* addr;
  size_t size;
  int guard;
};

SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

namespace {

int64_t ModifiedNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not hang; it is then rejected as not a regular file.
  const int fd = OpenRetryingEintr(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", path));
  // Closed on every return (after the return value, errno included, is computed); a mapping
  // keeps the file referenced by itself.
  const std::unique_ptr<const int, void (*)(const int*)> closer(&fd,
                                                                [](const int* f) { ::close(*f); });
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, absl::StrCat("fstat ", path));
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  const auto size = static_cast<size_t>(st.st_size);
  std::unique_ptr<Mapping> mapping;
  std::span<const std::byte> bytes;
  if (size > 0) {  // mmap rejects length 0; an empty file fails validation below
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) return ErrnoStatus(errno, absl::StrCat("mmap ", path));
    mapping = std::make_unique<Mapping>(addr, size);
    bytes = std::span<const std::byte>(static_cast<const std::byte*>(addr), size);
  }
  DF11_ASSIGN_OR_RETURN(SafetensorsFile file, Parse(bytes, path));
  file.mapping_ = std::move(mapping);
  file.device_ = st.st_dev;
  file.inode_ = st.st_ino;
  file.modified_ns_ = ModifiedNs(st);
  return file;
}

absl::Status SafetensorsFile::CheckReads() const {
  if (mapping_ == nullptr || !MappingFaulted(mapping_->guard)) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      path_,
      " was truncated while mapped: reads past its end got zeros, not the file's bytes; "
      "replace model files by renaming new ones over them, never in place"));
}

absl::Status SafetensorsFile::CheckUnchanged() const {
  if (mapping_ == nullptr) return absl::OkStatus();
  DF11_RETURN_IF_ERROR(CheckReads());
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0 || st.st_dev != device_ || st.st_ino != inode_) {
    return absl::OkStatus();  // removed or replaced: the mapping still holds what was validated
  }
  if (static_cast<size_t>(st.st_size) == bytes_.size() && ModifiedNs(st) == modified_ns_) {
    return absl::OkStatus();
  }
  return absl::DataLossError(absl::StrCat(
      path_, " was modified in place after it was mapped (", bytes_.size(), " bytes then, ",
      st.st_size, " now); replace model files by renaming new ones over them, never in place"));
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Parse(std::span<const std::byte> bytes,
                                                       std::string source_name) {
  const std::string& src = source_name;
  const uint64_t file_size = bytes.size();
  if (file_size < kLengthFieldBytes) {
    return absl::DataLossError(absl::StrCat(src, ": file is ", file_size,
                                            " bytes, shorter than the 8-byte header length"));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  if (n > kMaxSafetensorsHeaderBytes) {
    return absl::DataLossError(absl::StrCat(src, ": header length ", n,
                                            " is larger than the limit of ",
                                            kMaxSafetensorsHeaderBytes, " bytes"));
  }
  if (n > file_size - kLengthFieldBytes) {
    return absl::DataLossError(absl::StrCat(
        src, ": header length ", n, " runs beyond the end of the ", file_size, "-byte file"));
  }
  const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + kLengthFieldBytes, n);
  if (header.empty() || header.front() != '{') {
    return absl::DataLossError(
        absl::StrCat(src, ": header (", n, " bytes) does not start with '{'"));
  }
  // Starting with '{', a successful parse is an object.
  DF11_ASSIGN_OR_RETURN(Json doc, ParseStrictJson(header, absl::StrCat(src, ": header")));

  const uint64_t data_start = kLengthFieldBytes + n;
  const uint64_t data_size = file_size - data_start;
  SafetensorsFile file;
  std::vector<ParsedEntry> entries;
  entries.reserve(doc.size());
  for (const auto& [key, value] : doc.items()) {
    if (key == kMetadataKey) {
      DF11_ASSIGN_OR_RETURN(file.metadata_, ParseMetadata(src, value));
      continue;
    }
    DF11_ASSIGN_OR_RETURN(ParsedEntry entry, ParseEntry(src, key, value, data_size));
    entries.push_back(std::move(entry));
  }
  doc = Json();  // free the DOM before building views

  // Tile check, as the reference's Metadata::validate: sorted by (begin, end), every tensor must
  // start where the previous one ended. Ties broken by name so the order is deterministic.
  std::sort(entries.begin(), entries.end(), [](const ParsedEntry& a, const ParsedEntry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t pos = 0;
  const ParsedEntry* covering = nullptr;  // the tensor that ends at `pos`
  for (const ParsedEntry& e : entries) {
    if (e.begin < pos) {
      DF11_CHECK(covering != nullptr);
      return absl::DataLossError(absl::StrFormat(
          "%s: tensor %s at [%d, %d) overlaps tensor %s at [%d, %d)", src, Quote(e.name), e.begin,
          e.end, Quote(covering->name), covering->begin, covering->end));
    }
    if (e.begin > pos) {
      return absl::DataLossError(absl::StrFormat(
          "%s: hole: data section bytes [%d, %d) belong to no tensor (next is tensor %s)", src, pos,
          e.begin, Quote(e.name)));
    }
    if (e.end > pos) {
      pos = e.end;
      covering = &e;
    }
  }
  if (pos != data_size) {
    return absl::DataLossError(
        absl::StrFormat("%s: %d trailing bytes: tensors end at %d of the %d-byte data section", src,
                        data_size - pos, pos, data_size));
  }

  file.bytes_ = bytes;
  file.path_ = std::move(source_name);
  file.tensors_.reserve(entries.size());
  for (ParsedEntry& e : entries) {
    file.tensors_.push_back(TensorView{std::move(e.name), e.dtype, std::move(e.shape),
                                       bytes.subspan(static_cast<size_t>(data_start + e.begin),
                                                     static_cast<size_t>(e.end - e.begin))});
  }
  file.by_name_.resize(file.tensors_.size());
  for (size_t i = 0; i < file.by_name_.size(); ++i) file.by_name_[i] = i;
  std::sort(file.by_name_.begin(), file.by_name_.end(),
            [&file](size_t a, size_t b) { return file.tensors_[a].name < file.tensors_[b].name; });
  return file;
}

const TensorView* SafetensorsFile::Find(std::string_view name) const {
  auto it = std::lower_bound(by_name_.begin(), by_name_.end(), name,
                             [this](size_t i, std::string_view n) { return tensors_[i].name < n; });
  if (it == by_name_.end() || tensors_[*it].name != name) return nullptr;
  return &tensors_[*it];
}

// ---------------------------------------------------------------------------------------------
// SafetensorsWriter

absl::Status SafetensorsWriter::Add(std::string name, DType dtype, std::vector<int64_t> shape,
                                    std::span<const std::byte> data) {
  if (name == kMetadataKey) {
    return absl::InvalidArgumentError("tensor name '__metadata__' is reserved");
  }
  if (!IsValidUtf8(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor name ", Quote(name), " is not valid UTF-8"));
  }
  if (names_.contains(name)) {
    return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name ", Quote(name)));
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", Quote(name), ": dimension ", i, " is negative (", shape[i], ")"));
    }
  }
  const std::optional<uint64_t> nbytes = ShapeBytes(shape, dtype);
  if (!nbytes.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", Quote(name), ": shape [",
                                                   absl::StrJoin(shape, ","), "] overflows"));
  }
  if (*nbytes != data.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", Quote(name), ": shape [", absl::StrJoin(shape, ","), "] x ",
                     Sv(DTypeName(dtype)), " needs ", *nbytes, " bytes, data has ", data.size()));
  }
  names_.insert(name);
  entries_.push_back(Entry{std::move(name), dtype, std::move(shape), data});
  return absl::OkStatus();
}

std::vector<const SafetensorsWriter::Entry*> SafetensorsWriter::SortedEntries() const {
  std::vector<const Entry*> sorted;
  sorted.reserve(entries_.size());
  for (const Entry& e : entries_) sorted.push_back(&e);
  // Reference: right.dtype().cmp(&left.dtype()).then(lname.cmp(rname)). DType mirrors the Rust
  // enum order; std::string compares bytes as unsigned char, as Rust's str does.
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    if (a->dtype != b->dtype) return static_cast<int>(a->dtype) > static_cast<int>(b->dtype);
    return a->name < b->name;
  });
  return sorted;
}

std::string SafetensorsWriter::HeaderJson(const std::vector<const Entry*>& sorted) const {
  std::string json = "{";
  bool first = true;
  if (!metadata_.empty()) {
    json.append("\"__metadata__\":{");
    for (const auto& [key, value] : metadata_) {
      if (!first) json.push_back(',');
      first = false;
      absl::StrAppend(&json, JsonString(key), ":", JsonString(value));
    }
    json.push_back('}');
    first = false;
  }
  uint64_t offset = 0;
  for (const Entry* e : sorted) {
    if (!first) json.push_back(',');
    first = false;
    absl::StrAppend(&json, JsonString(e->name), ":{\"dtype\":\"", Sv(DTypeName(e->dtype)),
                    "\",\"shape\":[", absl::StrJoin(e->shape, ","), "],\"data_offsets\":[", offset,
                    ",", offset + e->data.size(), "]}");
    offset += e->data.size();
  }
  json.push_back('}');
  json.resize((json.size() + kLengthFieldBytes - 1) / kLengthFieldBytes * kLengthFieldBytes, ' ');
  return json;
}

namespace {

// The 8-byte little-endian length of `header`, then `header`.
std::string LengthPrefixed(const std::string& header) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(header.size() >> (8 * i)));
  return out + header;
}

}  // namespace

std::string SafetensorsWriter::Serialize() const {
  const std::vector<const Entry*> sorted = SortedEntries();
  std::string out = LengthPrefixed(HeaderJson(sorted));
  out.reserve(SerializedSize());
  for (const Entry* e : sorted) {
    out.append(reinterpret_cast<const char*>(e->data.data()), e->data.size());
  }
  return out;
}

uint64_t SafetensorsWriter::SerializedSize() const {
  uint64_t size = kLengthFieldBytes + HeaderJson(SortedEntries()).size();
  for (const Entry& e : entries_) size += e.data.size();
  return size;
}

namespace {

// Writes all of `data` to `fd`, retrying short writes and EINTR.
absl::Status WriteAll(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    // Linux writes at most 0x7ffff000 bytes per call; ask for no more.
    const ssize_t n = ::write(fd, p, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("write ", path));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SafetensorsWriter::WriteFile(const std::string& path) const {
  const std::vector<const Entry*> sorted = SortedEntries();
  const std::string head = LengthPrefixed(HeaderJson(sorted));
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = OpenRetryingEintr(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("create ", tmp));

  absl::Status status = WriteAll(fd, head.data(), head.size(), tmp);
  for (const Entry* e : sorted) {
    if (!status.ok()) break;
    status = WriteAll(fd, e->data.data(), e->data.size(), tmp);
  }
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoStatus(errno, absl::StrCat("fsync ", tmp));
  if (::close(fd) != 0 && status.ok()) status = ErrnoStatus(errno, absl::StrCat("close ", tmp));
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(errno, absl::StrCat("rename ", tmp, " to ", path));
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  // Make the rename durable. Best effort: some file systems refuse fsync on a directory, and the
  // file itself is complete either way.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    (void)::fsync(dir_fd);
    ::close(dir_fd);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Checkpoint

namespace {

namespace fs = std::filesystem;

// Regular files (symlinks followed) named *.safetensors in `dir`, sorted by name.
absl::StatusOr<std::vector<std::string>> ListSafetensors(const std::string& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat("list ", dir));
  std::vector<std::string> names;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return ErrnoStatus(ec.value(), absl::StrCat("list ", dir));
    std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (name.size() > kSafetensorsSuffix.size() && name.ends_with(kSafetensorsSuffix) &&
        it->is_regular_file(type_ec)) {
      names.push_back(std::move(name));
    }
  }
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat("list ", dir));
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::string> ReadIndexFile(const std::string& path) {
  absl::StatusOr<std::string> text = base::ReadFile(path, base::kMaxIndexFileBytes);
  // An index over its cap is a corrupt checkpoint.
  if (text.status().code() == absl::StatusCode::kInvalidArgument) {
    return absl::DataLossError(text.status().message());
  }
  return text;
}

// A shard name from an index must stay inside the checkpoint directory.
bool IsPlainFileName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\\\0", 3)) == std::string_view::npos;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> ParseSafetensorsIndex(std::string_view text,
                                                                         std::string_view what) {
  DF11_ASSIGN_OR_RETURN(Json index, ParseStrictJson(text, what));
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return absl::DataLossError(
        absl::StrCat(Sv(what), ": not a JSON object with a \"weight_map\" object"));
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    if (!file.is_string()) {
      return absl::DataLossError(absl::StrCat(Sv(what), ": weight_map value for tensor ",
                                              Quote(tensor), " is not a string"));
    }
    const std::string& file_name = file.get_ref<const std::string&>();
    if (!IsPlainFileName(file_name)) {
      return absl::DataLossError(absl::StrCat(Sv(what), ": weight_map maps tensor ", Quote(tensor),
                                              " to ", Quote(file_name),
                                              ", which is not a plain file name"));
    }
    weight_map.emplace(tensor, file_name);
  }
  return weight_map;
}

absl::StatusOr<Checkpoint> Checkpoint::Open(const std::string& dir, bool all_files) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  }
  const auto join = [&dir](std::string_view name) { return (fs::path(dir) / name).string(); };

  Checkpoint ckpt;
  // Tensor -> shard file name, when an index drives the choice of files.
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> names;
  const std::string index_path = join(kIndexFileName);
  if (!all_files && fs::exists(index_path, ec)) {
    DF11_ASSIGN_OR_RETURN(std::string text, ReadIndexFile(index_path));
    DF11_ASSIGN_OR_RETURN(weight_map, ParseSafetensorsIndex(text, index_path));
    std::set<std::string> unique;
    for (const auto& [tensor, file] : weight_map) unique.insert(file);
    names.assign(unique.begin(), unique.end());
    if (names.empty()) {
      return absl::NotFoundError(absl::StrCat(index_path, ": weight_map names no files"));
    }
  } else if (!all_files && fs::is_regular_file(join(kSingleFileName), ec)) {
    names.push_back(kSingleFileName);
  } else {
    DF11_ASSIGN_OR_RETURN(names, ListSafetensors(dir));
    if (names.empty()) {
      return absl::NotFoundError(absl::StrCat(dir, ": no *.safetensors file"));
    }
  }

  ckpt.files_.reserve(names.size());
  for (const std::string& name : names) {
    absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(join(name));
    if (!file.ok() && !weight_map.empty() && absl::IsNotFound(file.status())) {
      return absl::DataLossError(absl::StrCat(index_path, ": weight_map names ", Quote(name),
                                              ", which does not exist: ", file.status().message()));
    }
    if (!file.ok()) return file.status();
    ckpt.files_.push_back(*std::move(file));
  }

  // Built after files_ stops growing. The views live in each file's tensors_ heap buffer, which
  // moves of SafetensorsFile or of files_ hand over without relocating, so pointers survive moves
  // of the Checkpoint.
  for (const SafetensorsFile& file : ckpt.files_) {
    for (const TensorView& t : file.tensors()) {
      auto [it, inserted] = ckpt.by_name_.emplace(t.name, &t);
      if (!inserted) {
        const auto first = std::find_if(ckpt.files_.begin(), ckpt.files_.end(),
                                        [&](const auto& f) { return f.Find(t.name) != nullptr; });
        return absl::DataLossError(absl::StrCat(dir, ": tensor ", Quote(t.name),
                                                " appears in both ", first->path(), " and ",
                                                file.path()));
      }
    }
  }
  for (const auto& [tensor, file_name] : weight_map) {
    // files_[i] was opened from names[i], which is sorted.
    const size_t i = static_cast<size_t>(std::lower_bound(names.begin(), names.end(), file_name) -
                                         names.begin());
    DF11_CHECK(i < names.size() && names[i] == file_name);
    if (ckpt.files_[i].Find(tensor) == nullptr) {
      return absl::DataLossError(absl::StrCat(index_path, ": weight_map maps tensor ",
                                              Quote(tensor), " to ", file_name,
                                              ", which has no such tensor"));
    }
  }
  return ckpt;
}

const TensorView* Checkpoint::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<std::string> Checkpoint::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(by_name_.size());
  for (const auto& [name, view] : by_name_) names.push_back(name);
  return names;
}

}  // namespace df11::codec
