#pragma once
// Exact weighted search of the IQ1 codebook (quant/iq1_grid.h), for the IQ1_S / IQ1_M quantizers.
// Given, for each of a group's 8 elements, the cost of each of the three values -1, 0, +1, the
// search returns the codebook entry with the lowest total cost. The costs are separable, so the
// element-wise cheapest point of {-1, 0, 1}^8 is the answer whenever it is a codebook entry (a
// table lookup); otherwise the entries a few changes away are tried in order, with a lower bound
// that says when no further entry can win (details in iq1_grid_search.cpp).
// Thread-safety: the lookup tables are built once, on first use, by a function-local static
// (C++ guarantees a single, synchronised initialisation); afterwards they are read-only.
#include <cstdint>

namespace vela::iq1_detail {

// cost[j][v + 1]: the cost of giving element j (0..7) the value v (-1, 0, +1). Costs must be
// finite. Writes the index (0..2047) of a cheapest codebook entry (the same one every time for
// the same costs) to *index and returns its total cost.
float nearest_entry(const float cost[8][3], uint16_t* index);

}  // namespace vela::iq1_detail
