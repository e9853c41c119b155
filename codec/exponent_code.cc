#include "codec/exponent_code.h"

#include <algorithm>
#include <utility>

namespace df11::codec {
namespace {

// Optimal prefix code lengths of `freqs` (2 <= n <= 2^max_length symbols; zeros allowed) with no
// code longer than `max_length`: package-merge (Larmore and Hirschberg). Ties are broken by
// position, so the result depends on the frequencies only.
std::vector<int> LimitedLengths(const std::vector<uint64_t>& freqs, int max_length) {
  const size_t n = freqs.size();
  struct Item {
    uint64_t weight;
    std::vector<uint8_t> count;  // how many times each symbol is in the item
  };
  std::vector<Item> leaves(n);
  for (size_t i = 0; i < n; ++i) {
    leaves[i] = {freqs[i], std::vector<uint8_t>(n, 0)};
    leaves[i].count[i] = 1;
  }
  std::stable_sort(leaves.begin(), leaves.end(),
                   [](const Item& a, const Item& b) { return a.weight < b.weight; });
  std::vector<Item> level = leaves;
  for (int l = 1; l < max_length; ++l) {
    std::vector<Item> merged = leaves;
    for (size_t i = 0; i + 1 < level.size(); i += 2) {
      Item package{level[i].weight + level[i + 1].weight, level[i].count};
      for (size_t k = 0; k < n; ++k) package.count[k] += level[i + 1].count[k];
      merged.push_back(std::move(package));
    }
    std::stable_sort(merged.begin(), merged.end(),
                     [](const Item& a, const Item& b) { return a.weight < b.weight; });
    level = std::move(merged);
  }
  std::vector<int> lengths(n, 0);
  for (size_t i = 0; i < 2 * n - 2; ++i) {
    for (size_t k = 0; k < n; ++k) lengths[k] += level[i].count[k];
  }
  return lengths;
}

}  // namespace

ExponentCode ExponentCode::Choose(const std::array<uint64_t, 256>& histogram, int max_length,
                                  int max_coded, double escape_cost_bits) {
  std::vector<int> order(256);
  for (int i = 0; i < 256; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return histogram[a] > histogram[b]; });
  const int distinct = static_cast<int>(
      std::count_if(histogram.begin(), histogram.end(), [](uint64_t c) { return c > 0; }));
  ExponentCode best;
  double best_bits = -1;
  const int most = std::min({max_coded, distinct, (1 << max_length) - 1});
  for (int m = 1; m <= std::max(1, most); ++m) {
    std::vector<uint64_t> freqs(m + 1, 0);
    for (int i = 0; i < 256; ++i) freqs[std::min(i, m)] += histogram[order[i]];
    const std::vector<int> lengths = LimitedLengths(freqs, max_length);
    double bits = (8.0 + escape_cost_bits) * freqs[m];
    for (int i = 0; i <= m; ++i) bits += double(freqs[i]) * lengths[i];
    if (best_bits >= 0 && bits >= best_bits) continue;
    best_bits = bits;
    best.m = m;
    best.lengths = lengths;
  }
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
