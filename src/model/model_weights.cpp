#include "model/model_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <new>
#include <string>
#include <thread>

#include "model/expert_loading.h"
#include "quant/dequantize.h"
#include "util/huge_pages.h"

namespace vela {

// Assigns the value of a Result expression to dst, or returns its error from the caller.
#define VELA_TRY_ASSIGN(dst, expr) \
  do {                             \
    auto r_ = (expr);              \
    if (!r_) return r_.error();    \
    dst = std::move(*r_);          \
  } while (0)

namespace {

std::string shape_string(const GgufTensorInfo& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

// A matrix [n_rows, n_cols], or (n_stack > 0) a stack of n_stack of them (GGUF ne = {n_cols,
// n_rows, n_stack}) viewed as one [n_stack * n_rows, n_cols] matrix.
Result<WeightMatrix> get_matrix(const GgufFile& g, const std::string& name, int64_t n_rows,
                                int64_t n_cols, int64_t n_stack = 0) {
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t) return make_error("missing tensor '" + name + "'");
  if (!is_supported_weight_type(t->type))
    return make_error("tensor '" + name + "' has type " + ggml_type_name(t->type) +
                      ", not a weight type");
  const bool ok = n_stack > 0 ? t->n_dims == 3 && t->ne[0] == n_cols && t->ne[1] == n_rows &&
                                    t->ne[2] == n_stack
                              : t->n_dims <= 2 && t->ne[0] == n_cols && t->ne[1] == n_rows;
  if (!ok)
    return make_error("tensor '" + name + "' has shape " + shape_string(*t) + ", expected [" +
                      std::to_string(n_cols) + ", " + std::to_string(n_rows) +
                      (n_stack > 0 ? ", " + std::to_string(n_stack) : std::string()) + "]");
  const GgmlTypeInfo info = *ggml_type_info(t->type);
  return WeightMatrix{t->ggml_type(), t->data, n_rows * std::max<int64_t>(n_stack, 1), n_cols,
                      row_bytes(info, n_cols)};
}

// A 1-D tensor converted to f32; absent and optional gives an empty vector.
Result<std::vector<float>> get_vector(const GgufFile& g, const std::string& name, int64_t n,
                                      bool required) {
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t) {
    if (required) return make_error("missing tensor '" + name + "'");
    return std::vector<float>{};
  }
  if (!is_supported_weight_type(t->type))
    return make_error("tensor '" + name + "' has type " + ggml_type_name(t->type) +
                      ", not a weight type");
  // Trailing dimensions of 1 (a [n, 1] row some converters write) are the same vector.
  bool trailing_ones = true;
  for (uint32_t i = 1; i < t->n_dims; ++i) trailing_ones &= t->ne[i] == 1;
  if (t->n_dims < 1 || !trailing_ones || t->ne[0] != n)
    return make_error("tensor '" + name + "' has shape " + shape_string(*t) + ", expected [" +
                      std::to_string(n) + "]");
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t->ggml_type(), t->data, out.data(), n);
  return out;
}

// A small 2-D tensor [n_rows, n_cols] converted to f32, row-major.
Result<std::vector<float>> get_f32_rows(const GgufFile& g, const std::string& name, int64_t n_rows,
                                        int64_t n_cols) {
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t) return make_error("missing tensor '" + name + "'");
  if (t->n_dims != 2 || t->ne[0] != n_cols || t->ne[1] != n_rows)
    return make_error("tensor '" + name + "' has shape " + shape_string(*t) + ", expected [" +
                      std::to_string(n_cols) + ", " + std::to_string(n_rows) + "]");
  const GgmlType type = t->ggml_type();
  if (type != GgmlType::F32 && type != GgmlType::F16 && type != GgmlType::BF16)
    return make_error("tensor '" + name + "' must be F32, F16 or BF16");
  std::vector<float> out(static_cast<size_t>(n_rows * n_cols));
  dequantize_row(type, t->data, out.data(), n_rows * n_cols);
  return out;
}

// Drops the mapping's resident pages wholly inside [data, data + bytes): the repacked copy serves
// every read, and the file pages would otherwise count a second time.
void release_mapped_pages(const void* data, int64_t bytes) {
  const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (uintptr_t(data) + page - 1) / page * page;
  const uintptr_t end = (uintptr_t(data) + uintptr_t(bytes)) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Repacks every matrix of `matrices` the kernels prefer interleaved into one owned buffer,
// spreading the matrices over the machine's threads.
// release_pages: only for a file mapping (an in-memory image would be zeroed, not re-read).
// An allocation the system refuses is an error naming the size, not an exception.
Status repack_matrices(ModelWeights& w, const std::vector<WeightMatrix*>& matrices,
                       bool release_pages) {
  const auto in_column_slice = [&](const void* p) {
    for (const auto& slice : w.column_slices)
      if (slice.get() == p) return true;
    return false;
  };
  std::vector<WeightMatrix*> chosen;
  int64_t total = 0;
  for (WeightMatrix* m : matrices) {
    if (!prefers_interleaved16(m->type, m->n_rows, m->n_cols)) continue;
    chosen.push_back(m);
    total += m->n_rows / 16 * interleaved16_group_bytes(m->type, m->n_cols);
  }
  if (chosen.empty()) return {};
  HugePageBuffer buffer = allocate_huge_pages(size_t(total));  // the stream that decode reads
  if (!buffer)
    return make_error("out of memory allocating " + std::to_string(total) +
                      " bytes for the repacked weights (--moe-experts mapped keeps a mixture's "
                      "experts in the file mapping; VELA_REPACK=0 repacks nothing)");
  w.repacked = std::move(buffer);
  w.repacked_bytes = total;
  std::vector<uint8_t*> dst(chosen.size());
  int64_t offset = 0;
  for (size_t i = 0; i < chosen.size(); ++i) {
    dst[i] = w.repacked.get() + offset;
    offset +=
        chosen[i]->n_rows / 16 * interleaved16_group_bytes(chosen[i]->type, chosen[i]->n_cols);
  }
  const auto pack = [&](size_t i) {
    const WeightMatrix& m = *chosen[i];
    pack_interleaved16(m.type, m.data, m.n_cols, 0, m.n_rows, dst[i]);
    if (release_pages && !in_column_slice(m.data))
      release_mapped_pages(m.data, m.n_rows * m.row_bytes);
  };
  const size_t n_threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1,
                                              std::min<size_t>(chosen.size(), 16));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n_threads; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = t; i < chosen.size(); i += n_threads) pack(i);
    });
  for (size_t i = 0; i < chosen.size(); i += n_threads) pack(i);
  for (std::thread& th : threads) th.join();
  for (size_t i = 0; i < chosen.size(); ++i) {
    std::erase_if(w.column_slices,
                  [&](const auto& slice) { return slice.get() == chosen[i]->data; });
    chosen[i]->data = dst[i];
    chosen[i]->layout = WeightLayout::kInterleaved16;
  }
  return {};
}

// The column runs of row-major m (whole blocks), concatenated, copied into a buffer of
// w.column_slices. release_pages: m is in a file mapping, whose pages the copy replaces (every
// page of m is read: a row's slice is shorter than a page).
WeightMatrix copy_columns(ModelWeights& w, const WeightMatrix& m, std::span<const IndexRun> runs,
                          bool release_pages) {
  const GgmlTypeInfo info = *ggml_type_info(uint32_t(m.type));
  WeightMatrix v = m;
  v.n_cols = 0;
  for (const IndexRun& run : runs) {
    assert(run.begin % info.block_size == 0 && run.count % info.block_size == 0);
    v.n_cols += run.count;
  }
  v.row_bytes = row_bytes(info, v.n_cols);
  auto slice = std::shared_ptr<uint8_t[]>(new uint8_t[size_t(m.n_rows * v.row_bytes)]);
  for (int64_t r = 0; r < m.n_rows; ++r) {
    uint8_t* out = slice.get() + r * v.row_bytes;
    for (const IndexRun& run : runs) {
      const size_t bytes = size_t(run.count / info.block_size * info.type_size);
      std::memcpy(out,
                  static_cast<const uint8_t*>(m.data) + r * m.row_bytes +
                      run.begin / info.block_size * info.type_size,
                  bytes);
      out += bytes;
    }
  }
  v.data = slice.get();
  w.column_slices.push_back(std::move(slice));
  if (release_pages) release_mapped_pages(m.data, m.n_rows * m.row_bytes);
  return v;
}

WeightMatrix copy_columns(ModelWeights& w, const WeightMatrix& m, int64_t col_begin, int64_t n_cols,
                          bool release_pages) {
  const IndexRun run{col_begin, n_cols};
  return copy_columns(w, m, {&run, 1}, release_pages);
}

// The row runs of row-major m, concatenated, copied into a buffer of w.column_slices (the pages
// of the other rows stay in the mapping, never read).
WeightMatrix copy_rows(ModelWeights& w, const WeightMatrix& m, std::span<const IndexRun> runs) {
  WeightMatrix v = m;
  v.n_rows = 0;
  for (const IndexRun& run : runs) v.n_rows += run.count;
  auto slice = std::shared_ptr<uint8_t[]>(new uint8_t[size_t(v.n_rows * m.row_bytes)]);
  uint8_t* out = slice.get();
  for (const IndexRun& run : runs) {
    std::memcpy(out, static_cast<const uint8_t*>(m.data) + run.begin * m.row_bytes,
                size_t(run.count * m.row_bytes));
    out += run.count * m.row_bytes;
  }
  v.data = slice.get();
  w.column_slices.push_back(std::move(slice));
  return v;
}

// m: [n_head * rows, cols] row-major, each head's [rows, cols] matrix stacked; returns [n_head *
// cols, rows], each head's matrix transposed, in a buffer of w.column_slices. F16 and BF16 keep
// their type; other types become F32 (their values exactly).
WeightMatrix transpose_heads(ModelWeights& w, const WeightMatrix& m, int64_t n_head, int64_t rows) {
  assert(m.layout == WeightLayout::kRowMajor && m.n_rows == n_head * rows);
  const int64_t cols = m.n_cols;
  const bool half = m.type == GgmlType::F16 || m.type == GgmlType::BF16;
  WeightMatrix t;
  t.type = half ? m.type : GgmlType::F32;
  t.n_rows = n_head * cols;
  t.n_cols = rows;
  t.row_bytes = row_bytes(*ggml_type_info(uint32_t(t.type)), rows);
  auto buffer = std::shared_ptr<uint8_t[]>(new uint8_t[size_t(t.n_rows * t.row_bytes)]);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t r = 0; r < rows; ++r) {
      const auto* src = static_cast<const uint8_t*>(m.data) + (h * rows + r) * m.row_bytes;
      if (half) {
        auto* dst = reinterpret_cast<uint16_t*>(buffer.get()) + h * cols * rows + r;
        for (int64_t c = 0; c < cols; ++c)
          std::memcpy(dst + c * rows, src + c * sizeof(uint16_t), sizeof(uint16_t));
      } else {
        dequantize_row(m.type, src, row.data(), cols);
        auto* dst = reinterpret_cast<float*>(buffer.get()) + h * cols * rows + r;
        for (int64_t c = 0; c < cols; ++c) dst[c * rows] = row[size_t(c)];
      }
    }
  t.data = buffer.get();
  w.column_slices.push_back(std::move(buffer));
  return t;
}

// The runs of `runs` (in units of `unit` elements or rows) in element or row units.
std::vector<IndexRun> scaled_runs(std::span<const IndexRun> runs, int64_t unit,
                                  int64_t offset = 0) {
  std::vector<IndexRun> out;
  for (const IndexRun& run : runs) out.push_back({offset + run.begin * unit, run.count * unit});
  return out;
}

// The elements of v in the runs, concatenated.
std::vector<float> gather_runs(const std::vector<float>& v, std::span<const IndexRun> runs) {
  std::vector<float> out;
  for (const IndexRun& run : runs)
    out.insert(out.end(), v.begin() + run.begin, v.begin() + run.begin + run.count);
  return out;
}

// qwen3next's fused DeltaNet projections (ArchDescription::fused_delta_projections) as the
// mixer's matrices, their rows copied out and the fused tensors' pages released: ssm_in holds per
// key head q (dk rows), k (dk), the v rows of its r value heads (r dv), then their z rows (r dv);
// ssm_ba (or ssm_beta_alpha) per key head its value heads' beta rows (r), then alpha rows (r).
Status split_fused_delta_projections(const GgufFile& g, const std::string& p, const ModelConfig& c,
                                     ModelWeights& w, DeltaNetWeights& dn) {
  const DeltaNetConfig& d = c.delta_net;
  const int64_t r = d.n_v_heads / d.n_k_heads, dk = d.head_k_dim, dv = d.head_v_dim;
  const int64_t per_key = 2 * dk + 2 * r * dv;
  WeightMatrix in, ba;
  VELA_TRY_ASSIGN(in, get_matrix(g, p + "ssm_in.weight", d.n_k_heads * per_key, c.n_embd));
  const std::string ba_name =
      g.find_tensor(p + "ssm_ba.weight") != nullptr ? "ssm_ba.weight" : "ssm_beta_alpha.weight";
  if (g.find_tensor(p + ba_name) == nullptr)
    return make_error("missing tensor '" + p + "ssm_ba.weight' (or '" + p +
                      "ssm_beta_alpha.weight')");
  VELA_TRY_ASSIGN(ba, get_matrix(g, p + ba_name, d.n_k_heads * 2 * r, c.n_embd));
  std::vector<IndexRun> q, k, v, z, beta, alpha;
  for (int64_t h = 0; h < d.n_k_heads; ++h) {
    q.push_back({h * per_key, dk});
    k.push_back({h * per_key + dk, dk});
    v.push_back({h * per_key + 2 * dk, r * dv});
    z.push_back({h * per_key + 2 * dk + r * dv, r * dv});
    beta.push_back({h * 2 * r, r});
    alpha.push_back({h * 2 * r + r, r});
  }
  std::vector<IndexRun> qkv = q;
  qkv.insert(qkv.end(), k.begin(), k.end());
  qkv.insert(qkv.end(), v.begin(), v.end());
  dn.qkv = copy_rows(w, in, qkv);
  dn.gate = copy_rows(w, in, z);
  dn.beta = copy_rows(w, ba, beta);
  dn.alpha = copy_rows(w, ba, alpha);
  if (g.memory_mapped()) {
    release_mapped_pages(in.data, in.n_rows * in.row_bytes);
    release_mapped_pages(ba.data, ba.n_rows * ba.row_bytes);
  }
  return {};
}

// A Gated DeltaNet mixer's slice of rank r: the rows, channels and columns of its key heads and
// of the value heads reading them, in the local order (delta_value_head_runs).
void shard_delta_net(ModelWeights& w, DeltaNetWeights& dn, const DeltaNetConfig& d,
                     const ShardRanges& r, bool release_pages) {
  const std::vector<IndexRun> heads = delta_value_head_runs(d, r);
  const IndexRun key_heads{r.delta_k_head_begin, r.n_delta_k_heads};
  const int64_t dk = d.head_k_dim, dv = d.head_v_dim;
  // The convolution's channels: the key heads' q, then their k, then the value heads' v.
  std::vector<IndexRun> channels = scaled_runs({&key_heads, 1}, dk);
  for (const IndexRun& run : scaled_runs({&key_heads, 1}, dk, d.key_dim())) channels.push_back(run);
  for (const IndexRun& run : scaled_runs(heads, dv, 2 * d.key_dim())) channels.push_back(run);
  // A matrix already copied out of the mapping (qwen3next's split projections) gives its buffer
  // up for the slice.
  const auto slice_rows = [&](WeightMatrix& m, std::span<const IndexRun> runs) {
    const void* whole = m.data;
    m = copy_rows(w, m, runs);
    std::erase_if(w.column_slices, [&](const auto& slice) { return slice.get() == whole; });
  };
  slice_rows(dn.qkv, channels);
  slice_rows(dn.gate, scaled_runs(heads, dv));
  slice_rows(dn.beta, heads);
  slice_rows(dn.alpha, heads);
  if (!r.replicated_delta_out)
    dn.out = copy_columns(w, dn.out, scaled_runs(heads, dv), release_pages);
  // Tap-major [conv_kernel, channels]: each tap's row, sliced.
  const int64_t all_channels = d.conv_channels();
  std::vector<IndexRun> taps;
  for (int32_t j = 0; j < d.conv_kernel; ++j)
    for (const IndexRun& run : channels) taps.push_back({j * all_channels + run.begin, run.count});
  dn.conv = gather_runs(dn.conv, taps);
  dn.dt_bias = gather_runs(dn.dt_bias, heads);
  dn.a = gather_runs(dn.a, heads);
}

std::vector<float> slice_vector(const std::vector<float>& v, int64_t begin, int64_t n) {
  if (v.empty()) return v;
  return {v.begin() + begin, v.begin() + begin + n};
}

int64_t block_columns(GgmlType type) {
  return ggml_type_info(uint32_t(type))->block_size;
}

// An EAGLE-3 head's tensors outside its layer's usual ones: token_embd and the output head, its
// own or else the target's (from `target`'s weights, or whole from `target_file`), output_norm,
// fc, d2t and the hidden norm. head_from_target: the output head is the target's matrix (owned
// and repacked by the target).
Status load_eagle3_tensors(const GgufFile& g, const ModelConfig& c, const ModelWeights* target,
                           const GgufFile* target_file, ModelWeights& w, bool& head_from_target) {
  const Eagle3Config& e = *c.eagle3;
  const int64_t E = c.n_embd, V = c.n_vocab;
  // A matrix of the target's, which must have the head's shape.
  const auto shared = [&](const WeightMatrix& m, const char* what) -> Result<WeightMatrix> {
    if (m.n_rows != V || m.n_cols != E)
      return make_error("the EAGLE-3 head has no " + std::string(what) + " and the target's is [" +
                        std::to_string(m.n_rows) + ", " + std::to_string(m.n_cols) + "], not [" +
                        std::to_string(V) + ", " + std::to_string(E) +
                        "] (the target's vocabulary by the head's n_embd)");
    return m;
  };
  const auto from_target_file = [&](const std::string& name) -> Result<WeightMatrix> {
    if (target_file == nullptr)
      return make_error("the EAGLE-3 head has no '" + name + "' and no target gives it");
    auto m = get_matrix(*target_file, name, V, E);
    if (!m) return make_error("the target's " + m.message());
    return m;
  };
  if (g.find_tensor("token_embd.weight") != nullptr)
    VELA_TRY_ASSIGN(w.token_embd, get_matrix(g, "token_embd.weight", V, E));
  else if (target != nullptr)
    VELA_TRY_ASSIGN(w.token_embd, shared(target->token_embd, "token_embd.weight"));
  else
    VELA_TRY_ASSIGN(w.token_embd, from_target_file("token_embd.weight"));
  VELA_TRY_ASSIGN(w.output_norm, get_vector(g, "output_norm.weight", E, true));

  bool identity = true;  // d2t maps draft token i to target token i (or there is none)
  if (const GgufTensorInfo* t = g.find_tensor("d2t")) {
    if (t->ggml_type() != GgmlType::I64)
      return make_error("tensor 'd2t' has type " + ggml_type_name(t->type) +
                        ", expected I64 (target token ids)");
    if (t->n_dims != 1 || t->ne[0] != e.n_draft_vocab)
      return make_error("tensor 'd2t' has shape " + shape_string(*t) + ", expected [" +
                        std::to_string(e.n_draft_vocab) + "]");
    w.eagle3.d2t.resize(size_t(e.n_draft_vocab));
    for (int64_t i = 0; i < e.n_draft_vocab; ++i) {
      int64_t id = 0;
      std::memcpy(&id, t->data + i * int64_t(sizeof(id)), sizeof(id));
      if (id < 0 || id >= V)
        return make_error("tensor 'd2t' entry " + std::to_string(i) + " = " + std::to_string(id) +
                          " is not a target token id [0, " + std::to_string(V) + ")");
      w.eagle3.d2t[size_t(i)] = int32_t(id);
      identity &= id == i;
    }
    identity &= e.n_draft_vocab == V;
  }
  if (g.find_tensor("output.weight") != nullptr) {
    VELA_TRY_ASSIGN(w.output, get_matrix(g, "output.weight", e.n_draft_vocab, E));
  } else if (!identity) {
    return make_error("the EAGLE-3 head has no output.weight, but its draft vocabulary (d2t: " +
                      std::to_string(e.n_draft_vocab) + " tokens) is not the target's (" +
                      std::to_string(V) + " tokens)");
  } else if (target != nullptr) {
    VELA_TRY_ASSIGN(w.output, shared(target->output, "output.weight"));
    w.tied_embeddings = target->tied_embeddings;
    head_from_target = true;
  } else if (target_file != nullptr && target_file->find_tensor("output.weight") == nullptr) {
    VELA_TRY_ASSIGN(w.output, from_target_file("token_embd.weight"));  // the target's tied head
    w.tied_embeddings = true;
  } else {
    VELA_TRY_ASSIGN(w.output, from_target_file("output.weight"));
  }
  // The identity needs no scattering: the head's rows are the target's ids.
  if (identity) w.eagle3.d2t.clear();

  VELA_TRY_ASSIGN(w.eagle3.fc, get_matrix(g, "fc.weight", E, 3 * int64_t(e.target_n_embd)));
  // Converters name the hidden state's norm either way.
  std::string hidden_norm = "blk.0.hidden_norm.weight";
  if (g.find_tensor(hidden_norm) == nullptr) hidden_norm = "blk.0.attn_norm_2.weight";
  if (g.find_tensor(hidden_norm) == nullptr)
    return make_error("missing tensor 'blk.0.hidden_norm.weight' (or 'blk.0.attn_norm_2.weight')");
  VELA_TRY_ASSIGN(w.eagle3.hidden_norm, get_vector(g, hidden_norm, E, true));
  return {};
}

}  // namespace

WeightMatrix weight_rows(const WeightMatrix& m, int64_t row_begin, int64_t n_rows) {
  WeightMatrix v = m;
  v.n_rows = n_rows;
  const auto* base = static_cast<const uint8_t*>(m.data);
  if (m.layout == WeightLayout::kInterleaved16) {
    assert(row_begin % 16 == 0 && n_rows % 16 == 0);
    v.data = base + row_begin / 16 * interleaved16_group_bytes(m.type, m.n_cols);
  } else {
    v.data = base + row_begin * m.row_bytes;
  }
  return v;
}

void embedding_row(const WeightMatrix& m, int64_t row, uint8_t* scratch, float* out) {
  const uint8_t* src = static_cast<const uint8_t*>(m.data) + row * m.row_bytes;
  if (m.layout == WeightLayout::kInterleaved16) {
    unpack_interleaved16_row(m.type, m.data, m.n_cols, row, scratch);
    src = scratch;
  }
  dequantize_row(m.type, src, out, m.n_cols);
}

Result<ModelWeights> ModelWeights::load(const GgufFile& g, const ModelConfig& c, bool repack,
                                        bool repack_experts, const TensorShard& shard,
                                        const ModelWeights* target, const GgufFile* target_file) {
  ModelWeights w;
  const ArchDescription& arch = *c.arch;
  const int64_t q_dim = int64_t(c.n_head) * c.head_dim;
  const int64_t kv_dim = int64_t(c.n_head_kv) * c.head_dim;
  // Columns of Q/K/V: an EAGLE-3 head attends over [embedding | hidden], 2 * n_embd.
  const int64_t attn_in = c.eagle3 ? 2 * int64_t(c.n_embd) : c.n_embd;

  // The output head is the target's (repacked or not by the target's load, and owned by it).
  bool head_from_target = false;
  if (c.mtp_block) {
    const std::string n = "blk." + std::to_string(c.first_file_layer) + ".nextn.";
    if (g.find_tensor(n + "embed_tokens.weight") != nullptr)
      VELA_TRY_ASSIGN(w.token_embd, get_matrix(g, n + "embed_tokens.weight", c.n_vocab, c.n_embd));
    else if (target != nullptr)
      w.token_embd = target->token_embd;
    else
      VELA_TRY_ASSIGN(w.token_embd, get_matrix(g, "token_embd.weight", c.n_vocab, c.n_embd));
    VELA_TRY_ASSIGN(w.output_norm, get_vector(g, n + "shared_head_norm.weight", c.n_embd, true));
    if (g.find_tensor(n + "shared_head_head.weight") != nullptr) {
      VELA_TRY_ASSIGN(w.output, get_matrix(g, n + "shared_head_head.weight", c.n_vocab, c.n_embd));
    } else if (target != nullptr) {
      w.output = target->output;
      w.tied_embeddings = target->tied_embeddings;
      head_from_target = true;
    } else if (g.find_tensor("output.weight") != nullptr) {
      VELA_TRY_ASSIGN(w.output, get_matrix(g, "output.weight", c.n_vocab, c.n_embd));
    } else {  // the model's tied head: its token_embd
      VELA_TRY_ASSIGN(w.output, get_matrix(g, "token_embd.weight", c.n_vocab, c.n_embd));
      w.tied_embeddings = true;
    }
    VELA_TRY_ASSIGN(w.mtp.eh_proj, get_matrix(g, n + "eh_proj.weight", c.n_embd, 2 * c.n_embd));
    VELA_TRY_ASSIGN(w.mtp.enorm, get_vector(g, n + "enorm.weight", c.n_embd, true));
    VELA_TRY_ASSIGN(w.mtp.hnorm, get_vector(g, n + "hnorm.weight", c.n_embd, true));
  } else if (c.eagle3) {
    if (Status st = load_eagle3_tensors(g, c, target, target_file, w, head_from_target); !st)
      return st.error();
  } else {
    VELA_TRY_ASSIGN(w.token_embd, get_matrix(g, "token_embd.weight", c.n_vocab, c.n_embd));
    VELA_TRY_ASSIGN(w.output_norm, get_vector(g, "output_norm.weight", c.n_embd, true));
    if (g.find_tensor("output.weight")) {
      VELA_TRY_ASSIGN(w.output, get_matrix(g, "output.weight", c.n_vocab, c.n_embd));
    } else {
      w.output = w.token_embd;
      w.tied_embeddings = true;
    }
  }
  VELA_TRY_ASSIGN(w.rope_freq_factors, get_vector(g, "rope_freqs.weight", c.n_rot / 2, false));
  if (c.eagle3 && w.rope_freq_factors.empty())  // converters may store it with the layer's
    VELA_TRY_ASSIGN(w.rope_freq_factors,
                    get_vector(g, "blk.0.rope_freqs.weight", c.n_rot / 2, false));
  if (c.n_embd_per_layer > 0) {
    const int64_t all = int64_t(c.n_layer) * c.n_embd_per_layer;
    VELA_TRY_ASSIGN(w.per_layer_token_embd,
                    get_matrix(g, "per_layer_token_embd.weight", c.n_vocab, all));
    VELA_TRY_ASSIGN(w.per_layer_model_proj,
                    get_matrix(g, "per_layer_model_proj.weight", all, c.n_embd));
    VELA_TRY_ASSIGN(w.per_layer_proj_norm,
                    get_vector(g, "per_layer_proj_norm.weight", c.n_embd_per_layer, true));
  }
  if (arch.longrope) {
    VELA_TRY_ASSIGN(w.rope_factors_short,
                    get_vector(g, "rope_factors_short.weight", c.n_rot / 2, false));
    VELA_TRY_ASSIGN(w.rope_factors_long,
                    get_vector(g, "rope_factors_long.weight", c.n_rot / 2, false));
  }
  if (c.rope.scaling == RopeScaling::kLongRope &&
      (w.rope_factors_short.empty() || w.rope_factors_long.empty()))
    return make_error(
        "rope.scaling.type is longrope but rope_factors_short/long.weight are missing");

  // A pipeline stage holds its own layers only (w.layers[j] is the model's layer
  // stage->begin + j); the other stages' pages of the mapping are never read.
  auto stage = stage_layers(c.n_layer, shard.stage, shard.n_stages);
  if (!stage) return stage.error();
  const int32_t n_local = stage->count;
  // Fused matrices, kept whole until repacking, then split into row views.
  std::vector<WeightMatrix> fused_qkv(static_cast<size_t>(n_local)),
      fused_gate_up(static_cast<size_t>(n_local));
  // Stacked experts: [n_expert * rows, cols] each, split into per-expert views after repacking.
  struct ExpertStacks {
    WeightMatrix gate, up, down;
    WeightMatrix gate_up;  // ffn_gate_up_exps: each expert's gate rows, then its up rows
  };
  std::vector<ExpertStacks> stacks(static_cast<size_t>(n_local));
  // Or, for files with one tensor per expert (ffn_gate.E.weight): [n_local][n_expert] views.
  std::vector<std::vector<ExpertWeights>> per_expert(static_cast<size_t>(n_local));
  const int64_t q_norm_len = arch.qk_norm == QkNorm::kWhole ? q_dim : c.head_dim;
  const int64_t k_norm_len = arch.qk_norm == QkNorm::kWhole ? kv_dim : c.head_dim;
  w.layers.resize(size_t(n_local));
  for (int32_t i = 0; i < n_local; ++i) {
    LayerWeights& l = w.layers[size_t(i)];
    const std::string p = "blk." + std::to_string(c.first_file_layer + stage->begin + i) + ".";
    // This layer's own head geometry (per-layer in gemma4 files; else the model's).
    const LayerConfig& lc = c.layers[size_t(stage->begin + i)];
    const int64_t lq_dim = int64_t(c.n_head) * lc.head_dim;
    const int64_t lkv_dim = int64_t(lc.n_head_kv) * lc.head_dim;
    VELA_TRY_ASSIGN(l.attn_norm, get_vector(g, p + "attn_norm.weight", c.n_embd, true));
    if (c.layers[size_t(stage->begin + i)].mixer == MixerKind::kGatedDeltaNet) {
      const DeltaNetConfig& d = c.delta_net;
      DeltaNetWeights& dn = l.delta_net;
      const int64_t channels = d.conv_channels();
      if (arch.fused_delta_projections) {
        if (Status st = split_fused_delta_projections(g, p, c, w, dn); !st) return st.error();
      } else {
        VELA_TRY_ASSIGN(dn.qkv, get_matrix(g, p + "attn_qkv.weight", channels, c.n_embd));
        VELA_TRY_ASSIGN(dn.gate, get_matrix(g, p + "attn_gate.weight", d.value_dim(), c.n_embd));
        VELA_TRY_ASSIGN(dn.beta, get_matrix(g, p + "ssm_beta.weight", d.n_v_heads, c.n_embd));
        VELA_TRY_ASSIGN(dn.alpha, get_matrix(g, p + "ssm_alpha.weight", d.n_v_heads, c.n_embd));
      }
      VELA_TRY_ASSIGN(dn.out, get_matrix(g, p + "ssm_out.weight", c.n_embd, d.value_dim()));
      std::vector<float> taps;  // [channels, conv_kernel] as the file has them
      VELA_TRY_ASSIGN(taps, get_f32_rows(g, p + "ssm_conv1d.weight", channels, d.conv_kernel));
      // Tap-major, so that the convolution runs over contiguous channels.
      dn.conv.resize(taps.size());
      for (int64_t ch = 0; ch < channels; ++ch)
        for (int32_t j = 0; j < d.conv_kernel; ++j)
          dn.conv[size_t(j * channels + ch)] = taps[size_t(ch * d.conv_kernel + j)];
      // Converters name the time-step bias ssm_dt.bias, some ssm_dt.
      const std::string dt_name =
          g.find_tensor(p + "ssm_dt.bias") != nullptr || g.find_tensor(p + "ssm_dt") == nullptr
              ? "ssm_dt.bias"
              : "ssm_dt";
      VELA_TRY_ASSIGN(dn.dt_bias, get_vector(g, p + dt_name, d.n_v_heads, true));
      VELA_TRY_ASSIGN(dn.a, get_vector(g, p + "ssm_a", d.n_v_heads, true));
      VELA_TRY_ASSIGN(dn.norm, get_vector(g, p + "ssm_norm.weight", d.head_v_dim, true));
    } else if (c.layers[size_t(stage->begin + i)].mixer == MixerKind::kLatentAttention) {
      const LatentAttentionConfig& m = c.mla;
      LatentAttentionWeights& mw = l.mla;
      const int64_t q_rows = int64_t(c.n_head) * m.key_dim();
      if (m.q_lora_rank > 0) {
        VELA_TRY_ASSIGN(mw.q_a, get_matrix(g, p + "attn_q_a.weight", m.q_lora_rank, c.n_embd));
        VELA_TRY_ASSIGN(mw.q_a_norm,
                        get_vector(g, p + "attn_q_a_norm.weight", m.q_lora_rank, true));
        VELA_TRY_ASSIGN(mw.q_b, get_matrix(g, p + "attn_q_b.weight", q_rows, m.q_lora_rank));
      } else {
        VELA_TRY_ASSIGN(mw.q, get_matrix(g, p + "attn_q.weight", q_rows, c.n_embd));
      }
      VELA_TRY_ASSIGN(mw.kv_a, get_matrix(g, p + "attn_kv_a_mqa.weight", m.cache_dim(), c.n_embd));
      VELA_TRY_ASSIGN(mw.kv_a_norm,
                      get_vector(g, p + "attn_kv_a_norm.weight", m.kv_lora_rank, true));
      if (g.find_tensor(p + "attn_k_b.weight") == nullptr &&
          g.find_tensor(p + "attn_kv_b.weight") != nullptr) {
        // The older layout: per head, its nope-key rows (k_b_t's) then its value rows (v_b's);
        // k_b is the key rows transposed.
        WeightMatrix kv_b;
        VELA_TRY_ASSIGN(
            kv_b, get_matrix(g, p + "attn_kv_b.weight",
                             int64_t(c.n_head) * (m.nope_dim + m.v_head_dim), m.kv_lora_rank));
        std::vector<IndexRun> key_rows, value_rows;
        for (int64_t h = 0; h < c.n_head; ++h) {
          const int64_t first = h * (m.nope_dim + m.v_head_dim);
          key_rows.push_back({first, m.nope_dim});
          value_rows.push_back({first + m.nope_dim, m.v_head_dim});
        }
        mw.k_b_t = copy_rows(w, kv_b, key_rows);
        mw.v_b = copy_rows(w, kv_b, value_rows);
        mw.k_b = transpose_heads(w, mw.k_b_t, c.n_head, m.nope_dim);
      } else {
        VELA_TRY_ASSIGN(mw.k_b,
                        get_matrix(g, p + "attn_k_b.weight", m.kv_lora_rank, m.nope_dim, c.n_head));
        VELA_TRY_ASSIGN(
            mw.v_b, get_matrix(g, p + "attn_v_b.weight", m.v_head_dim, m.kv_lora_rank, c.n_head));
      }
      VELA_TRY_ASSIGN(l.wo, get_matrix(g, p + "attn_output.weight", c.n_embd,
                                       int64_t(c.n_head) * m.v_head_dim));
    } else if (arch.fused_qkv) {
      VELA_TRY_ASSIGN(fused_qkv[size_t(i)],
                      get_matrix(g, p + "attn_qkv.weight", q_dim + 2 * kv_dim, c.n_embd));
    } else {
      const int64_t q_rows = arch.attention_output_gate ? 2 * lq_dim : lq_dim;
      VELA_TRY_ASSIGN(l.wq, get_matrix(g, p + "attn_q.weight", q_rows, attn_in));
      if (lc.kv_index >= 0) {  // a layer reading another layer's cache projects no K/V
        VELA_TRY_ASSIGN(l.wk, get_matrix(g, p + "attn_k.weight", lkv_dim, attn_in));
        // With a V norm, a layer without attn_v takes K as V.
        if (!arch.value_norm || g.find_tensor(p + "attn_v.weight") != nullptr)
          VELA_TRY_ASSIGN(l.wv, get_matrix(g, p + "attn_v.weight", lkv_dim, attn_in));
      }
    }
    const bool attends = c.layers[size_t(stage->begin + i)].mixer == MixerKind::kAttention;
    if (attends) VELA_TRY_ASSIGN(l.wo, get_matrix(g, p + "attn_output.weight", c.n_embd, lq_dim));
    if (attends && arch.output_bias != TensorRule::kAbsent)
      VELA_TRY_ASSIGN(l.bo, get_vector(g, p + "attn_output.bias", c.n_embd,
                                       arch.output_bias == TensorRule::kRequired));
    if (attends && arch.attention_sinks)
      VELA_TRY_ASSIGN(l.attn_sinks, get_vector(g, p + "attn_sinks.weight", c.n_head, true));
    if (attends && arch.qkv_bias != TensorRule::kAbsent) {
      const bool required = arch.qkv_bias == TensorRule::kRequired;
      VELA_TRY_ASSIGN(l.bq, get_vector(g, p + "attn_q.bias", q_dim, required));
      VELA_TRY_ASSIGN(l.bk, get_vector(g, p + "attn_k.bias", kv_dim, required));
      VELA_TRY_ASSIGN(l.bv, get_vector(g, p + "attn_v.bias", kv_dim, required));
    }
    if (attends && arch.qk_norm != QkNorm::kNone) {
      const bool required = arch.qk_norm_rule == TensorRule::kRequired;
      const int64_t q_len = arch.qk_norm == QkNorm::kWhole ? q_norm_len : lc.head_dim;
      const int64_t k_len = arch.qk_norm == QkNorm::kWhole ? k_norm_len : lc.head_dim;
      VELA_TRY_ASSIGN(l.q_norm, get_vector(g, p + "attn_q_norm.weight", q_len, required));
      if (lc.kv_index >= 0)  // a layer reading another layer's cache has no K to normalise
        VELA_TRY_ASSIGN(l.k_norm, get_vector(g, p + "attn_k_norm.weight", k_len, required));
      if (lc.kv_index >= 0 && l.q_norm.empty() != l.k_norm.empty())
        return make_error("layer " + std::to_string(c.first_file_layer + stage->begin + i) +
                          " has only one of attn_q_norm and attn_k_norm");
    }
    if (arch.post_norms) {
      VELA_TRY_ASSIGN(l.post_attn_norm,
                      get_vector(g, p + "post_attention_norm.weight", c.n_embd, true));
      VELA_TRY_ASSIGN(l.post_ffn_norm, get_vector(g, p + "post_ffw_norm.weight", c.n_embd, true));
    }
    VELA_TRY_ASSIGN(l.ffn_norm,
                    get_vector(g, p + std::string(arch.ffn_norm_name) + ".weight", c.n_embd, true));
    if (c.layers[size_t(stage->begin + i)].moe) {
      const int64_t ne = c.n_expert, ff = c.n_ff_expert;
      ExpertStacks& st = stacks[size_t(i)];
      VELA_TRY_ASSIGN(l.router, get_matrix(g, p + "ffn_gate_inp.weight", ne, c.n_embd));
      VELA_TRY_ASSIGN(l.expert_bias, get_vector(g, p + "exp_probs_b.bias", ne, false));
      if (arch.expert_biases) {
        VELA_TRY_ASSIGN(l.router_bias, get_vector(g, p + "ffn_gate_inp.bias", ne, true));
        VELA_TRY_ASSIGN(l.expert_gate_bias, get_f32_rows(g, p + "ffn_gate_exps.bias", ne, ff));
        VELA_TRY_ASSIGN(l.expert_up_bias, get_f32_rows(g, p + "ffn_up_exps.bias", ne, ff));
        VELA_TRY_ASSIGN(l.expert_down_bias,
                        get_f32_rows(g, p + "ffn_down_exps.bias", ne, c.n_embd));
      }
      if (has_per_expert_tensors(g, p)) {
        VELA_TRY_ASSIGN(per_expert[size_t(i)], load_per_expert_tensors(g, p, ne, ff, c.n_embd));
      } else if (g.find_tensor(p + "ffn_gate_up_exps.weight") != nullptr) {
        VELA_TRY_ASSIGN(st.gate_up,
                        get_matrix(g, p + "ffn_gate_up_exps.weight", 2 * ff, c.n_embd, ne));
        VELA_TRY_ASSIGN(st.down, get_matrix(g, p + "ffn_down_exps.weight", c.n_embd, ff, ne));
      } else {
        VELA_TRY_ASSIGN(st.gate, get_matrix(g, p + "ffn_gate_exps.weight", ff, c.n_embd, ne));
        VELA_TRY_ASSIGN(st.up, get_matrix(g, p + "ffn_up_exps.weight", ff, c.n_embd, ne));
        VELA_TRY_ASSIGN(st.down, get_matrix(g, p + "ffn_down_exps.weight", c.n_embd, ff, ne));
      }
      if (c.n_ff_shared_expert > 0) {
        const int64_t sff = c.n_ff_shared_expert;
        ExpertWeights& sh = l.shared_expert;
        VELA_TRY_ASSIGN(sh.gate, get_matrix(g, p + "ffn_gate_shexp.weight", sff, c.n_embd));
        VELA_TRY_ASSIGN(sh.up, get_matrix(g, p + "ffn_up_shexp.weight", sff, c.n_embd));
        VELA_TRY_ASSIGN(sh.down, get_matrix(g, p + "ffn_down_shexp.weight", c.n_embd, sff));
        if (c.shared_expert_gated)
          VELA_TRY_ASSIGN(l.shared_expert_gate,
                          get_vector(g, p + "ffn_gate_inp_shexp.weight", c.n_embd, true));
      }
    } else if (arch.fused_gate_up) {
      VELA_TRY_ASSIGN(fused_gate_up[size_t(i)],
                      get_matrix(g, p + "ffn_up.weight", 2 * int64_t(c.n_ff), c.n_embd));
      VELA_TRY_ASSIGN(l.w_down, get_matrix(g, p + "ffn_down.weight", c.n_embd, c.n_ff));
    } else {
      VELA_TRY_ASSIGN(l.w_gate, get_matrix(g, p + "ffn_gate.weight", lc.n_ff, c.n_embd));
      VELA_TRY_ASSIGN(l.w_up, get_matrix(g, p + "ffn_up.weight", lc.n_ff, c.n_embd));
      VELA_TRY_ASSIGN(l.w_down, get_matrix(g, p + "ffn_down.weight", c.n_embd, lc.n_ff));
    }
    if (lc.moe && arch.moe_beside_dense) {  // the dense FFN beside the experts, and their norms
      VELA_TRY_ASSIGN(l.w_gate, get_matrix(g, p + "ffn_gate.weight", lc.n_ff, c.n_embd));
      VELA_TRY_ASSIGN(l.w_up, get_matrix(g, p + "ffn_up.weight", lc.n_ff, c.n_embd));
      VELA_TRY_ASSIGN(l.w_down, get_matrix(g, p + "ffn_down.weight", c.n_embd, lc.n_ff));
      VELA_TRY_ASSIGN(l.router_input_scale,
                      get_vector(g, p + "ffn_gate_inp.scale", c.n_embd, true));
      VELA_TRY_ASSIGN(l.expert_down_scale,
                      get_vector(g, p + "ffn_down_exps.scale", c.n_expert, false));
      VELA_TRY_ASSIGN(l.pre_moe_norm, get_vector(g, p + "pre_ffw_norm_2.weight", c.n_embd, true));
      VELA_TRY_ASSIGN(l.post_dense_norm,
                      get_vector(g, p + "post_ffw_norm_1.weight", c.n_embd, true));
      VELA_TRY_ASSIGN(l.post_moe_norm, get_vector(g, p + "post_ffw_norm_2.weight", c.n_embd, true));
    }
    if (arch.layer_output_scale)
      VELA_TRY_ASSIGN(l.output_scale, get_vector(g, p + "layer_output_scale.weight", 1, false));
    if (c.n_embd_per_layer > 0) {
      const int64_t pe = c.n_embd_per_layer;
      VELA_TRY_ASSIGN(l.ple_gate, get_matrix(g, p + "inp_gate.weight", pe, c.n_embd));
      VELA_TRY_ASSIGN(l.ple_proj, get_matrix(g, p + "proj.weight", c.n_embd, pe));
      VELA_TRY_ASSIGN(l.ple_post_norm, get_vector(g, p + "post_norm.weight", c.n_embd, true));
    }
  }
  if (shard.sharded()) {
    int64_t attn_block_cols = 1, down_block_cols = 1, shared_down_block_cols = 1,
            delta_out_block_cols = 1;
    for (const LayerWeights& l : w.layers) {
      if (l.wo.data) attn_block_cols = std::max(attn_block_cols, block_columns(l.wo.type));
      if (l.delta_net.out.data)
        delta_out_block_cols = std::max(delta_out_block_cols, block_columns(l.delta_net.out.type));
      if (l.w_down.data) down_block_cols = std::max(down_block_cols, block_columns(l.w_down.type));
      if (l.shared_expert.down.data)
        shared_down_block_cols =
            std::max(shared_down_block_cols, block_columns(l.shared_expert.down.type));
    }
    auto ranges = shard_ranges(c, shard, attn_block_cols, down_block_cols, shared_down_block_cols,
                               delta_out_block_cols);
    if (!ranges) return ranges.error();
    w.shard = *ranges;
    const ShardRanges& r = w.shard;
    const int64_t hd = c.head_dim;
    for (size_t i = 0; i < w.layers.size(); ++i) {
      LayerWeights& l = w.layers[i];
      if (fused_qkv[i].data) {  // split into this rank's row views; each is repacked alone
        l.wq = weight_rows(fused_qkv[i], 0, q_dim);
        l.wk = weight_rows(fused_qkv[i], q_dim, kv_dim);
        l.wv = weight_rows(fused_qkv[i], q_dim + kv_dim, kv_dim);
        fused_qkv[i] = {};
      }
      if (fused_gate_up[i].data) {
        l.w_gate = weight_rows(fused_gate_up[i], 0, c.n_ff);
        l.w_up = weight_rows(fused_gate_up[i], c.n_ff, c.n_ff);
        fused_gate_up[i] = {};
      }
      if (l.delta_net.qkv.data) {
        shard_delta_net(w, l.delta_net, c.delta_net, r, g.memory_mapped());
      } else if (LatentAttentionWeights& mw = l.mla; mw.kv_a.data) {
        // This rank's heads of the per-head matrices; the latent projections (attn_q_a and its
        // norm, attn_kv_a_mqa and its norm) serve every head and stay whole.
        const LatentAttentionConfig& m = c.mla;
        const int64_t h0 = r.head_begin, nh = r.n_head;
        if (mw.q_b.data) mw.q_b = weight_rows(mw.q_b, h0 * m.key_dim(), nh * m.key_dim());
        if (mw.q.data) mw.q = weight_rows(mw.q, h0 * m.key_dim(), nh * m.key_dim());
        mw.k_b = weight_rows(mw.k_b, h0 * m.kv_lora_rank, nh * m.kv_lora_rank);
        mw.v_b = weight_rows(mw.v_b, h0 * m.v_head_dim, nh * m.v_head_dim);
        if (mw.k_b_t.data) mw.k_b_t = weight_rows(mw.k_b_t, h0 * m.nope_dim, nh * m.nope_dim);
        if (!r.replicated_attn_output)
          l.wo = copy_columns(w, l.wo, h0 * m.v_head_dim, nh * m.v_head_dim, g.memory_mapped());
      } else {
        // A query gate (attention_output_gate) follows each head's query rows.
        const int64_t q_rows = arch.attention_output_gate ? 2 * hd : hd;
        l.wq = weight_rows(l.wq, r.head_begin * q_rows, r.n_head * q_rows);
        l.wk = weight_rows(l.wk, r.kv_head_begin * hd, r.n_head_kv * hd);
        l.wv = weight_rows(l.wv, r.kv_head_begin * hd, r.n_head_kv * hd);
        l.bq = slice_vector(l.bq, r.head_begin * hd, r.n_head * hd);
        l.bk = slice_vector(l.bk, r.kv_head_begin * hd, r.n_head_kv * hd);
        l.bv = slice_vector(l.bv, r.kv_head_begin * hd, r.n_head_kv * hd);
        l.attn_sinks = slice_vector(l.attn_sinks, r.head_begin, r.n_head);
        if (!r.replicated_attn_output)
          l.wo = copy_columns(w, l.wo, r.head_begin * hd, r.n_head * hd, g.memory_mapped());
      }
      if (l.moe()) {  // whole experts: this rank's rows of each stack
        ExpertStacks& st = stacks[i];
        const int64_t ff = c.n_ff_expert, e0 = r.expert_begin, ne = r.n_expert;
        if (st.gate.data) {  // per-expert tensors: the rank's range is picked when assembling
          st.gate = weight_rows(st.gate, e0 * ff, ne * ff);
          st.up = weight_rows(st.up, e0 * ff, ne * ff);
          st.down = weight_rows(st.down, e0 * c.n_embd, ne * c.n_embd);
        }
        // The shared expert by its inner dimension, as a dense FFN: its partial output joins the
        // experts' before their sum over the ranks.
        ExpertWeights& sh = l.shared_expert;
        if (sh.gate.data && !r.replicated_shared_expert) {
          sh.gate = weight_rows(sh.gate, r.shared_ff_begin, r.n_shared_ff);
          sh.up = weight_rows(sh.up, r.shared_ff_begin, r.n_shared_ff);
          sh.down = copy_columns(w, sh.down, r.shared_ff_begin, r.n_shared_ff, g.memory_mapped());
        }
        continue;
      }
      l.w_gate = weight_rows(l.w_gate, r.ff_begin, r.n_ff);
      l.w_up = weight_rows(l.w_up, r.ff_begin, r.n_ff);
      if (!r.replicated_ffn_down)
        l.w_down = copy_columns(w, l.w_down, r.ff_begin, r.n_ff, g.memory_mapped());
    }
    w.output = weight_rows(w.output, r.vocab_begin, r.n_vocab);
  } else {
    auto ranges = shard_ranges(c, shard, 1, 1, 1);
    if (!ranges) return ranges.error();
    w.shard = *ranges;
  }
  // The expanded form's key matrices, from this rank's heads of attn_k_b (before any repacking),
  // where the file's attn_kv_b has not given them.
  for (LayerWeights& l : w.layers)
    if (LatentAttentionWeights& mw = l.mla; mw.k_b.data != nullptr && mw.k_b_t.data == nullptr)
      mw.k_b_t = transpose_heads(w, mw.k_b, mw.k_b.n_rows / c.mla.kv_lora_rank, c.mla.kv_lora_rank);
  if (repack) {
    std::vector<WeightMatrix*> matrices;
    for (LayerWeights& l : w.layers)
      for (WeightMatrix* m : l.matrices())
        if (m->data != nullptr) matrices.push_back(m);
    // A fused matrix is repacked whole only when each of its row views is whole groups of 16.
    for (size_t i = 0; i < w.layers.size(); ++i) {
      if (fused_qkv[i].data && q_dim % 16 == 0 && kv_dim % 16 == 0)
        matrices.push_back(&fused_qkv[i]);
      if (fused_gate_up[i].data && c.n_ff % 16 == 0) matrices.push_back(&fused_gate_up[i]);
      if (stacks[i].gate.data && repack_experts && c.n_ff_expert % 16 == 0 && c.n_embd % 16 == 0)
        for (WeightMatrix* m : {&stacks[i].gate, &stacks[i].up, &stacks[i].down})
          matrices.push_back(m);
      if (stacks[i].gate_up.data && repack_experts && c.n_ff_expert % 16 == 0 && c.n_embd % 16 == 0)
        for (WeightMatrix* m : {&stacks[i].gate_up, &stacks[i].down}) matrices.push_back(m);
      if (!per_expert[i].empty() && repack_experts && c.n_ff_expert % 16 == 0 && c.n_embd % 16 == 0)
        for (int64_t e = w.shard.expert_begin; e < w.shard.expert_begin + w.shard.n_expert; ++e)
          for (WeightMatrix* m : {&per_expert[i][size_t(e)].gate, &per_expert[i][size_t(e)].up,
                                  &per_expert[i][size_t(e)].down})
            matrices.push_back(m);
      // Latent attention's per-head stacks, when each head's rows are whole groups of 16.
      LatentAttentionWeights& mw = w.layers[i].mla;
      if (mw.k_b.data && c.mla.kv_lora_rank % 16 == 0) matrices.push_back(&mw.k_b);
      if (mw.v_b.data && c.mla.v_head_dim % 16 == 0) matrices.push_back(&mw.v_b);
      if (mw.k_b_t.data && c.mla.nope_dim % 16 == 0) matrices.push_back(&mw.k_b_t);
    }
    // A tied head over the whole vocabulary is repacked as well: the embedding lookup reads its
    // rows back out of the packed groups, so one copy serves both (a vocabulary slice of a
    // tensor-parallel rank stays a view of the whole row-major embedding).
    const bool whole_tied_head = w.tied_embeddings && w.output.data == w.token_embd.data &&
                                 w.output.n_rows == w.token_embd.n_rows;
    if ((!w.tied_embeddings || whole_tied_head) && !head_from_target && shard.last_stage())
      matrices.push_back(&w.output);
    if (w.mtp.eh_proj.data != nullptr) matrices.push_back(&w.mtp.eh_proj);
    if (w.eagle3.fc.data != nullptr) matrices.push_back(&w.eagle3.fc);
    if (auto st = repack_matrices(w, matrices, g.memory_mapped()); !st) return st.error();
    if (whole_tied_head && !head_from_target) w.token_embd = w.output;
  }
  for (size_t i = 0; i < w.layers.size(); ++i) {
    LayerWeights& l = w.layers[i];
    if (fused_qkv[i].data) {
      l.wq = weight_rows(fused_qkv[i], 0, q_dim);
      l.wk = weight_rows(fused_qkv[i], q_dim, kv_dim);
      l.wv = weight_rows(fused_qkv[i], q_dim + kv_dim, kv_dim);
    }
    if (fused_gate_up[i].data) {
      l.w_gate = weight_rows(fused_gate_up[i], 0, c.n_ff);
      l.w_up = weight_rows(fused_gate_up[i], c.n_ff, c.n_ff);
    }
    if (const ExpertStacks& st = stacks[i]; st.gate.data) {
      // Every expert id has an entry; a tensor-parallel rank's experts are [expert_begin,
      // expert_begin + n_expert) of its stacks, the others' entries empty.
      const int64_t ff = c.n_ff_expert, e0 = w.shard.expert_begin;
      l.experts.resize(size_t(c.n_expert));
      for (int64_t e = e0; e < e0 + w.shard.n_expert; ++e)
        l.experts[size_t(e)] = {weight_rows(st.gate, (e - e0) * ff, ff),
                                weight_rows(st.up, (e - e0) * ff, ff),
                                weight_rows(st.down, (e - e0) * c.n_embd, c.n_embd)};
    } else if (st.gate_up.data) {  // fused stacks are never sharded (tensor_shard.cpp)
      const int64_t ff = c.n_ff_expert;
      l.experts.resize(size_t(c.n_expert));
      for (int64_t e = 0; e < c.n_expert; ++e)
        l.experts[size_t(e)] = {weight_rows(st.gate_up, e * 2 * ff, ff),
                                weight_rows(st.gate_up, e * 2 * ff + ff, ff),
                                weight_rows(st.down, e * c.n_embd, c.n_embd)};
    } else if (!per_expert[i].empty()) {  // the rank's experts, the others' entries empty
      const int64_t e0 = w.shard.expert_begin;
      l.experts.resize(size_t(c.n_expert));
      for (int64_t e = e0; e < e0 + w.shard.n_expert; ++e)
        l.experts[size_t(e)] = per_expert[i][size_t(e)];
    }
  }
  return w;
}

#undef VELA_TRY_ASSIGN

}  // namespace vela
