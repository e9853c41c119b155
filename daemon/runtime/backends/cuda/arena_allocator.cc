#include "daemon/runtime/backends/cuda/arena_allocator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codec/base/check.h"

namespace df11::runtime {

ArenaAllocator::ArenaAllocator(uint64_t size, uint64_t granule)
    : size_(size / granule * granule), granule_(granule) {
  DF11_CHECK(granule > 0 && (granule & (granule - 1)) == 0);
  if (size_ > 0) AddFree(0, size_);
}

absl::StatusOr<ArenaAllocator::Id> ArenaAllocator::Allocate(uint64_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("an arena allocation of 0 bytes");
  const uint64_t need = RoundUp(bytes);
  auto it = free_by_size_.lower_bound({need, 0});
  if (need < bytes || it == free_by_size_.end()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        need, " bytes do not fit in one free range of the arena: ", free_bytes(), " of ", size_,
        " bytes are free in ", free_ranges(), " ranges, the largest ", largest_free_range(),
        free_bytes() >= need ? " (compaction would make room)" : ""));
  }
  const auto [range, offset] = *it;
  RemoveFree(offset);
  if (range > need) AddFree(offset + need, range - need);
  const Id id = next_id_++;
  blocks_[id] = Block{offset, need};
  by_offset_[offset] = id;
  allocated_ += need;
  return id;
}

void ArenaAllocator::Free(Id id) {
  auto it = blocks_.find(id);
  DF11_CHECK(it != blocks_.end());
  uint64_t offset = it->second.offset, size = it->second.size;
  by_offset_.erase(offset);
  blocks_.erase(it);
  allocated_ -= size;
  // Merge with the free neighbours.
  auto next = free_by_offset_.find(offset + size);
  if (next != free_by_offset_.end()) {
    size += next->second;
    RemoveFree(next->first);
  }
  auto prev = free_by_offset_.lower_bound(offset);
  if (prev != free_by_offset_.begin()) {
    --prev;
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      RemoveFree(prev->first);
    }
  }
  AddFree(offset, size);
}

uint64_t ArenaAllocator::offset(Id id) const {
  auto it = blocks_.find(id);
  DF11_CHECK(it != blocks_.end());
  return it->second.offset;
}

uint64_t ArenaAllocator::size(Id id) const {
  auto it = blocks_.find(id);
  DF11_CHECK(it != blocks_.end());
  return it->second.size;
}

std::vector<ArenaAllocator::Move> ArenaAllocator::Compact() {
  std::vector<Move> moves;
  std::map<uint64_t, Id> placed;
  uint64_t cursor = 0;
  for (const auto& [offset, id] : by_offset_) {
    Block& b = blocks_.at(id);
    if (b.offset != cursor) moves.push_back(Move{id, b.offset, cursor, b.size});
    b.offset = cursor;
    placed[cursor] = id;
    cursor += b.size;
  }
  by_offset_ = std::move(placed);
  free_by_offset_.clear();
  free_by_size_.clear();
  if (cursor < size_) AddFree(cursor, size_ - cursor);
  return moves;
}

void ArenaAllocator::ForEachChunk(
    const Move& move, const std::function<void(uint64_t to, uint64_t from, uint64_t bytes)>& copy) {
  DF11_CHECK(move.to < move.from);
  const uint64_t chunk = move.from - move.to;
  for (uint64_t done = 0; done < move.bytes; done += chunk) {
    copy(move.to + done, move.from + done, std::min(chunk, move.bytes - done));
  }
}

uint64_t ArenaAllocator::largest_free_range() const {
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

void ArenaAllocator::AddFree(uint64_t offset, uint64_t size) {
  free_by_offset_[offset] = size;
  free_by_size_.insert({size, offset});
}

void ArenaAllocator::RemoveFree(uint64_t offset) {
  auto it = free_by_offset_.find(offset);
  DF11_CHECK(it != free_by_offset_.end());
  free_by_size_.erase({it->second, offset});
  free_by_offset_.erase(it);
}

}  // namespace df11::runtime
