#include "tools_support/model_shape.h"

namespace vela {

const std::vector<ModelShape>& known_shapes() {
  // Hyper-parameters of the published checkpoints' config files. The tiny shapes keep row
  // lengths multiples of 256 (tiny) or not (tiny-qwen2) so both K-quant paths get tested.
  static const std::vector<ModelShape> shapes = {
      {"tiny", "llama", 256, 2, 4, 2, 512, 512, 512, 10000.0f, 1e-5f, false, false},
      {"tiny-qwen2", "qwen2", 128, 2, 4, 2, 256, 512, 512, 1000000.0f, 1e-6f, true, true},
      {"tinyllama-1.1b", "llama", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f, false,
       false},
      {"qwen2-0.5b", "qwen2", 896, 24, 14, 2, 4864, 151936, 32768, 1000000.0f, 1e-6f, true, true},
      {"llama2-7b", "llama", 4096, 32, 32, 32, 11008, 32000, 4096, 10000.0f, 1e-5f, false, false},
      {"llama3-8b", "llama", 4096, 32, 32, 8, 14336, 128256, 8192, 500000.0f, 1e-5f, false, false},
  };
  return shapes;
}

const ModelShape* find_shape(std::string_view name) {
  for (const ModelShape& s : known_shapes())
    if (s.name == name) return &s;
  return nullptr;
}

std::string known_shape_names() {
  std::string out;
  for (const ModelShape& s : known_shapes()) out += (out.empty() ? "" : ", ") + s.name;
  return out;
}

int64_t TensorSpec::n_rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < ne.size(); ++i) n *= ne[i];
  return n;
}

std::vector<TensorSpec> model_tensors(const ModelShape& s, int32_t n_vocab) {
  const int64_t embd = s.n_embd, q_dim = int64_t(s.n_head) * s.head_dim(),
                kv_dim = int64_t(s.n_head_kv) * s.head_dim(), ff = s.n_ff;
  std::vector<TensorSpec> t;
  t.push_back({"token_embd.weight", {embd, n_vocab}, TensorKind::kTokenEmbd, -1});
  t.push_back({"output_norm.weight", {embd}, TensorKind::kOutputNorm, -1});
  if (!s.tied_embeddings) t.push_back({"output.weight", {embd, n_vocab}, TensorKind::kOutput, -1});
  for (int32_t i = 0; i < s.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    t.push_back({p + "attn_norm.weight", {embd}, TensorKind::kNorm, i});
    t.push_back({p + "attn_q.weight", {embd, q_dim}, TensorKind::kMatrix, i});
    if (s.qkv_bias) t.push_back({p + "attn_q.bias", {q_dim}, TensorKind::kBias, i});
    t.push_back({p + "attn_k.weight", {embd, kv_dim}, TensorKind::kMatrix, i});
    if (s.qkv_bias) t.push_back({p + "attn_k.bias", {kv_dim}, TensorKind::kBias, i});
    t.push_back({p + "attn_v.weight", {embd, kv_dim}, TensorKind::kMatrix, i});
    if (s.qkv_bias) t.push_back({p + "attn_v.bias", {kv_dim}, TensorKind::kBias, i});
    t.push_back({p + "attn_output.weight", {q_dim, embd}, TensorKind::kMatrix, i});
    t.push_back({p + "ffn_norm.weight", {embd}, TensorKind::kNorm, i});
    t.push_back({p + "ffn_gate.weight", {embd, ff}, TensorKind::kMatrix, i});
    t.push_back({p + "ffn_up.weight", {embd, ff}, TensorKind::kMatrix, i});
    t.push_back({p + "ffn_down.weight", {ff, embd}, TensorKind::kMatrix, i});
  }
  return t;
}

}  // namespace vela
