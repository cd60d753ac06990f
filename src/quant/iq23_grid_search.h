#pragma once
// Exact weighted search of the IQ2 / IQ3 codebooks (quant/iq23_grids.h), for the quantizers in
// quant/quantize_iq23.h.
//
// A codebook entry gives the magnitudes of `len` consecutive elements (8 for the IQ2 grids, 4 for
// the IQ3 grids), each one of the grid's few distinct byte values ("levels": 3 for IQ2, 8 for
// IQ3). The caller states, for each element and each level, the cost of giving that element that
// level; costs add up over the elements, and the search returns the entry of lowest total cost.
// It first looks up the element-wise cheapest point of the lattice (the answer whenever it is an
// entry); otherwise it tabulates the cost of every point of each half of the entry (81 or 64) and
// scans the entries grouped by their high half, skipping every group (and every row of groups)
// whose cost plus the cheapest low half cannot beat the best entry found so far.
// Thread-safety: the tables are built once, on first use, by function-local statics (C++
// guarantees a single, synchronised initialisation); afterwards they are read-only.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace vela::iq23_detail {

inline constexpr int kMaxLevels = 8;  // most distinct magnitudes in a grid (IQ3)
inline constexpr int kMaxLen = 8;     // most elements per entry (IQ2)

enum class Grid { kIq2Xxs, kIq2Xs, kIq2S, kIq3Xxs, kIq3S };

class Codebook {
 public:
  // Built from the grid's table in iq23_grids.h.
  explicit Codebook(Grid grid);

  int len() const { return len_; }                                // elements per entry (8 or 4)
  int levels() const { return n_levels_; }                        // distinct magnitudes (3 or 8)
  int size() const { return n_entries_; }                         // entries
  float magnitude(int level) const { return magnitude_[level]; }  // ascending byte values
  // Level (0 .. levels() - 1) of element j of entry e.
  int level_of(int e, int j) const { return entry_level_[size_t(e) * size_t(len_) + size_t(j)]; }

  // The entry whose element j has level level[j] (j = 0 .. len() - 1), or -1 if there is none.
  int entry_at(const int* level) const {
    int point = 0;
    for (int j = len_ - 1; j >= 0; --j) point = point * n_levels_ + level[j];
    return entry_of_point_[size_t(point)];
  }

  // Whether some entry has level v in every element.
  bool repeats(int level) const {
    int levels[kMaxLen];
    for (int j = 0; j < len_; ++j) levels[j] = level;
    return entry_at(levels) >= 0;
  }

  // cost[j][v]: cost of giving element j (0 .. len() - 1) level v (0 .. levels() - 1); finite.
  // Writes the index of a cheapest entry (the same one for the same costs) to *index and returns
  // its total cost.
  float nearest(const float cost[][kMaxLevels], int* index) const;
  // The same without the look-up of the element-wise cheapest point (for callers that have
  // already found it off the codebook).
  float scan(const float cost[][kMaxLevels], int* index) const;

 private:
  // scan() for entries of kLen elements with kLevels levels (8 and 3, or 4 and 8).
  template <int kLen, int kLevels>
  float scan_shape(const float cost[][kMaxLevels], int* index) const;

  int len_ = 0, half_len_ = 0, n_levels_ = 0, n_entries_ = 0;
  int half_points_ = 0;  // levels()^(len()/2)
  float magnitude_[kMaxLevels] = {};
  std::vector<uint8_t> entry_level_;     // [size() * len()]
  std::vector<int16_t> entry_of_point_;  // [half_points^2]: entry at point low + half * high, or -1
  // Entries grouped by their high half: class h lists positions class_begin_[h] ..
  // class_begin_[h + 1] - 1 of class_low_ (their low halves) and class_entry_ (their indices).
  std::vector<uint16_t> class_begin_;
  std::vector<uint16_t> class_low_;
  std::vector<uint16_t> class_entry_;
};

// The codebook of `grid`, built on first use.
const Codebook& codebook(Grid grid);

}  // namespace vela::iq23_detail
