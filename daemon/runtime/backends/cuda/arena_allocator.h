// Sub-allocation of one block of device memory: the arena a GPU backend takes from the driver
// once, at start, and carves into resident models, decode scratch, the KV pool and workspace.
// Pure bookkeeping over byte offsets; it touches no memory, so it is tested on the CPU.
//
// Ranges are handed out best-fit (the smallest free range that holds the request, lowest offset
// among equals), rounded up to a granule; a freed range merges with its free neighbours.
// Fragmentation is handled by compaction: Compact() slides every allocation down to the arena's
// start, in address order, and returns the moves for the caller to perform, in order, before it
// derives any pointer again. Allocations keep their ids; only their offsets change. A move's
// destination lies below its source, so copying it front to back in chunks no longer than the
// distance moved (ForEachChunk) never overlaps a chunk's source with its destination; with
// granule-multiple offsets that distance is at least one granule.
//
//   ArenaAllocator arena(budget, 2 << 20);
//   absl::StatusOr<ArenaAllocator::Id> id = arena.Allocate(bytes);
//   if (!id.ok() && arena.free_bytes() >= arena.RoundUp(bytes)) {
//     for (const ArenaAllocator::Move& m : arena.Compact()) ... copy m ...
//     id = arena.Allocate(bytes);
//   }
//   void* p = base + arena.offset(*id);
#ifndef DF11_DAEMON_RUNTIME_BACKENDS_CUDA_ARENA_ALLOCATOR_H_
#define DF11_DAEMON_RUNTIME_BACKENDS_CUDA_ARENA_ALLOCATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace df11::runtime {

class ArenaAllocator {
 public:
  using Id = uint64_t;

  // One allocation moved by Compact: `bytes` from offset `from` down to offset `to`.
  struct Move {
    Id id = 0;
    uint64_t from = 0, to = 0, bytes = 0;
  };

  // An arena of `size` bytes (rounded down to the granule) handed out in multiples of `granule`
  // (a power of two).
  ArenaAllocator(uint64_t size, uint64_t granule);

  // A range of at least `bytes` (RoundUp(bytes)). kInvalidArgument for 0 bytes;
  // kResourceExhausted with the numbers when no free range is large enough, saying whether
  // compaction would make room (free_bytes() >= RoundUp(bytes)).
  absl::StatusOr<Id> Allocate(uint64_t bytes);
  // Returns `id`'s range. Aborts for an id that is not allocated (a bug).
  void Free(Id id);

  uint64_t offset(Id id) const;
  uint64_t size(Id id) const;

  // Slides every allocation down to offset 0 in address order, leaving one free range at the end;
  // returns the moves made (none when nothing was out of place), in the order to perform them.
  std::vector<Move> Compact();
  // Calls copy(to, from, bytes) for the chunks of `move`, front to back, each no longer than the
  // distance moved, so that no chunk's source overlaps its destination.
  static void ForEachChunk(
      const Move& move,
      const std::function<void(uint64_t to, uint64_t from, uint64_t bytes)>& copy);

  uint64_t RoundUp(uint64_t bytes) const { return (bytes + granule_ - 1) / granule_ * granule_; }
  uint64_t capacity() const { return size_; }
  uint64_t granule() const { return granule_; }
  uint64_t allocated_bytes() const { return allocated_; }
  uint64_t free_bytes() const { return size_ - allocated_; }
  uint64_t largest_free_range() const;
  size_t allocations() const { return blocks_.size(); }
  size_t free_ranges() const { return free_by_offset_.size(); }

 private:
  struct Block {
    uint64_t offset = 0, size = 0;
  };
  void AddFree(uint64_t offset, uint64_t size);
  void RemoveFree(uint64_t offset);

  uint64_t size_, granule_;
  uint64_t allocated_ = 0;
  Id next_id_ = 1;
  std::map<Id, Block> blocks_;
  std::map<uint64_t, Id> by_offset_;                      // allocated ranges
  std::map<uint64_t, uint64_t> free_by_offset_;           // free ranges: offset -> size
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_;  // (size, offset)
};

}  // namespace df11::runtime

#endif  // DF11_DAEMON_RUNTIME_BACKENDS_CUDA_ARENA_ALLOCATOR_H_
