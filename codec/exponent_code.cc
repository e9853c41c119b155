#include "codec/exponent_code.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

namespace df11::codec {
namespace {

// Huffman code lengths of `freqs` (at least two; zeros allowed), ties broken by index so that the
// result depends on the frequencies only.
std::vector<int> HuffmanLengths(const std::vector<uint64_t>& freqs) {
  const int n = static_cast<int>(freqs.size());
  using Node = std::pair<uint64_t, int>;  // weight, id
  std::priority_queue<Node, std::vector<Node>, std::greater<Node>> queue;
  std::vector<int> parent(2 * n, -1);
  for (int i = 0; i < n; ++i) queue.push({freqs[i], i});
  int next = n;
  while (queue.size() > 1) {
    const Node a = queue.top();
    queue.pop();
    const Node b = queue.top();
    queue.pop();
    parent[a.second] = parent[b.second] = next;
    queue.push({a.first + b.first, next++});
  }
  std::vector<int> lengths(n);
  for (int i = 0; i < n; ++i) {
    for (int p = i; parent[p] != -1; p = parent[p]) ++lengths[i];
  }
  return lengths;
}

}  // namespace

ExponentCode ExponentCode::Choose(const std::array<uint64_t, 256>& histogram, int max_length,
                                  int max_coded) {
  std::vector<int> order(256);
  for (int i = 0; i < 256; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return histogram[a] > histogram[b]; });
  const int distinct = static_cast<int>(
      std::count_if(histogram.begin(), histogram.end(), [](uint64_t c) { return c > 0; }));
  ExponentCode best;
  double best_bits = -1;
  for (int m = 1; m <= std::max(1, std::min(max_coded, distinct)); ++m) {
    std::vector<uint64_t> freqs(m + 1, 0);
    for (int i = 0; i < 256; ++i) freqs[std::min(i, m)] += histogram[order[i]];
    const std::vector<int> lengths = HuffmanLengths(freqs);
    if (*std::max_element(lengths.begin(), lengths.end()) > max_length) continue;
    double bits = 8.0 * freqs[m];
    for (int i = 0; i <= m; ++i) bits += double(freqs[i]) * lengths[i];
    if (best_bits >= 0 && bits >= best_bits) continue;
    best_bits = bits;
    best.m = m;
    best.lengths = lengths;
  }
  // m = 1 always qualifies (two codes of one bit), so `best` is set.
  const int m = best.m;
  best.exponents.assign(order.begin(), order.begin() + m);
  best.symbol.fill(static_cast<uint8_t>(m));
  for (int i = 0; i < m; ++i) best.symbol[order[i]] = static_cast<uint8_t>(i);
  // Canonical values: by length, then symbol.
  std::vector<int> by_length(m + 1);
  for (int i = 0; i <= m; ++i) by_length[i] = i;
  std::stable_sort(by_length.begin(), by_length.end(),
                   [&](int a, int b) { return best.lengths[a] < best.lengths[b]; });
  best.values.assign(m + 1, 0);
  uint32_t value = 0;
  int length = best.lengths[by_length[0]];
  for (int i : by_length) {
    value <<= best.lengths[i] - length;
    length = best.lengths[i];
    best.values[i] = value++;
  }
  for (int e = 0; e < 256; ++e) {
    best.length_of[e] = static_cast<uint8_t>(best.lengths[best.symbol[e]]);
    best.value_of[e] = best.values[best.symbol[e]];
  }
  return best;
}

uint64_t ExponentCode::Bits(const std::array<uint64_t, 256>& histogram) const {
  uint64_t bits = 0;
  for (int e = 0; e < 256; ++e) bits += histogram[e] * (length_of[e] + (escaped(e) ? 8 : 0));
  return bits;
}

}  // namespace df11::codec
