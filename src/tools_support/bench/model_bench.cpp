#include "tools_support/bench/model_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include "io/gguf.h"
#include "kernels/packed/packed_gemm.h"

namespace vela::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The thread pool may add ForwardOptions::n_threads; set it when this build has it.
template <class Options>
constexpr bool kHasThreads = requires(Options o) {
  o.n_threads = 1;
};

template <class Options>
void set_forward_threads(Options& o, int32_t n) {
  if constexpr (kHasThreads<Options>) o.n_threads = n;
}

const char* file_type_name(uint64_t ft) {
  switch (ft) {
    case 0:
      return "F32";
    case 1:
      return "F16";
    case 2:
      return "Q4_0";
    case 3:
      return "Q4_1";
    case 7:
      return "Q8_0";
    case 8:
      return "Q5_0";
    case 9:
      return "Q5_1";
    case 14:
      return "Q4_K_S";
    case 15:
      return "Q4_K_M";
    case 16:
      return "Q5_K_S";
    case 17:
      return "Q5_K_M";
    case 18:
      return "Q6_K";
    case 32:
      return "BF16";
    default:
      return nullptr;
  }
}

}  // namespace

bool forward_supports_threads() {
  return kHasThreads<ForwardOptions>;
}

ModelProfile profile_model(const Model& model, const std::string& path, uint64_t file_bytes) {
  ModelProfile p;
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  p.name = c.name.empty() ? std::filesystem::path(path).filename().string() : c.name;
  p.file_bytes = file_bytes;
  for (const GgufTensorInfo& t : model.gguf().tensors()) p.n_params += uint64_t(t.n_elements());
  std::map<GgmlType, uint64_t> bytes_by_type;
  // A token reads every dense matrix, and of a mixture of experts the router and the
  // n_expert_used experts it chooses: active parameters and bytes count those.
  const ModelConfig& whole = model.whole_config();
  const auto count = [&](const WeightMatrix& m, double share) {
    if (m.data == nullptr) return;
    p.block_matrix_params += uint64_t(double(m.n_rows * m.n_cols) * share);
    p.decode_bytes += uint64_t(double(m.n_rows * m.row_bytes) * share);
    bytes_by_type[m.type] += uint64_t(double(m.n_rows * m.row_bytes) * share);
  };
  const double expert_share =
      whole.moe() ? double(whole.n_expert_used) / double(whole.n_expert) : 0.0;
  for (const LayerWeights& l : w.layers) {
    // Whatever the mixer (attention, Gated DeltaNet, latent attention) and FFN (dense, or routed
    // experts beside a shared one): every matrix multiplied as a whole, the router, and latent
    // attention's per-head stacks, which every token's heads read.
    for (const WeightMatrix* m : l.matrices()) count(*m, 1.0);
    for (const WeightMatrix* m : {&l.router, &l.mla.k_b, &l.mla.v_b}) count(*m, 1.0);
    for (const ExpertWeights& e : l.experts)
      for (const WeightMatrix* m : {&e.gate, &e.up, &e.down}) count(*m, expert_share);
  }
  if (w.output.data != nullptr) {
    p.output_params = uint64_t(w.output.n_rows * w.output.n_cols);
    p.output_bytes = uint64_t(w.output.n_rows * w.output.row_bytes);
  }
  p.decode_bytes += p.output_bytes;
  // ModelBench's cache: f16 K/V, one state slot per sequence.
  const KvCacheConfig kc = model_cache_config(c, 1, 1, KvType::kF16, 1);
  p.kv_bytes_per_position = uint64_t(KvCache::bytes_per_block(kc));
  p.state_bytes = uint64_t(KvCache::bytes_per_state_slot(kc));
  GgmlType dominant = GgmlType::F32;
  uint64_t most = 0;
  for (const auto& [type, bytes] : bytes_by_type)
    if (bytes > most) most = bytes, dominant = type;
  p.int8_activations =
      dominant != GgmlType::F32 && dominant != GgmlType::F16 && dominant != GgmlType::BF16;
  p.bf16_weights = dominant == GgmlType::BF16;
  p.type_name = ggml_type_name(uint32_t(dominant));
  if (auto ft = model.gguf().get_uint("general.file_type"); ft && ft->has_value())
    if (const char* n = file_type_name(**ft)) p.type_name = n;
  return p;
}

ModelProfile per_rank_profile(const ModelProfile& rank0, const ModelProfile& whole,
                              int32_t rank0_layers, int32_t whole_layers, int32_t tensor_size) {
  ModelProfile p = rank0;
  if (rank0_layers > 0 && rank0_layers < whole_layers) {
    const double scale = double(whole_layers) / double(rank0_layers);
    p.block_matrix_params = uint64_t(double(rank0.block_matrix_params) * scale);
    p.kv_bytes_per_position = uint64_t(double(rank0.kv_bytes_per_position) * scale);
    p.decode_bytes = uint64_t(double(rank0.decode_bytes - rank0.output_bytes) * scale);
    p.output_params = rank0.output_params;
    p.output_bytes = rank0.output_bytes;
    if (p.output_bytes == 0) {
      const uint64_t t = uint64_t(std::max(tensor_size, 1));
      p.output_params = whole.output_params / t;
      p.output_bytes = whole.output_bytes / t;
    }
    p.decode_bytes += p.output_bytes;
  }
  return p;
}

CeilingKind prompt_ceiling(const ModelProfile& p, const Roofline& r) {
  if (p.int8_activations) return CeilingKind::kInt8Peak;
  // The widened BF16 kernel multiplies on the FMA units (packed_gemm.h: Bf16Kernel).
  if (p.bf16_weights && r.bf16_flops > 0 && selected_bf16_kernel() == Bf16Kernel::kDot)
    return CeilingKind::kBf16Peak;
  return CeilingKind::kFp32Peak;
}

double generation_bytes(const ModelProfile& p, int32_t n_depth, int32_t n_gen) {
  // Step k (0-based) attends n_depth + k + 1 positions.
  const double n = double(n_gen);
  const double positions = n * double(n_depth) + n * (n + 1) / 2;
  return n * double(p.decode_bytes + p.state_bytes) + positions * double(p.kv_bytes_per_position);
}

double prompt_flops(const ModelProfile& p, int32_t n_prompt, int32_t n_batch) {
  const int64_t passes = (int64_t(n_prompt) + n_batch - 1) / std::max(1, n_batch);
  return 2.0 *
         (double(p.block_matrix_params) * n_prompt + double(p.output_params) * double(passes));
}

ModelBench::ModelBench(std::shared_ptr<const Model> model, int32_t n_threads, int32_t n_batch,
                       int32_t max_prompt, int32_t max_gen, uint64_t seed,
                       std::shared_ptr<TensorParallel> group, int32_t max_depth)
    : model_(std::move(model)), max_depth_(std::max(max_depth, 0)) {
  const ModelConfig& c = model_->config();
  const int32_t max_context = max_depth_ + std::max({max_prompt, max_gen, 1});
  // Contexts are computed in passes of n_batch as well (not token by token when no pp test runs).
  n_batch_ = std::clamp(n_batch, 1, std::max({max_prompt, max_depth_, 1}));
  ForwardOptions fo;
  fo.max_batch_tokens = n_batch_;
  fo.max_logits = 1;
  fo.max_context = max_context;
  set_forward_threads(fo, n_threads);
  fo.tensor_parallel = std::move(group);
  forward_ = std::make_unique<DecoderForward>(model_, fo);

  // State slot 0 runs; slot 1 keeps the state at the end of a context (set_depth).
  const KvCacheConfig kc = model_cache_config(c, 16, (max_context + 15) / 16, KvType::kF16,
                                              /*n_state_slots=*/max_depth_ > 0 ? 2 : 1);
  cache_ = std::make_unique<KvCache>(kc);

  block_table_.resize(size_t(kc.n_blocks));
  for (int32_t i = 0; i < kc.n_blocks; ++i) block_table_[size_t(i)] = i;
  positions_.resize(size_t(max_context));
  tokens_.resize(size_t(max_context));
  uint64_t state = seed;
  for (int32_t i = 0; i < max_context; ++i) {
    positions_[size_t(i)] = i;
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // LCG: any ids will do
    tokens_[size_t(i)] = int32_t((state >> 33) % uint64_t(c.n_vocab));
  }
  seq_index_.assign(size_t(n_batch_), 0);
  logits_.resize(size_t(c.n_vocab));
}

Status ModelBench::pass(int32_t first, int32_t n) {
  const int32_t last = n - 1;
  ForwardBatch b;
  b.token_ids = std::span<const int32_t>(tokens_.data() + first, size_t(n));
  b.positions = std::span<const int32_t>(positions_.data() + first, size_t(n));
  b.seq_index = std::span<const int32_t>(seq_index_.data(), size_t(n));
  b.block_tables = block_table_;
  b.max_blocks_per_seq = int32_t(block_table_.size());
  b.logits_indices = std::span<const int32_t>(&last, 1);
  const int32_t state_slot = 0;  // its one sequence's, for a recurrent model
  if (model_->config().recurrent()) b.state_slots = std::span<const int32_t>(&state_slot, 1);
  return forward_->forward(b, *cache_, logits_);
}

Status ModelBench::warmup() {
  // Positions [0, n_batch) get the K/V the context has there (the same tokens from position 0),
  // and slot 0's state is replaced before any run after a context: the context stays intact.
  return pass(0, n_batch_);
}

void ModelBench::copy_state(int32_t from, int32_t to) {
  const KvCacheConfig& kc = cache_->config();
  for (int32_t layer = 0; layer < kc.n_state_layers; ++layer)
    std::copy_n(cache_->state(layer, from), kc.state_floats, cache_->state(layer, to));
}

void ModelBench::restore_context() {
  if (depth_ > 0 && model_->config().recurrent()) copy_state(1, 0);
}

Status ModelBench::set_depth(int32_t n_depth) {
  if (n_depth < 0 || n_depth > max_depth_)
    return make_error("context depth " + std::to_string(n_depth) + " out of range [0, " +
                      std::to_string(max_depth_) + "]");
  depth_ = 0;  // until the context is whole
  if (n_depth == 0) return {};
  int32_t p = n_depth >= filled_ ? filled_ : 0;
  if (p > 0 && model_->config().recurrent()) copy_state(1, 0);
  filled_ = 0;  // a failed pass leaves no usable context
  for (; p < n_depth; p += n_batch_)
    if (auto st = pass(p, std::min(n_batch_, n_depth - p)); !st) return st.error();
  if (model_->config().recurrent()) copy_state(0, 1);
  filled_ = depth_ = n_depth;
  return {};
}

Result<double> ModelBench::run_prompt(int32_t n_prompt) {
  if (n_prompt <= 0 || size_t(depth_ + n_prompt) > tokens_.size())
    return make_error("prompt length out of range");
  restore_context();
  const auto t0 = Clock::now();
  for (int32_t p = 0; p < n_prompt; p += n_batch_)
    if (auto st = pass(depth_ + p, std::min(n_batch_, n_prompt - p)); !st) return st.error();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Result<double> ModelBench::run_generation(int32_t n_gen, std::vector<double>* step_seconds) {
  if (n_gen <= 0 || size_t(depth_ + n_gen) > tokens_.size())
    return make_error("generation length out of range");
  restore_context();
  const auto t0 = Clock::now();
  auto step_start = t0;
  for (int32_t p = depth_; p < depth_ + n_gen; ++p) {
    if (auto st = pass(p, 1); !st) return st.error();
    if (step_seconds) {
      const auto now = Clock::now();
      step_seconds->push_back(std::chrono::duration<double>(now - step_start).count());
      step_start = now;
    }
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace vela::bench
