#pragma once
// The gated delta rule of Gated DeltaNet layers (Qwen3.5, Qwen3-Next): linear attention whose
// memory is a fixed-size matrix per value head, decayed and corrected by each token.
//
// Per value head h, with S the head's state ([d_k, d_v] in the paper's notation) and, for each
// token t, L2-normalised q_t and k_t (of the key head h reads), value v_t, log-decay g_t <= 0
// and write strength beta_t in (0, 1):
//   S   <- exp(g_t) * S
//   S   <- S + k_t (beta_t * (v_t - S^T k_t))^T
//   o_t  = S^T q_t / sqrt(d_k)
// Two forms compute it: the recurrence above, token by token (decode), and a chunked form for
// prompts (chunks of kDeltaChunk tokens: the chunk's interactions as small matrix products, the
// state carried from chunk to chunk), equal within f32 rounding.
//
// Storage: the state of one head is kept transposed, [d_v, d_k] (row j holds column j of S), so
// that S^T k and S^T q are d_v dot products over contiguous rows.
// Thread-safety: pure functions over caller-owned buffers; calls on different heads or different
// states may run concurrently.
#include <cstdint>
#include <vector>

namespace vela {

// Tokens per chunk of the chunked form.
inline constexpr int32_t kDeltaChunk = 64;

// One value head's inputs for n_tokens consecutive tokens of one sequence. Token t's vectors
// are at q + t * q_stride etc.; g and beta at g[t * gb_stride], beta[t * gb_stride].
struct DeltaRuleHead {
  const float* q = nullptr;     // [n_tokens, q_stride] row t: this head's [d_k] query (normalised)
  const float* k = nullptr;     // [n_tokens, k_stride] row t: [d_k] key (normalised)
  const float* v = nullptr;     // [n_tokens, v_stride] row t: [d_v] value
  const float* g = nullptr;     // [n_tokens, gb_stride] log-decay
  const float* beta = nullptr;  // [n_tokens, gb_stride] write strength
  int64_t q_stride = 0, k_stride = 0, v_stride = 0, gb_stride = 0;
  float* out = nullptr;  // [n_tokens, out_stride] row t: [d_v] output
  int64_t out_stride = 0;
  float* state = nullptr;  // [d_v, d_k] updated in place
};

// The recurrence, token by token. Reference for the chunked form, and the decode path. saves:
// null, or [n_tokens] where to save the state after each token (null entries: nowhere), e.g. a
// verification's speculative checkpoints.
void delta_rule_recurrent(const DeltaRuleHead& h, int32_t n_tokens, int32_t d_k, int32_t d_v,
                          float* const* saves = nullptr);

// Work space of one thread's chunked calls, sized once for the head dimensions.
struct DeltaChunkScratch {
  std::vector<float> buf;
  DeltaChunkScratch(int32_t d_k, int32_t d_v);
};

// The chunked form: the same outputs and final state as delta_rule_recurrent within f32
// rounding. Chunks start at the call's first token; a last partial chunk is handled as is.
void delta_rule_chunked(const DeltaRuleHead& h, int32_t n_tokens, int32_t d_k, int32_t d_v,
                        DeltaChunkScratch& scratch);

}  // namespace vela
