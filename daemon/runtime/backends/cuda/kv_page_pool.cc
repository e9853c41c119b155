#include "daemon/runtime/backends/cuda/kv_page_pool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codec/base/check.h"

namespace df11::runtime {

KvPagePool::KvPagePool(uint64_t bytes, uint64_t page_bytes)
    : page_bytes_(page_bytes),
      pages_(static_cast<uint32_t>(std::min<uint64_t>(bytes / page_bytes, UINT32_MAX))) {
  DF11_CHECK(page_bytes > 0);
  free_.resize(pages_);
  for (uint32_t i = 0; i < pages_; ++i) free_[i] = pages_ - 1 - i;
}

uint32_t KvPagePool::free_pages() const {
  absl::MutexLock lock(&mu_);
  return static_cast<uint32_t>(free_.size());
}

uint64_t KvPagePool::PositionsPerPage(uint64_t bytes_per_position) const {
  return bytes_per_position == 0 ? 0 : page_bytes_ / bytes_per_position;
}

absl::StatusOr<KvPageTable> KvPagePool::Reserve(uint64_t bytes_per_position, int64_t positions) {
  if (positions < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a KV cache of ", positions, " positions"));
  }
  KvPageTable table;
  table.positions_per_page = PositionsPerPage(bytes_per_position);
  if (table.positions_per_page == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "one position of this model's KV cache takes ", bytes_per_position,
        " bytes, more than a KV page of ", page_bytes_, " bytes (raise memory.kv_page)"));
  }
  const uint64_t needed =
      (static_cast<uint64_t>(positions) + table.positions_per_page - 1) / table.positions_per_page;
  absl::MutexLock lock(&mu_);
  if (needed > free_.size()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a KV cache of ", positions, " positions needs ", needed, " pages of ",
                     page_bytes_, " bytes (", needed * page_bytes_, " bytes); the KV pool has ",
                     free_.size(), " of ", pages_, " pages free"));
  }
  table.pages.assign(free_.end() - static_cast<ptrdiff_t>(needed), free_.end());
  std::reverse(table.pages.begin(), table.pages.end());
  free_.resize(free_.size() - needed);
  table.capacity = static_cast<int64_t>(needed * table.positions_per_page);
  return table;
}

void KvPagePool::Release(KvPageTable& table) {
  absl::MutexLock lock(&mu_);
  for (auto it = table.pages.rbegin(); it != table.pages.rend(); ++it) {
    DF11_DCHECK(*it < pages_);
    free_.push_back(*it);
  }
  table.pages.clear();
  table.capacity = 0;
}

}  // namespace df11::runtime
