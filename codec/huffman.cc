#include "codec/huffman.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codec/format.h"

namespace df11::codec {
namespace {

constexpr int kEof = -1;  // dahuffman's _EOF compares smaller than every integer symbol

// A tree node while merging: its weight, the first symbol of its leaf list (the tie-breaker in
// dahuffman's heap order), and the leaves it holds, in code order.
struct Node {
  uint64_t weight;
  int first_symbol;
  std::vector<int> leaves;
};

bool Before(const Node& a, const Node& b) {
  if (a.weight != b.weight) return a.weight < b.weight;
  return a.first_symbol < b.first_symbol;
}

// Code lengths and values of dahuffman's tree. Values can exceed 64 bits before the limiter runs,
// so they are kept in 128 bits (depth is at most 128 with 64-bit weights: Fibonacci growth).
struct RawCode {
  std::array<unsigned __int128, 257> value{};  // index symbol + 1; index 0 is EOF
  std::array<int, 257> length{};
  int max_length = 0;
};

RawCode BuildTree(std::span<const std::pair<int, uint64_t>> frequencies) {
  std::vector<Node> heap;
  heap.reserve(frequencies.size() + 1);
  for (const auto& [symbol, count] : frequencies) heap.push_back({count, symbol, {symbol}});
  heap.push_back({1, kEof, {kEof}});
  RawCode code;
  // At most 241 nodes: a linear scan for the two smallest is as fast as a heap and obviously
  // follows dahuffman's strict (weight, first symbol) order.
  while (heap.size() > 1) {
    auto pop_min = [&heap] {
      auto it = std::min_element(heap.begin(), heap.end(), Before);
      Node n = std::move(*it);
      heap.erase(it);
      return n;
    };
    Node a = pop_min();
    Node b = pop_min();
    for (int s : a.leaves) ++code.length[s + 1];  // a 0 bit above a's codes
    for (int s : b.leaves) {                       // a 1 bit above b's codes
      code.value[s + 1] |= static_cast<unsigned __int128>(1) << code.length[s + 1];
      ++code.length[s + 1];
    }
    Node merged{a.weight + b.weight, a.first_symbol, std::move(a.leaves)};
    merged.leaves.insert(merged.leaves.end(), b.leaves.begin(), b.leaves.end());
    heap.push_back(std::move(merged));
  }
  for (int len : code.length) code.max_length = std::max(code.max_length, len);
  return code;
}

}  // namespace

void CountExponents(std::span<const uint16_t> bf16, Histogram& histogram) {
  // Four tables so that runs of one exponent do not serialise on a single counter.
  std::array<std::array<uint64_t, 256>, 4> c{};
  size_t i = 0;
  for (; i + 4 <= bf16.size(); i += 4) {
    ++c[0][format::Exponent(bf16[i])];
    ++c[1][format::Exponent(bf16[i + 1])];
    ++c[2][format::Exponent(bf16[i + 2])];
    ++c[3][format::Exponent(bf16[i + 3])];
  }
  for (; i < bf16.size(); ++i) ++c[0][format::Exponent(bf16[i])];
  for (int e = 0; e < 256; ++e) histogram[e] += c[0][e] + c[1][e] + c[2][e] + c[3][e];
}

int HuffmanCode::max_length() const {
  int m = eof.length;
  for (const CodeWord& w : symbols) m = std::max<int>(m, w.length);
  return m;
}

absl::StatusOr<HuffmanCode> BuildOfficialCode(const Histogram& histogram) {
  // The official counter lists present exponents in ascending order (torch.unique).
  std::vector<std::pair<int, uint64_t>> frequencies;
  for (int e = 0; e < 256; ++e) {
    if (histogram[e] == 0) continue;
    if (e >= format::kFirstPointerValue) {
      return absl::InvalidArgumentError(absl::StrCat(
          histogram[e], " values have exponent ", e,
          " (|x| >= 2^113, Inf or NaN), which DF11 cannot code"));
    }
    frequencies.emplace_back(e, histogram[e]);
  }
  if (frequencies.empty()) return absl::InvalidArgumentError("empty histogram");

  RawCode raw = BuildTree(frequencies);
  bool limited = false;
  // The official limiter: raise the k smallest counts to 1, k = 2, 3, ..., rebuilding from the
  // original counts each time. Ties are broken by position (ascending exponent).
  for (size_t k = 2; raw.max_length > format::kMaxCodeLength; ++k) {
    std::vector<size_t> order(frequencies.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      return frequencies[x].second < frequencies[y].second;
    });
    auto modified = frequencies;
    for (size_t i = 0; i < std::min(k, order.size()); ++i) modified[order[i]].second = 1;
    raw = BuildTree(modified);
    limited = true;
  }

  HuffmanCode code;
  code.limited = limited;
  for (const auto& [symbol, count] : frequencies) {
    code.symbols[symbol] = {static_cast<uint32_t>(raw.value[symbol + 1]),
                            static_cast<uint8_t>(raw.length[symbol + 1])};
  }
  code.eof = {static_cast<uint32_t>(raw.value[0]), static_cast<uint8_t>(raw.length[0])};
  return code;
}

}  // namespace df11::codec
