// The chunked form of the gated delta rule (flash-linear-attention's chunk_gated_delta_rule,
// llama.cpp's build_delta_net_chunking), for prompts.
//
// In a chunk of n tokens starting from state S0, with e_t = exp(g_t), G_t = g_0 + ... + g_t,
// gam_t = exp(G_t) and D[t][s] = exp(G_t - G_s) (s <= t), the recurrence unrolls to
//   S_t = gam_t S0 + sum_{s<=t} D[t][s] k_s u_s^T
//   u_t = beta_t (v_t - exp(g_t) S_{t-1}^T k_t)
//       = beta_t (v_t - gam_t S0^T k_t) - sum_{s<t} beta_t D[t][s] (k_t . k_s) u_s
// i.e. (I + A) U = rhs with A strictly lower triangular: forward substitution gives the corrected
// values U (the UT transform applied to rhs). Then
//   o_t   = scale (gam_t S0^T q_t + sum_{s<=t} D[t][s] (q_t . k_s) u_s)
//   S_new = gam_{n-1} S0 + sum_s D[n-1][s] k_s u_s^T.
// Every step is a row of a small matrix product (gemm_row below), whose inner loop runs along a
// contiguous row with its accumulators in registers.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>

#include "model/gated_delta_rule.h"

namespace vela {

namespace {

constexpr int32_t kC = kDeltaChunk;

// Widest accumulator row: 8 vector registers of AVX (16 of SSE), enough independent FMA chains
// to hide their latency.
#if defined(__AVX__)
constexpr int32_t kWide = 64;
#else
constexpr int32_t kWide = 32;
#endif

// c_out[0, W) = c_scale * c_in[0, W) + sum_{p < kc} a[p] * b[p * ldb + (0, W)]; c_in may be
// null (then 0) or equal to c_out. One output row: the W accumulators stay in registers while
// the p loop streams rows of b. Fixed W so the unrolled loop vectorizes at -O2 too; one row per
// call because GCC -O3 turns several-row tiles into a vectorized p loop (in-order reductions).
template <int32_t W>
inline void row_tile(int32_t kc, const float* a, const float* b, int64_t ldb, const float* c_in,
                     float c_scale, float* c_out) {
  float acc[W];
  if (c_in) {
#pragma GCC unroll 64
    for (int32_t l = 0; l < W; ++l) acc[l] = c_scale * c_in[l];
  } else {
#pragma GCC unroll 64
    for (int32_t l = 0; l < W; ++l) acc[l] = 0.0f;
  }
  for (int32_t p = 0; p < kc; ++p) {
    const float ap = a[p];
    const float* bp = b + p * ldb;
#pragma GCC unroll 64
    for (int32_t l = 0; l < W; ++l) acc[l] += ap * bp[l];
  }
#pragma GCC unroll 64
  for (int32_t l = 0; l < W; ++l) c_out[l] = acc[l];
}

// row_tile over n columns: the widest tiles first, then narrower ones, a scalar tail last.
void gemm_row(int32_t n, int32_t kc, const float* a, const float* b, int64_t ldb, const float* c_in,
              float c_scale, float* c_out) {
  auto in = [&](int32_t j) { return c_in ? c_in + j : nullptr; };
  int32_t j = 0;
  for (; j + kWide <= n; j += kWide) row_tile<kWide>(kc, a, b + j, ldb, in(j), c_scale, c_out + j);
  if constexpr (kWide > 32) {
    if (j + 32 <= n) {
      row_tile<32>(kc, a, b + j, ldb, in(j), c_scale, c_out + j);
      j += 32;
    }
  }
  if (j + 16 <= n) {
    row_tile<16>(kc, a, b + j, ldb, in(j), c_scale, c_out + j);
    j += 16;
  }
  if (j + 8 <= n) {
    row_tile<8>(kc, a, b + j, ldb, in(j), c_scale, c_out + j);
    j += 8;
  }
  for (; j < n; ++j) {
    float s = c_in ? c_scale * c_in[j] : 0.0f;
    for (int32_t p = 0; p < kc; ++p) s += a[p] * b[p * ldb + j];
    c_out[j] = s;
  }
}

// m rows: c[r] = c_scale * c[r] (when accumulating, else 0) + a[r] . B, with B [kc, n]. Column
// panel by panel, so that the panel of B (kc x kWide, 32 KiB at kc = 128) stays in L1 across
// the rows.
void gemm_rows(int32_t m, int32_t n, int32_t kc, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc, bool accumulate, float c_scale) {
  for (int32_t j = 0; j < n; j += kWide) {
    const int32_t w = std::min(kWide, n - j);
    for (int32_t r = 0; r < m; ++r) {
      float* cr = c + r * ldc + j;
      gemm_row(w, kc, a + r * lda, b + j, ldb, accumulate ? cr : nullptr, c_scale, cr);
    }
  }
}

// The narrowest single tile covering x <= kC columns: 8, 16, 32 or 64. A tile costs about the
// same whatever its width up to kWide (the p loop is bound by FMA latency below 8 vectors), so
// one tile over a padded row beats several narrower ones.
int32_t tile_cover(int32_t x) {
  int32_t w = 8;
  while (w < x) w *= 2;
  return w;
}

// Offsets into DeltaChunkScratch::buf, each rounded to 16 floats (64 bytes).
struct ChunkLayout {
  int64_t state, kq, kt, kk, qk, u, e, gam, drow, total;
  ChunkLayout(int32_t d_k, int32_t d_v) {
    int64_t at = 0;
    auto take = [&](int64_t n) {
      const int64_t off = at;
      at += (n + 15) & ~int64_t(15);
      return off;
    };
    state = take(int64_t(d_k) * d_v);
    kq = take(2 * int64_t(kC) * d_k);
    kt = take(int64_t(d_k) * kC);
    kk = take(int64_t(kC) * kC);
    qk = take(int64_t(kC) * kC);
    u = take(int64_t(kC) * d_v);
    e = take(kC);
    gam = take(kC);
    drow = take(kC);
    total = at;
  }
};

}  // namespace

DeltaChunkScratch::DeltaChunkScratch(int32_t d_k, int32_t d_v)
    : buf(size_t(ChunkLayout(d_k, d_v).total)) {}

void delta_rule_chunked(const DeltaRuleHead& h, int32_t n_tokens, int32_t d_k, int32_t d_v,
                        DeltaChunkScratch& scratch) {
  if (n_tokens <= 0) return;
  const ChunkLayout lay(d_k, d_v);
  assert(int64_t(scratch.buf.size()) >= lay.total);
  float* base = scratch.buf.data();
  // The state as in the paper, row i = key dim i, so that S^T x is a gemm_row along d_v.
  float* S = base + lay.state;    // [d_k, d_v]
  float* kq = base + lay.kq;      // [2C, d_k] the chunk's keys (rows [0, n)), then queries * scale
  float* kt = base + lay.kt;      // [d_k, nw] keys transposed (decay-weighted to the chunk end
                                  // before the state update)
  float* kk = base + lay.kk;      // [C, C] row t: -beta_t D[t][s] (k_t . k_s), s < t
  float* qk = base + lay.qk;      // [C, C] row t: D[t][s] scale (q_t . k_s), s <= t
  float* U = base + lay.u;        // [C, d_v] corrected values u_t
  float* e = base + lay.e;        // [C] exp(g_t)
  float* gam = base + lay.gam;    // [C] exp(G_t)
  float* drow = base + lay.drow;  // [C] row t of D, D[t][s] = exp(G_t - G_s)
  const float scale = 1.0f / std::sqrt(float(d_k));

  for (int32_t j = 0; j < d_v; ++j) {
    const float* src = h.state + int64_t(j) * d_k;
    for (int32_t i = 0; i < d_k; ++i) S[int64_t(i) * d_v + j] = src[i];
  }

  for (int32_t c0 = 0; c0 < n_tokens; c0 += kC) {
    const int32_t n = std::min(kC, n_tokens - c0);
    const int32_t nw = tile_cover(n);  // row stride of kt
    float* K = kq;                     // [n, d_k]
    float* Q = kq + int64_t(n) * d_k;  // [n, d_k]
    for (int32_t t = 0; t < n; ++t) {
      const float* k = h.k + (c0 + t) * h.k_stride;
      const float* q = h.q + (c0 + t) * h.q_stride;
      float* kr = K + int64_t(t) * d_k;
      float* qr = Q + int64_t(t) * d_k;
      for (int32_t i = 0; i < d_k; ++i) kr[i] = k[i];
      for (int32_t i = 0; i < d_k; ++i) qr[i] = q[i] * scale;
    }
    // The row stride nw is a runtime value: with a constant stride GCC -O3 vectorizes the tiles'
    // p loop (strided loads, in-order reductions), ~3x slower. Columns [n, nw) zero: the padded
    // tiles of the key products read them.
    for (int32_t i = 0; i < d_k; ++i) {
      float* row = kt + int64_t(i) * nw;
      for (int32_t t = 0; t < n; ++t) row[t] = K[int64_t(t) * d_k + i];
      for (int32_t t = n; t < nw; ++t) row[t] = 0.0f;
    }
    // Decays as products of the factors exp(g) <= 1, as the recurrence applies them: no exp of
    // a positive number, no overflow, and D[t][s] = exp(G_t - G_s) without cancellation in G.
    float run = 1.0f;
    for (int32_t t = 0; t < n; ++t) {
      e[t] = std::exp(h.g[(c0 + t) * h.gb_stride]);
      run *= e[t];
      gam[t] = run;
    }

    // The key-key and query-key interactions, decay-weighted; D built row by row.
    for (int32_t t = 0; t < n; ++t) {
      float* kk_row = kk + int64_t(t) * kC;
      float* qk_row = qk + int64_t(t) * kC;
      if (t > 0) gemm_row(tile_cover(t), d_k, K + int64_t(t) * d_k, kt, nw, nullptr, 0.0f, kk_row);
      gemm_row(tile_cover(t + 1), d_k, Q + int64_t(t) * d_k, kt, nw, nullptr, 0.0f, qk_row);
      for (int32_t s = 0; s < t; ++s) drow[s] *= e[t];
      drow[t] = 1.0f;
      const float nb = -h.beta[(c0 + t) * h.gb_stride];
      for (int32_t s = 0; s < t; ++s) kk_row[s] *= nb * drow[s];
      for (int32_t s = 0; s <= t; ++s) qk_row[s] *= drow[s];
    }

    // Forward substitution: u_t = beta_t (v_t - gam_t S0^T k_t) - sum_{s<t} A[t][s] u_s.
    gemm_rows(n, d_v, d_k, K, d_k, S, d_v, U, d_v, false, 0.0f);  // rows S0^T k_t
    for (int32_t t = 0; t < n; ++t) {
      float* u = U + int64_t(t) * d_v;
      const float* v = h.v + (c0 + t) * h.v_stride;
      const float b = h.beta[(c0 + t) * h.gb_stride];
      const float bg = b * gam[t];
      for (int32_t j = 0; j < d_v; ++j) u[j] = b * v[j] - bg * u[j];
      gemm_row(d_v, t, kk + int64_t(t) * kC, U, d_v, u, 1.0f, u);
    }

    // Outputs, before the state moves on: inter-chunk part, then the causal intra-chunk part.
    float* out = h.out + c0 * h.out_stride;
    gemm_rows(n, d_v, d_k, Q, d_k, S, d_v, out, h.out_stride, false, 0.0f);  // scale S0^T q_t
    for (int32_t t = 0; t < n; ++t) {
      float* o = out + t * h.out_stride;
      gemm_row(d_v, t + 1, qk + int64_t(t) * kC, U, d_v, o, gam[t], o);
    }

    // State: S = gam_{n-1} S + sum_s D[n-1][s] k_s u_s^T (drow now holds D[n-1]).
    for (int32_t i = 0; i < d_k; ++i) {
      float* row = kt + int64_t(i) * nw;
      for (int32_t s = 0; s < n; ++s) row[s] *= drow[s];
    }
    gemm_rows(d_k, d_v, n, kt, nw, U, d_v, S, d_v, true, gam[n - 1]);
  }

  for (int32_t j = 0; j < d_v; ++j) {
    float* dst = h.state + int64_t(j) * d_k;
    for (int32_t i = 0; i < d_k; ++i) dst[i] = S[int64_t(i) * d_v + j];
  }
}

}  // namespace vela
