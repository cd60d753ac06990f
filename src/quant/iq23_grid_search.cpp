// Exact weighted search of the IQ2 / IQ3 codebooks (see iq23_grid_search.h).
//
// A lattice point gives each of an entry's elements a level; it is coded in base levels() with
// element 0 as the least significant digit. Its low half (the first len() / 2 elements) and high
// half are codes below half_points = levels()^(len() / 2), and the whole point is
// low + half_points * high: 81 x 81 points for the IQ2 grids (3 levels, 8 elements), 64 x 64 for
// the IQ3 grids (8 levels, 4 elements).
#include "quant/iq23_grid_search.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cstring>

#include "quant/iq23_grids.h"

namespace vela::iq23_detail {

namespace {

// The grid's entries as little-endian byte strings of `len` bytes each.
struct RawGrid {
  int len;
  int n;
  const void* table;  // uint64_t[n] (len 8) or uint32_t[n] (len 4)
};

RawGrid raw_grid(Grid grid) {
  switch (grid) {
    case Grid::kIq2Xxs:
      return {8, kIq2XxsGridSize, kIq2XxsGrid};
    case Grid::kIq2Xs:
      return {8, kIq2XsGridSize, kIq2XsGrid};
    case Grid::kIq2S:
      return {8, kIq2SGridSize, kIq2SGrid};
    case Grid::kIq3Xxs:
      return {4, kIq3XxsGridSize, kIq3XxsGrid};
    case Grid::kIq3S:
      return {4, kIq3SGridSize, kIq3SGrid};
  }
  return {8, 0, nullptr};
}

// Byte j of entry e.
uint8_t grid_byte(const RawGrid& g, int e, int j) {
  uint8_t bytes[8];
  if (g.len == 8) {
    std::memcpy(bytes, static_cast<const uint64_t*>(g.table) + e, 8);
  } else {
    std::memcpy(bytes, static_cast<const uint32_t*>(g.table) + e, 4);
  }
  return bytes[j];
}

}  // namespace

Codebook::Codebook(Grid grid) {
  const RawGrid g = raw_grid(grid);
  len_ = g.len;
  half_len_ = g.len / 2;
  n_entries_ = g.n;
  // The levels: the distinct byte values, ascending.
  bool seen[256] = {};
  for (int e = 0; e < g.n; ++e) {
    for (int j = 0; j < g.len; ++j) seen[grid_byte(g, e, j)] = true;
  }
  int level_of_byte[256];
  for (int b = 0; b < 256; ++b) {
    level_of_byte[b] = -1;
    if (!seen[b]) continue;
    assert(n_levels_ < kMaxLevels);
    level_of_byte[b] = n_levels_;
    magnitude_[n_levels_++] = float(b);
  }
  // scan() is specialised for these two shapes.
  assert((len_ == 8 && n_levels_ == 3) || (len_ == 4 && n_levels_ == 8));
  half_points_ = 1;
  for (int j = 0; j < half_len_; ++j) half_points_ *= n_levels_;

  entry_level_.resize(size_t(g.n) * size_t(g.len));
  entry_of_point_.assign(size_t(half_points_) * size_t(half_points_), int16_t(-1));
  std::vector<int> low(size_t(g.n)), high(size_t(g.n));
  std::vector<int> class_count(size_t(half_points_), 0);
  for (int e = 0; e < g.n; ++e) {
    int code[2] = {0, 0};
    for (int j = g.len - 1; j >= 0; --j) {
      const int v = level_of_byte[grid_byte(g, e, j)];
      entry_level_[size_t(e) * size_t(g.len) + size_t(j)] = uint8_t(v);
      code[j / half_len_] = code[j / half_len_] * n_levels_ + v;
    }
    low[size_t(e)] = code[0];
    high[size_t(e)] = code[1];
    entry_of_point_[size_t(code[0] + half_points_ * code[1])] = int16_t(e);
    ++class_count[size_t(code[1])];
  }
  class_begin_.assign(size_t(half_points_) + 1, 0);
  for (int h = 0; h < half_points_; ++h) {
    class_begin_[size_t(h) + 1] = uint16_t(class_begin_[size_t(h)] + class_count[size_t(h)]);
  }
  class_low_.resize(size_t(g.n));
  class_entry_.resize(size_t(g.n));
  std::vector<int> fill(class_begin_.begin(), class_begin_.end() - 1);
  for (int e = 0; e < g.n; ++e) {
    const size_t pos = size_t(fill[size_t(high[size_t(e)])]++);
    class_low_[pos] = uint16_t(low[size_t(e)]);
    class_entry_[pos] = uint16_t(e);
  }
}

namespace {

constexpr int power(int base, int exp) {
  return exp == 0 ? 1 : base * power(base, exp - 1);
}

// table[code] = sum of the costs of elements 0 .. kCount - 1 (kCount 1 or 2) at their point
// `code` (base kLevels, element 0 least significant).
template <int kCount, int kLevels>
void pair_table(const float cost[][kMaxLevels], float* table) {
  if constexpr (kCount == 1) {
    for (int v = 0; v < kLevels; ++v) table[v] = cost[0][v];
  } else {
    static_assert(kCount == 2);
    for (int v1 = 0; v1 < kLevels; ++v1) {
      for (int v0 = 0; v0 < kLevels; ++v0) table[kLevels * v1 + v0] = cost[0][v0] + cost[1][v1];
    }
  }
}

}  // namespace

float Codebook::nearest(const float cost[][kMaxLevels], int* index) const {
  // The element-wise cheapest point wins whenever it is an entry.
  int point = 0, digit = 1;
  float sum = 0;
  for (int j = 0; j < len_; ++j) {
    int v_best = 0;
    for (int v = 1; v < n_levels_; ++v) {
      if (cost[j][v] < cost[j][v_best]) v_best = v;
    }
    point += v_best * digit;
    digit *= n_levels_;
    sum += cost[j][v_best];
  }
  if (const int e = entry_of_point_[size_t(point)]; e >= 0) {
    *index = e;
    return sum;
  }
  return scan(cost, index);
}

template <int kLen, int kLevels>
float Codebook::scan_shape(const float cost[][kMaxLevels], int* index) const {
  // Each half is two quarters (1 element of IQ3, 2 of IQ2) with kQuarter points each. A class
  // (high half) h = a + kQuarter * b costs quarter[2][a] + quarter[3][b].
  constexpr int kHalf = kLen / 2;
  constexpr int kQuarter = power(kLevels, kHalf / 2);
  float quarter[4][kQuarter];
  float quarter_min[4];
  for (int k = 0; k < 4; ++k) {
    pair_table<kHalf / 2, kLevels>(cost + k * (kHalf / 2), quarter[k]);
    quarter_min[k] = *std::min_element(quarter[k], quarter[k] + kQuarter);
  }
  float low[kQuarter * kQuarter];
  for (int b = 0; b < kQuarter; ++b) {
    for (int a = 0; a < kQuarter; ++a) low[kQuarter * b + a] = quarter[0][a] + quarter[1][b];
  }
  const float low_min = quarter_min[0] + quarter_min[1];

  float best = FLT_MAX;
  int best_entry = -1;
  auto scan_class = [&](int h, float base) {
    for (int p = class_begin_[size_t(h)]; p < class_begin_[size_t(h) + 1]; ++p) {
      const float c = base + low[class_low_[size_t(p)]];
      if (c < best || (c == best && class_entry_[size_t(p)] < best_entry)) {
        best = c;
        best_entry = class_entry_[size_t(p)];
      }
    }
  };
  // First the class of the cheapest high half (if it has entries), for a good bound; then every
  // class whose cost plus the cheapest low half can still win, skipping a whole row of classes
  // (one point of quarter 3) when its cheapest member cannot.
  const int a0 = int(std::min_element(quarter[2], quarter[2] + kQuarter) - quarter[2]);
  const int b0 = int(std::min_element(quarter[3], quarter[3] + kQuarter) - quarter[3]);
  const int first = a0 + kQuarter * b0;
  scan_class(first, quarter[2][a0] + quarter[3][b0]);
  for (int b = 0; b < kQuarter; ++b) {
    if (quarter[3][b] + quarter_min[2] + low_min > best) continue;
    for (int a = 0; a < kQuarter; ++a) {
      const float base = quarter[2][a] + quarter[3][b];
      const int h = a + kQuarter * b;
      if (h != first && base + low_min <= best) scan_class(h, base);
    }
  }
  *index = best_entry;
  return best;
}

float Codebook::scan(const float cost[][kMaxLevels], int* index) const {
  return len_ == 8 ? scan_shape<8, 3>(cost, index) : scan_shape<4, 8>(cost, index);
}

const Codebook& codebook(Grid grid) {
  switch (grid) {
    case Grid::kIq2Xxs: {
      static const Codebook book(Grid::kIq2Xxs);
      return book;
    }
    case Grid::kIq2Xs: {
      static const Codebook book(Grid::kIq2Xs);
      return book;
    }
    case Grid::kIq2S: {
      static const Codebook book(Grid::kIq2S);
      return book;
    }
    case Grid::kIq3Xxs: {
      static const Codebook book(Grid::kIq3Xxs);
      return book;
    }
    case Grid::kIq3S:
      break;
  }
  static const Codebook book(Grid::kIq3S);
  return book;
}

}  // namespace vela::iq23_detail
