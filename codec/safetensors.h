// safetensors files: a strict, zero-copy reader over mmap and a writer.
//
// Format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N, N
// bytes of JSON {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"k": "v"}}, then the data. Offsets are relative to the end of the header.
//
//   DF11_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open("model.safetensors"));
//   for (const TensorView& t : file.tensors()) Use(t.name, t.data);
//
//   SafetensorsWriter w;
//   w.Add("w", DType::kBF16, {2, 3}, bytes);
//   DF11_RETURN_IF_ERROR(w.WriteFile("out.safetensors"));
#ifndef DF11_CODEC_SAFETENSORS_H_
#define DF11_CODEC_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace df11::codec {

// Every dtype the safetensors format defines (safetensors 0.4; later versions add more, which this
// reader rejects). The enumerators are in the order of the reference `Dtype` enum, which the writer
// relies on: entries are sorted by this order, descending. Unknown dtype strings are rejected.
enum class DType { kBool, kU8, kI8, kF8_E5M2, kF8_E4M3, kI16, kU16, kF16, kBF16, kI32, kU32, kF32,
                   kF64, kI64, kU64 };

std::string_view DTypeName(DType dtype);                 // "BF16", as safetensors spells it
absl::StatusOr<DType> ParseDType(std::string_view name);  // kInvalidArgument if unknown
size_t DTypeSize(DType dtype);                           // bytes per element

// A tensor inside a mapped file (or any other buffer). `data` stays valid as long as its owner.
struct TensorView {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;

  // Product of shape; 1 for a scalar (shape []). Views from SafetensorsFile never overflow; for
  // hand-built views the caller keeps the product within int64.
  int64_t num_elements() const;
};

// Limits that keep a hostile header from costing memory or time.
// MAX_HEADER_SIZE in the reference reader (safetensors/src/tensor.rs): 100'000'000, not 100 MiB.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// A read-only, memory-mapped safetensors file. Movable, not copyable; views die with it.
class SafetensorsFile {
 public:
  // Maps `path` (read-only, private) and validates it: at least 8 bytes; header length within
  // kMaxSafetensorsHeaderBytes and the file; the header starts with '{' and is one JSON object
  // (trailing whitespace allowed; no duplicate keys; nesting at most 8 deep); every tensor entry
  // is an object with exactly the keys dtype (a known name), shape (non-negative integers whose
  // product, and product x dtype size, fit int64) and data_offsets ([begin, end], begin <= end,
  // end within the data section); shape x dtype size == end - begin; tensors sorted by offset
  // tile the data section exactly: no overlap, no hole, no trailing bytes (zero-size tensors may
  // sit at any tensor boundary, several at one offset, as in the reference reader; one strictly
  // inside another tensor's bytes is an overlap); __metadata__, if present, maps strings to
  // strings.
  // kNotFound if the file does not exist, kPermissionDenied if it may not be read,
  // kFailedPrecondition if it is not a regular file, kDataLoss for every violation (naming the
  // file, the tensor and the numbers; an empty file included), kInternal for other I/O failures.
  // Thread-safe (no shared state); the result is immutable.
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);

  // As Open, over bytes owned by the caller (kept alive by the caller while the object lives).
  // `source_name` names the bytes in error messages and becomes path().
  static absl::StatusOr<SafetensorsFile> Parse(std::span<const std::byte> bytes,
                                               std::string source_name);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  // Tensors in data-offset order (ties: zero-size first, then by name). The views, and pointers
  // to them, stay valid while this object (or the one it is moved into) lives.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr if absent. O(log n).
  const TensorView* Find(std::string_view name) const;
  // Total file size in bytes.
  size_t file_size() const { return bytes_.size(); }

  // For a mapped file (Open): kDataLoss when a read past a truncation of the file was absorbed
  // (codec/mapping_guard.h; without the guard such a read raises SIGBUS), or when path() still
  // names the mapped inode but its size or modification time changed. Either way it was written
  // in place and the mapped bytes may no longer be the validated ones. A file replaced (renamed
  // over) or removed is fine, as the mapping keeps the old inode. OK for Parse.
  absl::Status CheckUnchanged() const;
  // Only the first of those checks (no system call): kDataLoss when a read past a truncation was
  // absorbed.
  absl::Status CheckReads() const;

 private:
  SafetensorsFile() = default;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;  // null when parsing caller-owned bytes
  // The mapped file as it was opened: device, inode and modification time (ns).
  uint64_t device_ = 0, inode_ = 0;
  int64_t modified_ns_ = 0;
  std::span<const std::byte> bytes_;
  std::string path_;
  std::vector<TensorView> tensors_;
  std::vector<size_t> by_name_;  // indices into tensors_, sorted by name (indices survive moves)
  std::map<std::string, std::string> metadata_;
};

// Builds a safetensors file byte-for-byte as the reference writer (safetensors::tensor::prepare,
// which the Python package calls) does: entries sorted by dtype in descending DType enum order
// (U64, I64, F64, F32, ..., U8, BOOL), ties by name (bytewise); data_offsets assigned in that
// order, data contiguous; compact JSON with "__metadata__" first, then the entries, each as
// {"dtype":..,"shape":[..],"data_offsets":[b,e]}; strings escaped as serde_json does; the JSON
// padded with spaces to a multiple of 8 bytes; an 8-byte little-endian length in front.
// Two deliberate choices where the reference is not determined: empty metadata is omitted (as
// metadata=None), and metadata keys are written sorted (the reference iterates a Rust HashMap, so
// with two or more keys its order varies from run to run).
// Not thread-safe; const methods may run concurrently with each other.
class SafetensorsWriter {
 public:
  // Copies nothing: `data` must stay valid until Write*. kInvalidArgument on a duplicate name,
  // the name "__metadata__", a name that is not valid UTF-8, a negative dimension, a shape whose
  // byte size overflows, or shape x dtype size != data.size().
  absl::Status Add(std::string name, DType dtype, std::vector<int64_t> shape,
                   std::span<const std::byte> data);
  // Replaces the metadata. Invalid UTF-8 in keys or values is written as U+FFFD.
  void SetMetadata(std::map<std::string, std::string> metadata) { metadata_ = std::move(metadata); }

  // Writes to `path` atomically: `path` + ".tmp.<pid>" in the same directory, fsync, rename (the
  // temporary file is removed on failure). kNotFound if the directory does not exist,
  // kPermissionDenied if it may not be written, kInternal for other I/O failures.
  absl::Status WriteFile(const std::string& path) const;
  // Serializes to memory (tests, small files).
  std::string Serialize() const;
  // Bytes WriteFile would write.
  uint64_t SerializedSize() const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::span<const std::byte> data;
  };
  // Entries in file order (see the class comment).
  std::vector<const Entry*> SortedEntries() const;
  // The N header bytes: JSON padded with spaces to a multiple of 8.
  std::string HeaderJson(const std::vector<const Entry*>& sorted) const;
  std::vector<Entry> entries_;
  std::set<std::string, std::less<>> names_;
  std::map<std::string, std::string> metadata_;
};

// The "weight_map" of a model.safetensors.index.json (`text`; `what` names it in errors): tensor
// name -> shard file name. kDataLoss if the text is not strict JSON (as safetensors headers: no
// duplicate keys, bounded depth) holding an object with a "weight_map" object whose values are
// plain file names (no directory part, not "." or "..").
absl::StatusOr<std::map<std::string, std::string>> ParseSafetensorsIndex(std::string_view text,
                                                                         std::string_view what);

// A checkpoint of one or more safetensors files in a directory. With `all_files` (as DF11 readers
// need): every regular *.safetensors file (symlinks followed, as in the HF cache). Otherwise the
// shards named by `model.safetensors.index.json` ("weight_map": tensor -> plain file name), else
// `model.safetensors`, else every *.safetensors file. Files are opened in name order.
// Movable; views and pointers from Find stay valid across moves. Immutable, so thread-safe.
class Checkpoint {
 public:
  // kNotFound if `dir` is missing or holds no safetensors file; kDataLoss if the index is not a
  // JSON object with a string-to-string "weight_map", names a file that is not a plain file name
  // or does not exist, or maps a tensor its shard lacks, or if a tensor name appears in two files;
  // file errors as SafetensorsFile::Open.
  static absl::StatusOr<Checkpoint> Open(const std::string& dir, bool all_files = false);

  const std::vector<SafetensorsFile>& files() const { return files_; }
  // nullptr if absent. Points into files().
  const TensorView* Find(std::string_view name) const;
  // Every tensor name, sorted.
  std::vector<std::string> TensorNames() const;

 private:
  std::vector<SafetensorsFile> files_;
  std::map<std::string, const TensorView*, std::less<>> by_name_;
};

}  // namespace df11::codec

#endif  // DF11_CODEC_SAFETENSORS_H_
