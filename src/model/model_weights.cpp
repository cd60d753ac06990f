#include "model/model_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>

#include "quant/dequantize.h"

namespace vela {
namespace {

std::string shape_string(const GgufTensorInfo& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

Result<WeightMatrix> get_matrix(const GgufFile& g, const std::string& name, int64_t n_rows, int64_t n_cols) {
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t) return make_error("missing tensor '" + name + "'");
  if (t->n_dims > 2 || t->ne[0] != n_cols || t->ne[1] != n_rows)
    return make_error("tensor '" + name + "' has shape " + shape_string(*t) + ", expected [" +
                      std::to_string(n_cols) + ", " + std::to_string(n_rows) + "]");
  const GgmlTypeInfo info = *ggml_type_info(t->type);  // the reader only admits supported types
  return WeightMatrix{t->ggml_type(), t->data, n_rows, n_cols, row_bytes(info, n_cols)};
}

// A 1-D tensor converted to f32; absent and optional gives an empty vector.
Result<std::vector<float>> get_vector(const GgufFile& g, const std::string& name, int64_t n, bool required) {
  const GgufTensorInfo* t = g.find_tensor(name);
  if (!t) {
    if (required) return make_error("missing tensor '" + name + "'");
    return std::vector<float>{};
  }
  if (t->n_dims != 1 || t->ne[0] != n)
    return make_error("tensor '" + name + "' has shape " + shape_string(*t) + ", expected [" + std::to_string(n) + "]");
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t->ggml_type(), t->data, out.data(), n);
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
void repack_matrices(ModelWeights& w, const std::vector<WeightMatrix*>& matrices,
                     bool release_pages) {
  std::vector<WeightMatrix*> chosen;
  int64_t total = 0;
  for (WeightMatrix* m : matrices) {
    if (!prefers_interleaved16(m->type, m->n_rows, m->n_cols)) continue;
    chosen.push_back(m);
    total += m->n_rows / 16 * interleaved16_group_bytes(m->type, m->n_cols);
  }
  if (chosen.empty()) return;
  constexpr size_t kAlign = 64;
  w.repacked = std::shared_ptr<uint8_t[]>(
      static_cast<uint8_t*>(::operator new[](size_t(total), std::align_val_t(kAlign))),
      [](uint8_t* p) { ::operator delete[](p, std::align_val_t(kAlign)); });
  w.repacked_bytes = total;
  std::vector<uint8_t*> dst(chosen.size());
  int64_t offset = 0;
  for (size_t i = 0; i < chosen.size(); ++i) {
    dst[i] = w.repacked.get() + offset;
    offset += chosen[i]->n_rows / 16 * interleaved16_group_bytes(chosen[i]->type, chosen[i]->n_cols);
  }
  const auto pack = [&](size_t i) {
    const WeightMatrix& m = *chosen[i];
    pack_interleaved16(m.type, m.data, m.n_cols, 0, m.n_rows, dst[i]);
    if (release_pages) release_mapped_pages(m.data, m.n_rows * m.row_bytes);
  };
  const size_t n_threads =
      std::clamp<size_t>(std::thread::hardware_concurrency(), 1, std::min<size_t>(chosen.size(), 16));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n_threads; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = t; i < chosen.size(); i += n_threads) pack(i);
    });
  for (size_t i = 0; i < chosen.size(); i += n_threads) pack(i);
  for (std::thread& th : threads) th.join();
  for (size_t i = 0; i < chosen.size(); ++i) {
    chosen[i]->data = dst[i];
    chosen[i]->layout = WeightLayout::kInterleaved16;
  }
}

}  // namespace

Result<ModelWeights> ModelWeights::load(const GgufFile& g, const ModelConfig& c, bool repack) {
  ModelWeights w;
  const int64_t q_dim = int64_t(c.n_head) * c.head_dim;
  const int64_t kv_dim = int64_t(c.n_head_kv) * c.head_dim;

#define VELA_TRY_ASSIGN(dst, expr)       \
  do {                                   \
    auto r_ = (expr);                    \
    if (!r_) return r_.error();          \
    dst = std::move(*r_);                \
  } while (0)

  VELA_TRY_ASSIGN(w.token_embd, get_matrix(g, "token_embd.weight", c.n_vocab, c.n_embd));
  VELA_TRY_ASSIGN(w.output_norm, get_vector(g, "output_norm.weight", c.n_embd, true));
  if (g.find_tensor("output.weight")) {
    VELA_TRY_ASSIGN(w.output, get_matrix(g, "output.weight", c.n_vocab, c.n_embd));
  } else {
    w.output = w.token_embd;
    w.tied_embeddings = true;
  }
  VELA_TRY_ASSIGN(w.rope_freq_factors, get_vector(g, "rope_freqs.weight", c.n_rot / 2, false));

  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int32_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    VELA_TRY_ASSIGN(l.attn_norm, get_vector(g, p + "attn_norm.weight", c.n_embd, true));
    VELA_TRY_ASSIGN(l.wq, get_matrix(g, p + "attn_q.weight", q_dim, c.n_embd));
    VELA_TRY_ASSIGN(l.wk, get_matrix(g, p + "attn_k.weight", kv_dim, c.n_embd));
    VELA_TRY_ASSIGN(l.wv, get_matrix(g, p + "attn_v.weight", kv_dim, c.n_embd));
    VELA_TRY_ASSIGN(l.wo, get_matrix(g, p + "attn_output.weight", c.n_embd, q_dim));
    const bool biases_required = c.arch == Architecture::kQwen2;
    VELA_TRY_ASSIGN(l.bq, get_vector(g, p + "attn_q.bias", q_dim, biases_required));
    VELA_TRY_ASSIGN(l.bk, get_vector(g, p + "attn_k.bias", kv_dim, biases_required));
    VELA_TRY_ASSIGN(l.bv, get_vector(g, p + "attn_v.bias", kv_dim, biases_required));
    VELA_TRY_ASSIGN(l.ffn_norm, get_vector(g, p + "ffn_norm.weight", c.n_embd, true));
    VELA_TRY_ASSIGN(l.w_gate, get_matrix(g, p + "ffn_gate.weight", c.n_ff, c.n_embd));
    VELA_TRY_ASSIGN(l.w_up, get_matrix(g, p + "ffn_up.weight", c.n_ff, c.n_embd));
    VELA_TRY_ASSIGN(l.w_down, get_matrix(g, p + "ffn_down.weight", c.n_embd, c.n_ff));
  }
#undef VELA_TRY_ASSIGN
  if (repack) {
    std::vector<WeightMatrix*> matrices;
    for (LayerWeights& l : w.layers)
      for (WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
        matrices.push_back(m);
    if (!w.tied_embeddings) matrices.push_back(&w.output);
    repack_matrices(w, matrices, g.memory_mapped());
  }
  return w;
}

}  // namespace vela
