// DecoderForward's feed-forward blocks: the dense FFN, a mixture of experts (with a shared expert
// beside it, or a dense FFN beside it as in Gemma 4's MoE form) and the shared expert.
#include <cmath>

#include "model/decoder_forward.h"
#include "model/layer_ops.h"

namespace vela {

void DecoderForward::feed_forward(const LayerWeights& l, int32_t layer, int64_t T) {
  const ModelConfig& c = model_->config();
  const int64_t E = c.n_embd;
  if (l.moe() && c.arch->moe_beside_dense) {
    // The dense FFN of xn_ (ffn_norm'd) into proj_, then post_dense_norm'd.
    dense_ffn(l, layer, T);
    // The router's input rms_norm(x) / sqrt(n_embd) * router_input_scale, the experts' input
    // pre_moe_norm(x) (into xn_, free again).
    const float router_scale = 1.0f / std::sqrt(float(E));
    for_ranges(T, 4 * E, [&](int64_t t0, int64_t t1) {
      rms_norm(proj_.data() + t0 * E, l.post_dense_norm.data(), t1 - t0, E, c.rms_eps,
               proj_.data() + t0 * E);
      rms_norm(x_.data() + t0 * E, l.pre_moe_norm.data(), t1 - t0, E, c.rms_eps,
               xn_.data() + t0 * E);
      float* r = router_in_.data() + t0 * E;
      rms_norm(x_.data() + t0 * E, l.router_input_scale.data(), t1 - t0, E, c.rms_eps, r);
      for (int64_t i = 0; i < (t1 - t0) * E; ++i) r[i] *= router_scale;
    });
    moe_->run(l, layer, xn_.data(), T, *pool_, min_work_, options_.min_parallel_work,
              shared_out_.data(), router_in_.data());
    for_ranges(T, 2 * E, [&](int64_t t0, int64_t t1) {
      rms_norm(shared_out_.data() + t0 * E, l.post_moe_norm.data(), t1 - t0, E, c.rms_eps,
               shared_out_.data() + t0 * E);
      add_inplace(proj_.data() + t0 * E, shared_out_.data() + t0 * E, (t1 - t0) * E);
    });
    return;
  }
  if (l.moe()) {
    moe_->run(l, layer, xn_.data(), T, *pool_, min_work_, options_.min_parallel_work, proj_.data());
    // A rank's slice of the shared expert is a partial sum like its experts' outputs: both go
    // into one all-reduce. A shared expert every rank keeps whole is added after it.
    const bool shared = l.shared_expert.gate.data != nullptr;
    const bool shared_whole = split_layers_ && model_->weights().shard.replicated_shared_expert;
    if (shared && !shared_whole) shared_expert(l, T);
    if (split_layers_) tp_->all_reduce_sum({proj_.data(), size_t(T * model_->config().n_embd)});
    if (shared && shared_whole) shared_expert(l, T);
    return;
  }
  dense_ffn(l, layer, T);
}

void DecoderForward::dense_ffn(const LayerWeights& l, int32_t layer, int64_t T) {
  const int64_t n_ff = model_->config().layers[size_t(layer)].n_ff;
  project(xn_.data(), T, {{&l.w_gate, gate_.data()}, {&l.w_up, up_.data()}});
  // The activation costs an exp per element: worth sharing from a few thousand elements on.
  const FfnActivation act = model_->config().arch->activation;
  for_ranges(T * n_ff, 16, [&](int64_t i0, int64_t i1) {
    gated_activation(act, gate_.data() + i0, up_.data() + i0, i1 - i0);
  });
  output_projection(l.w_down, gate_.data(), T, ff_split_, ffn_full_);
}

void DecoderForward::shared_expert(const LayerWeights& l, int64_t T) {
  const ModelConfig& c = model_->config();
  const int64_t E = c.n_embd, ff = c.n_ff_shared_expert;
  const ExpertWeights& sh = l.shared_expert;
  project(xn_.data(), T, {{&sh.gate, gate_.data()}, {&sh.up, up_.data()}});
  for_ranges(T * ff, 16, [&](int64_t i0, int64_t i1) {
    silu_mul(gate_.data() + i0, up_.data() + i0, i1 - i0);
  });
  project(gate_.data(), T, {{&sh.down, shared_out_.data()}});
  // proj += sigmoid(ffn_gate_inp_shexp . xn) * shared, or proj += shared without a gate
  const bool gated = !l.shared_expert_gate.empty();
  if (ActivationObserver* observer = projector_->observer(); observer != nullptr && gated) {
    const WeightMatrix gate{GgmlType::F32, l.shared_expert_gate.data(), 1, E, E * 4};
    observer->observe(gate, xn_.data(), T);
  }
  for_ranges(T, 2 * E, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* from = shared_out_.data() + t * E;
      float* to = proj_.data() + t * E;
      if (!gated) {
        add_inplace(to, from, E);
        continue;
      }
      const float* xn = xn_.data() + t * E;
      float dot = 0.0f;
      for (int64_t i = 0; i < E; ++i) dot += xn[i] * l.shared_expert_gate[size_t(i)];
      const float gate = sigmoid(dot);
      for (int64_t i = 0; i < E; ++i) to[i] += gate * from[i];
    }
  });
}

}  // namespace vela
