#include "model/moe_ffn.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "model/layer_ops.h"
#include "model/pass_parallel.h"

namespace vela {
namespace {

size_t align64(size_t bytes) {
  return (bytes + 63) / 64 * 64;
}

}  // namespace

void route_top_k(const float* logits, int32_t n_expert, int32_t k, bool renormalize, int32_t* ids,
                 float* weights) {
  float max_logit = logits[0];
  for (int32_t e = 1; e < n_expert; ++e) max_logit = std::max(max_logit, logits[e]);
  double sum = 0.0;
  for (int32_t e = 0; e < n_expert; ++e) sum += std::exp(double(logits[e]) - double(max_logit));
  for (int32_t r = 0; r < k; ++r) {
    int32_t best = -1;
    for (int32_t e = 0; e < n_expert; ++e) {
      if (std::find(ids, ids + r, e) != ids + r) continue;
      if (best < 0 || logits[e] > logits[best]) best = e;  // strict: ties keep the lower id
    }
    ids[r] = best;
    weights[r] = float(std::exp(double(logits[best]) - double(max_logit)) / sum);
  }
  if (renormalize) {
    float total = 0.0f;
    for (int32_t r = 0; r < k; ++r) total += weights[r];
    for (int32_t r = 0; r < k; ++r) weights[r] /= total;
  }
}

void route_experts(const float* logits, int32_t n_expert, int32_t k, const ExpertRouting& r,
                   const float* bias, int32_t* ids, float* weights) {
  if (r.gating == ExpertGating::kSoftmax && bias == nullptr && r.n_groups <= 1 && r.scale == 1.0f) {
    route_top_k(logits, n_expert, k, r.renormalize, ids, weights);
    return;
  }
  // score[e], then choose[e] = score + bias, with the experts of unchosen groups at -inf.
  thread_local std::vector<float> score, choose;
  score.resize(size_t(n_expert));
  choose.resize(size_t(n_expert));
  if (r.gating == ExpertGating::kSigmoid) {
    for (int32_t e = 0; e < n_expert; ++e) score[size_t(e)] = sigmoid(logits[e]);
  } else if (r.gating == ExpertGating::kSoftmaxOfChosen) {
    std::copy(logits, logits + n_expert, score.begin());
  } else {
    float max_logit = logits[0];
    for (int32_t e = 1; e < n_expert; ++e) max_logit = std::max(max_logit, logits[e]);
    double sum = 0.0;
    for (int32_t e = 0; e < n_expert; ++e) sum += std::exp(double(logits[e]) - double(max_logit));
    for (int32_t e = 0; e < n_expert; ++e)
      score[size_t(e)] = float(std::exp(double(logits[e]) - double(max_logit)) / sum);
  }
  for (int32_t e = 0; e < n_expert; ++e)
    choose[size_t(e)] = score[size_t(e)] + (bias != nullptr ? bias[e] : 0.0f);
  // The index of the highest of x[0, n) not yet taken (ties: the lower index).
  const auto best_of = [](const float* x, int32_t n, const int32_t* taken, int32_t n_taken) {
    int32_t best = -1;
    for (int32_t i = 0; i < n; ++i) {
      if (std::find(taken, taken + n_taken, i) != taken + n_taken) continue;
      if (best < 0 || x[i] > x[best]) best = i;  // strict: ties keep the lower index
    }
    return best;
  };
  if (r.n_groups > 1) {
    const int32_t per_group = n_expert / r.n_groups;
    thread_local std::vector<float> group_score;
    thread_local std::vector<int32_t> kept;
    group_score.resize(size_t(r.n_groups));
    kept.resize(size_t(r.n_groups_used));
    for (int32_t g = 0; g < r.n_groups; ++g) {
      const float* x = choose.data() + g * per_group;
      int32_t top[2];
      top[0] = best_of(x, per_group, top, 0);
      top[1] = best_of(x, per_group, top, 1);
      group_score[size_t(g)] = x[top[0]] + x[top[1]];
    }
    for (int32_t i = 0; i < r.n_groups_used; ++i)
      kept[size_t(i)] = best_of(group_score.data(), r.n_groups, kept.data(), i);
    for (int32_t g = 0; g < r.n_groups; ++g)
      if (std::find(kept.begin(), kept.end(), g) == kept.end())
        std::fill_n(choose.data() + g * per_group, per_group, -INFINITY);
  }
  for (int32_t i = 0; i < k; ++i) {
    ids[i] = best_of(choose.data(), n_expert, ids, i);
    weights[i] = score[size_t(ids[i])];
  }
  if (r.gating == ExpertGating::kSoftmaxOfChosen) {  // the softmax of the k chosen logits
    const float max_logit = *std::max_element(weights, weights + k);
    double sum = 0.0;
    for (int32_t i = 0; i < k; ++i) {
      weights[i] = std::exp(weights[i] - max_logit);
      sum += weights[i];
    }
    const float inv_sum = float(1.0 / sum);
    for (int32_t i = 0; i < k; ++i) weights[i] *= inv_sum;
  }
  if (r.renormalize) {
    float total = 0.0f;
    for (int32_t i = 0; i < k; ++i) total += weights[i];
    total = std::max(total, 6.103515625e-5f);
    for (int32_t i = 0; i < k; ++i) weights[i] /= total;
  }
  for (int32_t i = 0; i < k; ++i) weights[i] *= r.scale;
}

MoeFeedForward::MoeFeedForward(const Model& model, int32_t max_tokens)
    : config_(model.config()),
      routing_{model.config().expert_gating, model.config().renormalize_experts,
               model.config().expert_weights_scale, model.config().n_expert_groups,
               model.config().n_expert_groups_used},
      activation_(model.config().arch->activation),
      split_(2 * std::max(model.config().n_expert, 1)) {
  const ModelConfig& c = config_;
  own_begin_ = model.weights().shard.expert_begin;
  own_end_ = own_begin_ + model.weights().shard.n_expert;
  const size_t T = size_t(max_tokens), K = size_t(c.n_expert_used), N = size_t(c.n_expert);
  router_logits_.resize(T * N);
  route_ids_.resize(T * K);
  route_weights_.resize(T * K);
  route_rows_.resize(T * K);
  expert_count_.resize(N);
  expert_offset_.resize(N);
  expert_fill_.resize(N);
  chosen_.reserve(N);
  gathered_.resize(T * K * size_t(c.n_embd));
  gate_.resize(T * K * size_t(c.n_ff_expert));
  up_.resize(T * K * size_t(c.n_ff_expert));
  acts_.resize(N);
  gates_.reserve(N);
  ups_.reserve(N);
  downs_.reserve(N);
  expert_runs_.assign(size_t(c.n_layer) * N, 0);
  expert_tokens_.assign(size_t(c.n_layer) * N, 0);
  // The most any step's per-expert activations take: all rows, plus alignment per expert.
  const int64_t rows = int64_t(T * K);
  const int64_t n_parts = std::min<int64_t>(rows, int64_t(N));
  const auto bound = [&](const WeightMatrix& m) {
    return matmul_scratch_bytes(m.type, m.n_cols, rows, m.layout) +
           size_t(n_parts) * (64 + matmul_scratch_bytes(m.type, m.n_cols, 16, m.layout));
  };
  size_t gate_bytes = 0, up_bytes = 0, down_bytes = 0;
  for (const LayerWeights& l : model.weights().layers) {
    // The router's activations use the gate's buffer before the experts'.
    gate_bytes = std::max(gate_bytes, matmul_scratch_bytes(l.router.type, l.router.n_cols,
                                                           max_tokens, l.router.layout));
    for (const ExpertWeights& e : l.experts) {
      gate_bytes = std::max(gate_bytes, bound(e.gate));
      up_bytes = std::max(up_bytes, bound(e.up));
      down_bytes = std::max(down_bytes, bound(e.down));
    }
  }
  act_gate_.reserve(gate_bytes);
  act_up_.reserve(up_bytes);
  act_down_.reserve(down_bytes);
}

void MoeFeedForward::convert_per_expert(const std::vector<const WeightMatrix*>& w, const float* x,
                                        int64_t n_cols, MatmulScratch& buffer, ThreadPool& pool,
                                        int64_t min_work) {
  size_t offset = 0;
  for (size_t i = 0; i < chosen_.size(); ++i) {
    const int32_t e = chosen_[i];
    const int64_t n = expert_count_[size_t(e)];
    acts_[i] = prepare_activations_in(w[i]->type, x + int64_t(expert_offset_[size_t(e)]) * n_cols,
                                      n_cols, n, buffer.data() + offset, w[i]->layout);
    offset += align64(matmul_scratch_bytes(w[i]->type, n_cols, n, w[i]->layout));
  }
  assert(offset <= buffer.capacity());  // the bound sized at construction
  // One loop over all gathered rows; each range converts its part of each expert's rows.
  const int64_t n_rows =
      int64_t(expert_offset_[size_t(chosen_.back())]) + expert_count_[size_t(chosen_.back())];
  parallel_ranges(pool, n_rows, n_cols * 4, min_work, [&](int64_t r0, int64_t r1) {
    for (size_t i = 0; i < chosen_.size(); ++i) {
      const int32_t e = chosen_[i];
      const int64_t first = expert_offset_[size_t(e)], last = first + expert_count_[size_t(e)];
      const int64_t b = std::max(r0, first), end = std::min(r1, last);
      if (b >= end) continue;
      const QuantizedActivations& act = acts_[i];
      convert_activations_in(act, x + first * n_cols, n_cols, b - first, end - first,
                             const_cast<uint8_t*>(act.data));
    }
  });
}

void MoeFeedForward::run(const LayerWeights& l, int32_t layer_index, const float* xn,
                         int64_t n_tokens, ThreadPool& pool, int64_t min_work,
                         int64_t min_parallel_work, float* out, const float* router_in) {
  const ModelConfig& c = config_;
  const int64_t E = c.n_embd, F = c.n_ff_expert, N = c.n_expert, K = c.n_expert_used;

  // Router logits, f32 (the router is an f32 matrix in every common file; any type works).
  const float* rx = router_in != nullptr ? router_in : xn;
  if (observer_ != nullptr) observer_->observe(l.router, rx, n_tokens);
  {
    MatmulScratch& scratch = act_gate_;
    const QuantizedActivations act =
        prepare_activations(l.router.type, rx, E, n_tokens, scratch, l.router.layout);
    convert_activations(act, rx, E, 0, n_tokens, scratch);
    split_.clear();
    split_.add(l.router.type, l.router.data, N, E, act, n_tokens, router_logits_.data(),
               l.router.layout);
    run_matmul_split(split_, pool, min_parallel_work);
  }
  if (!l.router_bias.empty()) add_bias(router_logits_.data(), l.router_bias.data(), n_tokens, N);
  std::fill(expert_count_.begin(), expert_count_.end(), 0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    route_experts(router_logits_.data() + t * N, int32_t(N), int32_t(K), routing_,
                  l.expert_bias.empty() ? nullptr : l.expert_bias.data(), route_ids_.data() + t * K,
                  route_weights_.data() + t * K);
    for (int64_t r = 0; r < K; ++r) ++expert_count_[size_t(route_ids_[size_t(t * K + r)])];
  }
  // Gathered rows by expert id, tokens in batch order within each expert.
  chosen_.clear();
  int32_t next_row = 0;
  for (int64_t e = 0; e < N; ++e) {
    expert_offset_[size_t(e)] = next_row;
    next_row += expert_count_[size_t(e)];
    if (expert_count_[size_t(e)] == 0 || e < own_begin_ || e >= own_end_) continue;
    chosen_.push_back(int32_t(e));
    expert_runs_[size_t(layer_index * N + e)] += 1;
    expert_tokens_[size_t(layer_index * N + e)] += expert_count_[size_t(e)];
  }
  std::fill(expert_fill_.begin(), expert_fill_.end(), 0);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = 0; r < K; ++r) {
      const int32_t e = route_ids_[size_t(t * K + r)];
      route_rows_[size_t(t * K + r)] = expert_offset_[size_t(e)] + expert_fill_[size_t(e)]++;
    }
  parallel_ranges(pool, n_tokens * K, E, min_work, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::copy(xn + i / K * E, xn + (i / K + 1) * E,
                gathered_.data() + int64_t(route_rows_[size_t(i)]) * E);
  });

  const auto owned = [&](int32_t e) { return e >= own_begin_ && e < own_end_; };
  // y[row of (t, r)] += bias[expert of (t, r)] for every owned (token, rank) pair.
  // y: gathered rows [T * k, n]; bias: [n_expert, n]
  const auto add_expert_bias = [&](const std::vector<float>& bias, float* y, int64_t n) {
    if (bias.empty()) return;
    parallel_ranges(pool, n_tokens * K, n, min_work, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int32_t e = route_ids_[size_t(i)];
        if (owned(e))
          add_inplace(y + int64_t(route_rows_[size_t(i)]) * n, bias.data() + int64_t(e) * n, n);
      }
    });
  };
  if (chosen_.empty()) {  // a tensor-parallel rank none of whose experts was chosen
    std::fill(out, out + n_tokens * E, 0.0f);
    return;
  }
  // Gate and up of every chosen expert in one loop.
  gates_.clear();
  ups_.clear();
  downs_.clear();
  for (int32_t e : chosen_) {
    const ExpertWeights& ew = l.experts[size_t(e)];
    gates_.push_back(&ew.gate);
    ups_.push_back(&ew.up);
    downs_.push_back(&ew.down);
  }
  // Each chosen expert's inputs: its gathered rows [expert_count, n_cols] of x.
  const auto observe_experts = [&](const std::vector<const WeightMatrix*>& w, const float* x) {
    if (observer_ == nullptr) return;
    for (size_t i = 0; i < chosen_.size(); ++i)
      observer_->observe(*w[i], x + int64_t(expert_offset_[size_t(chosen_[i])]) * w[i]->n_cols,
                         expert_count_[size_t(chosen_[i])]);
  };
  observe_experts(gates_, gathered_.data());
  observe_experts(ups_, gathered_.data());
  // Adds y = W x for every chosen expert's rows: w[i] is chosen expert i's matrix, y the
  // gathered output rows [T * k, n_out] (each part holds a copy of its activations).
  const auto add_parts = [&](const std::vector<const WeightMatrix*>& w, float* y) {
    for (size_t i = 0; i < chosen_.size(); ++i) {
      const int64_t first = expert_offset_[size_t(chosen_[i])];
      split_.add(w[i]->type, w[i]->data, w[i]->n_rows, w[i]->n_cols, acts_[i],
                 expert_count_[size_t(chosen_[i])], y + first * w[i]->n_rows, w[i]->layout);
    }
  };
  split_.clear();
  convert_per_expert(gates_, gathered_.data(), E, act_gate_, pool, min_work);
  add_parts(gates_, gate_.data());
  // Up reuses the gate's activations when the types match.
  if (gates_.front()->type != ups_.front()->type || gates_.front()->layout != ups_.front()->layout)
    convert_per_expert(ups_, gathered_.data(), E, act_up_, pool, min_work);
  add_parts(ups_, up_.data());
  run_matmul_split(split_, pool, min_parallel_work);
  add_expert_bias(l.expert_gate_bias, gate_.data(), F);
  add_expert_bias(l.expert_up_bias, up_.data(), F);

  const int64_t n_rows = n_tokens * K;
  parallel_ranges(pool, n_rows * F, 16, min_work, [&](int64_t i0, int64_t i1) {
    gated_activation(activation_, gate_.data() + i0, up_.data() + i0, i1 - i0);
  });

  // Down of every chosen expert, into the gathered rows (their inputs are no longer needed).
  observe_experts(downs_, gate_.data());
  split_.clear();
  convert_per_expert(downs_, gate_.data(), F, act_down_, pool, min_work);
  add_parts(downs_, gathered_.data());
  run_matmul_split(split_, pool, min_parallel_work);
  add_expert_bias(l.expert_down_bias, gathered_.data(), E);

  // Each token's weighted sum over its experts, in rank order.
  parallel_ranges(pool, n_tokens, E * K, min_work, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out + t * E;
      bool first = true;
      for (int64_t r = 0; r < K; ++r) {
        if (!owned(route_ids_[size_t(t * K + r)])) continue;
        const int32_t e = route_ids_[size_t(t * K + r)];
        const float w = route_weights_[size_t(t * K + r)] *
                        (l.expert_down_scale.empty() ? 1.0f : l.expert_down_scale[size_t(e)]);
        const float* y = gathered_.data() + int64_t(route_rows_[size_t(t * K + r)]) * E;
        if (first)
          for (int64_t i = 0; i < E; ++i) o[i] = w * y[i];
        else
          for (int64_t i = 0; i < E; ++i) o[i] += w * y[i];
        first = false;
      }
      if (first) std::fill(o, o + E, 0.0f);
    }
  });
}

}  // namespace vela
