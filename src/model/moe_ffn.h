#pragma once
// The mixture-of-experts feed-forward block on the CPU. Per pass and layer: router logits in f32,
// each token's top-k experts from their scores (route_experts), the batch's tokens grouped by
// expert, and each
// chosen expert's gate/up/down matrices multiplied once for all of its tokens (one quantized
// matmul per matrix over that expert's rows); experts no token chose are never touched, so their
// pages of the file mapping are never read. All experts' products of a stage share one parallel
// loop split by (expert, rows), so both cores stay busy for one token and for 512.
//
// Every output row is one token's weighted sum over its own experts, in rank order, of matmul
// rows that do not depend on the other rows of the product: a token's result does not depend on
// what else is in the batch.
// Thread-safety: one MoeFeedForward runs one layer at a time (it owns the work buffers); owned by
// one DecoderForward.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/matmul.h"
#include "model/activation_observer.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace vela {

// One token's routing: the k experts with the highest router logits (ties: the lower expert id
// first), in that order, and their softmax probabilities over all n_expert logits, rescaled to
// sum 1 when renormalize.
// logits: [n_expert]; ids, weights: [k]
void route_top_k(const float* logits, int32_t n_expert, int32_t k, bool renormalize, int32_t* ids,
                 float* weights);

// How a token's experts are chosen and weighed (the model's routing keys, model_config.h).
struct ExpertRouting {
  ExpertGating gating = ExpertGating::kSoftmax;
  bool renormalize = true;  // the chosen experts' weights rescaled to sum 1
  float scale = 1.0f;       // the weights times this, after renormalising
  // Experts in n_groups equal groups of consecutive ids; a token chooses among the n_groups_used
  // groups whose two highest selection scores sum highest. 1 = no groups.
  int32_t n_groups = 1;
  int32_t n_groups_used = 1;
};

// One token's routing. Scores: the softmax of the logits over all experts, each logit's
// sigmoid, or (kSoftmaxOfChosen) the logits themselves. Choice: by score + bias (selection only;
// bias null = none), within the chosen groups, the k highest (ties: the lower expert id; groups
// likewise), in that order. Weights: the chosen experts' scores without the bias (kSoftmaxOfChosen:
// the softmax over those k), rescaled to sum 1 when renormalize (the sum taken at least
// 2^-14, as the reference engine does), times scale. Softmax routing without bias, groups or
// scale is route_top_k's.
// logits: [n_expert]; bias: [n_expert] or null; ids, weights: [k]
void route_experts(const float* logits, int32_t n_expert, int32_t k, const ExpertRouting& routing,
                   const float* bias, int32_t* ids, float* weights);

class MoeFeedForward {
 public:
  // Buffers sized once for max_tokens tokens of this model.
  MoeFeedForward(const Model& model, int32_t max_tokens);

  // out[t] = sum over token t's experts e (rank order) of weight(t, e) * FFN_e(xn[t]); on a
  // tensor-parallel rank, over those of its own experts only (the ranks' outputs add up to the
  // whole sum).
  // xn, out: [n_tokens, n_embd]. Element-wise loops below min_work and products below
  // min_parallel_work (< 0: MatmulSplit's default) stay on the calling thread.
  // router_in: [n_tokens, n_embd] the router's input when it is not xn (gemma4), or null. Each
  // expert's output is scaled by its layer.expert_down_scale entry, where the layer has one.
  void run(const LayerWeights& layer, int32_t layer_index, const float* xn, int64_t n_tokens,
           ThreadPool& pool, int64_t min_work, int64_t min_parallel_work, float* out,
           const float* router_in = nullptr);

  // Since construction, per [layer, expert]: how many runs multiplied the expert's matrices, and
  // how many tokens were routed to it. [n_layer * n_expert]
  std::span<const int64_t> expert_runs() const { return expert_runs_; }
  std::span<const int64_t> expert_tokens() const { return expert_tokens_; }

  // Receives the router's input and each chosen expert's gathered rows (null: none).
  void set_observer(ActivationObserver* observer) { observer_ = observer; }

 private:
  // Activations of each chosen expert's rows for one matrix kind, side by side in one buffer.
  void convert_per_expert(const std::vector<const WeightMatrix*>& w, const float* x, int64_t n_cols,
                          MatmulScratch& buffer, ThreadPool& pool, int64_t min_work);

  const ModelConfig& config_;
  ExpertRouting routing_;
  int32_t own_begin_ = 0, own_end_ = 0;  // the experts this model holds (all but on a TP rank)
  FfnActivation activation_;
  MatmulSplit split_;

  std::vector<float> router_logits_;    // [T, n_expert]
  std::vector<int32_t> route_ids_;      // [T, k] chosen experts of each token, rank order
  std::vector<float> route_weights_;    // [T, k]
  std::vector<int32_t> route_rows_;     // [T, k] gathered row of each (token, rank)
  std::vector<int32_t> expert_count_;   // [n_expert] tokens per expert this step
  std::vector<int32_t> expert_offset_;  // [n_expert] first gathered row of each expert
  std::vector<int32_t> expert_fill_;    // [n_expert] rows placed so far while gathering
  std::vector<int32_t> chosen_;         // [<= n_expert] experts with tokens this step, by id
  std::vector<float> gathered_;         // [T * k, n_embd] inputs by expert; then the down outputs
  std::vector<float> gate_;             // [T * k, n_ff_expert]
  std::vector<float> up_;               // [T * k, n_ff_expert]
  MatmulScratch act_gate_, act_up_, act_down_;            // per-expert activations
  std::vector<QuantizedActivations> acts_;                // [n_expert] of the current matrix kind
  std::vector<const WeightMatrix*> gates_, ups_, downs_;  // [chosen] this step's matrices
  std::vector<int64_t> expert_runs_;                      // [n_layer * n_expert]
  std::vector<int64_t> expert_tokens_;                    // [n_layer * n_expert]
  ActivationObserver* observer_ = nullptr;
};

}  // namespace vela
