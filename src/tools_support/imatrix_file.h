#pragma once
// Importance-matrix files, as `vela imatrix` writes them and quantizers read them: per weight
// tensor, the mean of the squared inputs of each of its columns over a calibration text. Two
// formats, both as the reference GGUF engine writes them:
//  - GGUF (general.type = "imatrix"): metadata imatrix.datasets (strings), imatrix.chunk_count and
//    imatrix.chunk_size (u32); per tensor NAME, F32 tensors NAME.in_sum2 [n_cols] or
//    [n_cols, n_mat] (sums of squares) and NAME.counts [1] or [1, n_mat] (rows summed per
//    matrix; one count serves every matrix of a tensor that is not a routed-expert stack);
//  - the legacy .dat layout (little-endian): int32 n_entries; per entry int32 name length, the
//    name's bytes, int32 ncall (chunks), int32 nval, nval f32 values (mean square x ncall); then
//    optionally int32 chunk count, int32 length and the dataset's name.
// Thread-safety: the functions keep no state and may run concurrently; an ImportanceMatrix is a
// plain value (concurrent reads are safe).
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace vela {

struct ImatrixEntry {
  int64_t n_cols = 0;  // input columns of one matrix (legacy: all values, see matrix_importance)
  int32_t n_mat = 1;   // matrices the tensor stacks (experts), or 1
  // Sums as collected (GGUF files; empty for legacy files, which keep only the means).
  std::vector<float> sum2;      // [n_mat, n_cols] sums of the squared inputs
  std::vector<int64_t> counts;  // [n_mat], or [1] for all: input rows summed into each matrix
  // [n_mat, n_cols] mean squared input of each column: sum2 / count. A stacked matrix that no
  // row reached (an expert the text never chose) gets 1 throughout, as the reference's quantizer
  // treats it: no preference among its columns.
  std::vector<float> importance;

  int64_t count(int32_t mat) const { return counts.size() == 1 ? counts[0] : counts[size_t(mat)]; }
  // Sets importance from sum2 and counts.
  void update_importance();
  // Matrix `mat`'s importance for a tensor `n` columns wide; empty when the entry does not hold
  // one (a legacy file stores the matrices of a stack side by side without saying their width).
  std::span<const float> matrix_importance(int32_t mat, int64_t n) const;
};

struct ImportanceMatrix {
  std::vector<std::string> datasets;  // the calibration texts, as named to the command
  int32_t chunk_count = 0;            // chunks the sums cover
  int32_t chunk_size = 0;             // tokens per chunk (0: not recorded, legacy files)
  bool legacy = false;                // read from a legacy .dat file
  std::map<std::string, ImatrixEntry, std::less<>> entries;  // by weight tensor name

  const ImatrixEntry* find(std::string_view tensor_name) const;
};

// Reads either format (a GGUF file by its magic, anything else as legacy). Every malformed file
// (truncated, wrong sizes or types, missing keys or pairs, NaN or negative values, counts of 0)
// gives an error naming the problem.
Result<ImportanceMatrix> read_imatrix(const std::string& path);

// Writes the GGUF format from the entries' sums and counts, tensors in name order.
Status write_imatrix(const ImportanceMatrix& matrix, const std::string& path);

}  // namespace vela
