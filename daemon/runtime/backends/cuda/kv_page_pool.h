// The KV cache of every model on one GPU in a single pool of fixed-size pages. Pages are counted
// in bytes, not positions, so models with different layer counts, KV heads and head sizes share
// the pool: a page of a model holds PositionsPerPage(model) consecutive positions of a sequence,
// for every layer. A sequence holds a page table (its pages in position order), taken whole when
// its cache is made, so nothing is allocated while it decodes. Thread-safe.
//
// Layout of one page for a model with L layers, H KV heads of D BF16 values and P positions per
// page (the forward pass reads it through per-layer strides):
//   [layer 0 keys: P x H x D][layer 0 values: P x H x D][layer 1 keys] ... [layer L-1 values]
// followed by unused bytes up to the page size.
//
//   KvPagePool pool(/*bytes=*/8 << 30, /*page_bytes=*/2 << 20);
//   DF11_ASSIGN_OR_RETURN(KvPageTable t, pool.Reserve(KvBytesPerPosition(config), 4096));
//   ... pool offset of position p: t.pages[p / t.positions_per_page] * pool.page_bytes() ...
//   pool.Release(t);
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_KV_PAGE_POOL_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_KV_PAGE_POOL_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace df11::runtime {

// The pages of one sequence, in position order.
struct KvPageTable {
  std::vector<uint32_t> pages;
  uint64_t positions_per_page = 0;
  int64_t capacity = 0;  // positions the pages hold: pages.size() * positions_per_page
};

class KvPagePool {
 public:
  // A pool of `bytes` / `page_bytes` pages (page_bytes > 0).
  KvPagePool(uint64_t bytes, uint64_t page_bytes);

  uint64_t page_bytes() const { return page_bytes_; }
  uint32_t pages() const { return pages_; }
  uint64_t bytes() const { return uint64_t{pages_} * page_bytes_; }
  uint32_t free_pages() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t free_bytes() const { return uint64_t{free_pages()} * page_bytes_; }
  uint64_t used_bytes() const { return bytes() - free_bytes(); }

  // Positions of a model whose position takes `bytes_per_position` (keys and values of every
  // layer) that one page holds; 0 when one position does not fit in a page.
  uint64_t PositionsPerPage(uint64_t bytes_per_position) const;

  // The pages for `positions` (>= 1) positions. kInvalidArgument when one position does not fit
  // in a page (with the numbers: raise the page size); kResourceExhausted when the pool has too
  // few free pages (with the numbers).
  absl::StatusOr<KvPageTable> Reserve(uint64_t bytes_per_position, int64_t positions)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Returns `table`'s pages to the pool and empties it.
  void Release(KvPageTable& table) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const uint64_t page_bytes_;
  const uint32_t pages_;
  mutable absl::Mutex mu_;
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);  // a stack: the lowest page on top at start
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_KV_PAGE_POOL_H_
