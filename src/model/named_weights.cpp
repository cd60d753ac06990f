#include "model/named_weights.h"

namespace vela {

std::vector<NamedWeight> named_weights(const Model& model) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const ArchDescription& arch = *c.arch;
  std::vector<NamedWeight> out;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string prefix = "blk." + std::to_string(w.shard.layer_begin + int32_t(i)) + ".";
    const auto add = [&](const WeightMatrix& m, const char* name) {
      if (m.data != nullptr)
        out.push_back({m.data, prefix + name + ".weight", 0, 1, false, m.n_cols});
    };
    // Matrix h of a stack of H, each `rows` rows of `stack` (a rank's first one is global index
    // `first`).
    const auto add_stack = [&](const WeightMatrix& stack, int64_t rows, int32_t first, int32_t H,
                               const char* name) {
      if (stack.data == nullptr) return;
      for (int64_t h = 0; h < stack.n_rows / rows; ++h)
        out.push_back({weight_rows(stack, h * rows, rows).data, prefix + name + ".weight",
                       first + int32_t(h), H, false, stack.n_cols});
    };

    const MixerKind mixer = c.layers[i].mixer;  // the config holds this stage's layers
    if (mixer == MixerKind::kGatedDeltaNet) {
      const DeltaNetWeights& d = l.delta_net;
      add(d.qkv, "attn_qkv");
      add(d.gate, "attn_gate");
      add(d.beta, "ssm_beta");
      add(d.alpha, "ssm_alpha");
      add(d.out, "ssm_out");
    } else if (mixer == MixerKind::kLatentAttention) {
      const LatentAttentionWeights& m = l.mla;
      add(m.q_a, "attn_q_a");
      add(m.q_b, "attn_q_b");
      add(m.q, "attn_q");
      add(m.kv_a, "attn_kv_a_mqa");
      const int32_t H = model.whole_config().n_head;
      add_stack(m.k_b, c.mla.kv_lora_rank, w.shard.head_begin, H, "attn_k_b");
      add_stack(m.v_b, c.mla.v_head_dim, w.shard.head_begin, H, "attn_v_b");
      add(l.wo, "attn_output");
    } else {
      if (arch.fused_qkv) {
        add(l.wq, "attn_qkv");
      } else {
        add(l.wq, "attn_q");
        add(l.wk, "attn_k");
        add(l.wv, "attn_v");
      }
      add(l.wo, "attn_output");
    }

    if (l.moe()) {
      add(l.router, "ffn_gate_inp");
      for (size_t e = 0; e < l.experts.size(); ++e) {
        const ExpertWeights& ex = l.experts[e];
        const auto n_expert = int32_t(l.experts.size());
        for (const auto& [m, name] :
             {std::pair{&ex.gate, "ffn_gate_exps"}, std::pair{&ex.up, "ffn_up_exps"},
              std::pair{&ex.down, "ffn_down_exps"}})
          if (m->data != nullptr)
            out.push_back(
                {m->data, prefix + name + ".weight", int32_t(e), n_expert, true, m->n_cols});
      }
      add(l.shared_expert.gate, "ffn_gate_shexp");
      add(l.shared_expert.up, "ffn_up_shexp");
      add(l.shared_expert.down, "ffn_down_shexp");
      // The shared expert's gate is one row, read as a vector (decoder_forward.cpp).
      if (!l.shared_expert_gate.empty())
        out.push_back({l.shared_expert_gate.data(), prefix + "ffn_gate_inp_shexp.weight", 0, 1,
                       false, int64_t(l.shared_expert_gate.size())});
    } else if (arch.fused_gate_up) {
      add(l.w_gate, "ffn_up");
      add(l.w_down, "ffn_down");
    } else {
      add(l.w_gate, "ffn_gate");
      add(l.w_up, "ffn_up");
      add(l.w_down, "ffn_down");
    }
  }
  return out;
}

}  // namespace vela
