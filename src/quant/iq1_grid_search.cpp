// Exact weighted codebook search for IQ1 groups (see iq1_grid_search.h).
//
// A point of {-1, 0, 1}^8 is coded in base 3, digit v_j + 1 for element j (element 0 the least
// significant); its low half (elements 0..3) and high half (elements 4..7) are codes in 0..80,
// and the whole point is low + 81 * high. The tables: for every point, its codebook index or -1,
// and the 2048 entries grouped by low half (each class listing its entries' high halves).
//
// With u the element-wise cheapest point and `floor` its cost, an entry differing from u in m
// elements costs at least floor plus the m smallest "cheapest changes" (per element, the lower
// extra cost of its two other values). The search looks at u itself, then at the entries one
// change away, then two, stopping as soon as the best found cannot be beaten by any entry with
// more changes; the rare rest scans every class of low halves whose cheapest completion could
// still win.
#include "quant/iq1_grid_search.h"

#include <algorithm>
#include <cassert>
#include <cfloat>

#include "quant/iq1_grid.h"

namespace vela::iq1_detail {

namespace {

constexpr int kHalfCodes = 81;                    // 3^4
constexpr int kPoints = kHalfCodes * kHalfCodes;  // 3^8

struct SearchTables {
  int16_t entry_of_point[kPoints];  // codebook index of each point, or -1
  // Entries by low half: class a holds positions by_low_begin[a] .. by_low_begin[a + 1] - 1 of
  // by_low_high (their high halves) and by_low_index (their codebook indices).
  uint16_t by_low_begin[kHalfCodes + 1];
  uint8_t by_low_high[kIq1GridSize];
  uint16_t by_low_index[kIq1GridSize];
};

// Base-3 code of elements first..first+3 of codebook entry `index`.
int half_code(int index, int first) {
  int code = 0;
  for (int j = first + 3; j >= first; --j) code = 3 * code + iq1_grid_value(uint32_t(index), j) + 1;
  return code;
}

SearchTables build_tables() {
  SearchTables t{};
  for (int16_t& e : t.entry_of_point) e = -1;
  int low_count[kHalfCodes] = {};
  for (int i = 0; i < kIq1GridSize; ++i) {
    const int low = half_code(i, 0), high = half_code(i, 4);
    t.entry_of_point[low + kHalfCodes * high] = int16_t(i);
    ++low_count[low];
  }
  t.by_low_begin[0] = 0;
  for (int a = 0; a < kHalfCodes; ++a)
    t.by_low_begin[a + 1] = uint16_t(t.by_low_begin[a] + low_count[a]);
  int low_fill[kHalfCodes];
  for (int a = 0; a < kHalfCodes; ++a) low_fill[a] = t.by_low_begin[a];
  for (int i = 0; i < kIq1GridSize; ++i) {  // ascending index within every class
    const int low = half_code(i, 0), high = half_code(i, 4);
    t.by_low_high[low_fill[low]] = uint8_t(high);
    t.by_low_index[low_fill[low]++] = uint16_t(i);
  }
  return t;
}

const SearchTables& tables() {
  static const SearchTables t = build_tables();
  return t;
}

// half_cost[code] for the 81 codes of elements first..first+3: the sum of their costs.
void half_costs(const float cost[8][3], int first, float* half_cost) {
  float pair_lo[9], pair_hi[9];  // elements first, first+1 and first+2, first+3
  for (int v1 = 0; v1 < 3; ++v1) {
    for (int v0 = 0; v0 < 3; ++v0) {
      pair_lo[3 * v1 + v0] = cost[first][v0] + cost[first + 1][v1];
      pair_hi[3 * v1 + v0] = cost[first + 2][v0] + cost[first + 3][v1];
    }
  }
  for (int k = 0; k < 9; ++k) {
    for (int m = 0; m < 9; ++m) half_cost[9 * k + m] = pair_lo[m] + pair_hi[k];
  }
}

}  // namespace

float nearest_entry(const float cost[8][3], uint16_t* index) {
  const SearchTables& t = tables();
  // The element-wise cheapest point u (first of equal costs) and its cost `floor`: a lower bound
  // on every entry's cost, and the answer when u is an entry.
  int u[8], code = 0;
  float floor = 0;
  for (int j = 7; j >= 0; --j) {
    int v = cost[j][1] < cost[j][0] ? 1 : 0;
    if (cost[j][2] < cost[j][v]) v = 2;
    u[j] = v;
    code = 3 * code + v;
    floor += cost[j][v];
  }
  const int direct = t.entry_of_point[code];
  if (direct >= 0) {
    *index = uint16_t(direct);
    return floor;
  }

  // Entries one change away from u. pen[j][k]: the extra cost of giving element j its k-th other
  // value (k = 0, 1), step[j][k] the change of the point's code; least[j] the smaller penalty.
  static constexpr int kPow3[8] = {1, 3, 9, 27, 81, 243, 729, 2187};
  float pen[8][2], least[8];
  int step[8][2];
  float best = FLT_MAX;
  int best_index = -1;
  for (int j = 0; j < 8; ++j) {
    for (int k = 0, v = 0; v < 3; ++v) {
      if (v == u[j]) continue;
      pen[j][k] = cost[j][v] - cost[j][u[j]];
      step[j][k] = (v - u[j]) * kPow3[j];
      const int e = t.entry_of_point[code + step[j][k]];
      if (e >= 0 && floor + pen[j][k] < best) {
        best = floor + pen[j][k];
        best_index = e;
      }
      ++k;
    }
    least[j] = std::min(pen[j][0], pen[j][1]);
  }
  // Any entry m >= 2 changes away costs at least floor plus the m smallest of least[].
  float small[3] = {FLT_MAX, FLT_MAX, FLT_MAX};
  for (int j = 0; j < 8; ++j) {
    float v = least[j];
    for (int m = 0; m < 3; ++m) {
      if (v < small[m]) std::swap(v, small[m]);
    }
  }
  if (best <= floor + small[0] + small[1]) {
    *index = uint16_t(best_index);
    return best;
  }
  // Entries two changes away.
  for (int j = 0; j < 8; ++j) {
    for (int k = j + 1; k < 8; ++k) {
      for (int a = 0; a < 2; ++a) {
        for (int b = 0; b < 2; ++b) {
          const float c = floor + pen[j][a] + pen[k][b];
          if (c >= best) continue;
          const int e = t.entry_of_point[code + step[j][a] + step[k][b]];
          if (e >= 0) {
            best = c;
            best_index = e;
          }
        }
      }
    }
  }
  if (best <= floor + small[0] + small[1] + small[2]) {
    *index = uint16_t(best_index);
    return best;
  }

  // Otherwise scan the entries by low half, skipping every class whose cheapest completion
  // cannot beat the best found so far (floor_high: the cheapest of all high halves).
  float low_cost[kHalfCodes], high_cost[kHalfCodes];
  half_costs(cost, 0, low_cost);
  half_costs(cost, 4, high_cost);
  float floor_high = 0;
  for (int j = 4; j < 8; ++j) floor_high += cost[j][u[j]];
  for (int a = 0; a < kHalfCodes; ++a) {
    if (low_cost[a] + floor_high >= best) continue;
    for (int p = t.by_low_begin[a]; p < t.by_low_begin[a + 1]; ++p) {
      const float c = low_cost[a] + high_cost[t.by_low_high[p]];
      if (c < best) {
        best = c;
        best_index = t.by_low_index[p];
      }
    }
  }
  assert(best_index >= 0);
  *index = uint16_t(best_index);
  return best;
}

}  // namespace vela::iq1_detail
