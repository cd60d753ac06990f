#include "tools_support/imatrix_collector.h"

#include <algorithm>
#include <map>

#include "model/named_weights.h"

namespace vela {

ImatrixCollector::ImatrixCollector(const Model& model) {
  std::map<std::string, size_t> by_name;
  for (const NamedWeight& nw : named_weights(model)) {
    auto [it, added] = by_name.emplace(nw.name, entries_.size());
    if (added) {
      Entry e{nw.name, nw.n_cols, nw.n_stack, nw.routed, {}, {}};
      e.sum2.assign(size_t(e.n_mat * e.n_cols), 0.0);
      e.counts.assign(size_t(e.n_mat), 0);
      entries_.push_back(std::move(e));
    }
    slots_.emplace(nw.data, Slot{it->second, nw.index});
  }
}

void ImatrixCollector::observe(const WeightMatrix& w, const float* x, int64_t n_tokens) {
  const auto it = slots_.find(w.data);
  if (it == slots_.end()) return;
  Entry& e = entries_[it->second.entry];
  if (!e.routed && n_tokens < kMinRows) return;
  double* sum = e.sum2.data() + int64_t(it->second.index) * e.n_cols;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = x + t * e.n_cols;
    for (int64_t c = 0; c < e.n_cols; ++c) sum[c] += double(row[c]) * double(row[c]);
  }
  e.counts[size_t(it->second.index)] += n_tokens;
}

ImportanceMatrix ImatrixCollector::result(std::vector<std::string> datasets, int32_t chunk_count,
                                          int32_t chunk_size) const {
  ImportanceMatrix m;
  m.datasets = std::move(datasets);
  m.chunk_count = chunk_count;
  m.chunk_size = chunk_size;
  for (const Entry& e : entries_) {
    if (std::all_of(e.counts.begin(), e.counts.end(), [](int64_t c) { return c == 0; })) continue;
    ImatrixEntry out;
    out.n_cols = e.n_cols;
    out.n_mat = e.n_mat;
    out.sum2.assign(e.sum2.begin(), e.sum2.end());
    const bool one_count =
        !e.routed && std::all_of(e.counts.begin(), e.counts.end(),
                                 [&](int64_t c) { return c == e.counts.front(); });
    out.counts = one_count ? std::vector<int64_t>{e.counts.front()} : e.counts;
    out.update_importance();
    m.entries.emplace(e.name, std::move(out));
  }
  return m;
}

}  // namespace vela
