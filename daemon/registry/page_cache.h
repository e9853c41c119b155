#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace df11::registry {

// Brings a file's pages into memory (the page cache that the model's own mappings then use)
// without copying them: MADV_POPULATE_READ, `step` bytes at a time. A cold file is read from
// disk; a warm one costs page-table work only (about a tenth of reading it). After each step,
// `on_progress(bytes_done)`; false from it stops with CANCELLED. Returns the file's size.
absl::StatusOr<uint64_t> PopulateFile(const std::string& path, uint64_t step,
                                      const std::function<bool(uint64_t)>& on_progress);

}  // namespace df11::registry
