#include "tools_support/model_shape.h"

namespace vela {

const std::vector<ModelShape>& known_shapes() {
  // Hyper-parameters of the published checkpoints' config files (mixtral-mini is a Mixtral
  // layout at TinyLlama's size, qwen35moe-mini Qwen3.5-35B-A3B's layers scaled down). The tiny
  // shapes keep row lengths multiples of 256 (all but tiny-qwen2, the 128-wide DeepSeek, gpt-oss
  // and GLM ones and the tiny Qwen3.5 DeltaNet outputs) or not so both K-quant paths get tested.
  // Packed by hand: clang-format would put every designated field on a line of its own.
  // clang-format off
  static const std::vector<ModelShape> shapes = {
      {.name = "tiny", .architecture = "llama", .n_embd = 256, .n_layer = 2, .n_head = 4,
       .n_head_kv = 2, .n_ff = 512, .n_vocab = 512, .n_ctx = 512},
      {.name = "tiny-qwen2", .architecture = "qwen2", .n_embd = 128, .n_layer = 2, .n_head = 4,
       .n_head_kv = 2, .n_ff = 256, .n_vocab = 512, .n_ctx = 512, .rope_freq_base = 1e6f,
       .rms_eps = 1e-6f, .tied_embeddings = true, .qkv_bias = true},
      // Head size 128 with 4 heads of a 256-wide model: q is 512 wide.
      {.name = "tiny-qwen3", .architecture = "qwen3", .n_embd = 256, .n_layer = 2, .n_head = 4,
       .n_head_kv = 2, .n_ff = 512, .n_vocab = 512, .n_ctx = 512, .rope_freq_base = 1e6f,
       .rms_eps = 1e-6f, .tied_embeddings = true, .head_size = 128,
       .qk_norm = QkNorm::kPerHead},
      {.name = "tiny-qwen3moe", .architecture = "qwen3moe", .n_embd = 256, .n_layer = 2,
       .n_head = 4, .n_head_kv = 2, .n_ff = 512, .n_vocab = 512, .n_ctx = 512,
       .rope_freq_base = 1e6f, .rms_eps = 1e-6f, .head_size = 64, .qk_norm = QkNorm::kPerHead,
       .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256},
      {.name = "tiny-olmoe", .architecture = "olmoe", .n_embd = 256, .n_layer = 2, .n_head = 4,
       .n_head_kv = 4, .n_ff = 256, .n_vocab = 512, .n_ctx = 512, .qk_norm = QkNorm::kWhole,
       .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256},
      {.name = "tiny-mixtral", .architecture = "llama", .n_embd = 256, .n_layer = 2, .n_head = 4,
       .n_head_kv = 2, .n_ff = 256, .n_vocab = 512, .n_ctx = 512, .rope_freq_base = 1e6f,
       .n_expert = 8, .n_expert_used = 2},
      // Gemma 2 alternates sliding (even) and global (odd) layers: 2 layers have one of each.
      {.name = "tiny-gemma2", .architecture = "gemma2", .n_embd = 256, .n_layer = 2, .n_head = 4,
       .n_head_kv = 2, .n_ff = 512, .n_vocab = 512, .n_ctx = 512, .rms_eps = 1e-6f,
       .tied_embeddings = true, .head_size = 64, .post_norms = true, .sliding_window = 8,
       .attn_softcap = 50.0f, .final_softcap = 30.0f},
      // Pattern 3: layers 0 and 1 slide, layer 2 is global.
      {.name = "tiny-gemma3", .architecture = "gemma3", .n_embd = 256, .n_layer = 3, .n_head = 4,
       .n_head_kv = 1, .n_ff = 512, .n_vocab = 512, .n_ctx = 512, .rope_freq_base = 1e6f,
       .rms_eps = 1e-6f, .tied_embeddings = true, .head_size = 128,
       .qk_norm = QkNorm::kPerHead, .post_norms = true, .sliding_window = 8,
       .sliding_window_pattern = 3, .rope_freq_base_swa = 10000.0f},
      // Gemma 4 at test size, as ../shared's tiny-gemma4: windowed (even) layers with 2 KV heads
      // of 32, global ones with 1 of 64 (a quarter of it turning), the last 2 layers reading
      // layers 0 and 1's K/V with a double-wide FFN, per-layer embeddings of 64.
      {.name = "tiny-gemma4", .architecture = "gemma4", .n_embd = 128, .n_layer = 4, .n_head = 4,
       .n_head_kv = 2, .n_ff = 192, .n_vocab = 512, .n_ctx = 2048, .rope_freq_base = 1e6f,
       .rms_eps = 1e-6f, .tied_embeddings = true, .head_size = 64,
       .qk_norm = QkNorm::kPerHead, .post_norms = true, .sliding_window = 8,
       .sliding_window_pattern = 2, .rope_freq_base_swa = 10000.0f, .final_softcap = 30.0f,
       .head_size_swa = 32, .n_head_kv_global = 1, .window_pattern_per_layer = true,
       .n_kv_shared = 2, .n_ff_kv_shared = 384, .n_embd_per_layer = 64,
       .layer_output_scale = true, .rope_freqs_rotated = 16},
      // Phi-3-mini's window (2047) is wider than the tiny context: every layer sees it all.
      {.name = "tiny-phi3", .architecture = "phi3", .n_embd = 256, .n_layer = 2, .n_head = 4,
       .n_head_kv = 4, .n_ff = 512, .n_vocab = 512, .n_ctx = 512, .fused_qkv = true,
       .fused_gate_up = true, .sliding_window = 2047},
      // Qwen3.5 at test size: three Gated DeltaNet layers, then one gated attention layer,
      // twice as many DeltaNet value heads as key heads, a quarter of each attention head
      // rotated; a multi-token-prediction block (gated attention) after them, as the checkpoints
      // carry (the MoE form's with experts).
      {.name = "tiny-qwen35", .architecture = "qwen35", .n_embd = 256, .n_layer = 4, .n_head = 4,
       .n_head_kv = 2, .n_ff = 512, .n_vocab = 512, .n_ctx = 512, .rope_freq_base = 1e7f,
       .rms_eps = 1e-6f, .tied_embeddings = true, .head_size = 64,
       .qk_norm = QkNorm::kPerHead, .rope_dim = 16, .rope_sections = {3, 3, 2, 0},
       .attn_output_gate = true, .ffn_norm_post_attention = true, .full_attention_interval = 4,
       .ssm_conv_kernel = 4, .ssm_k_heads = 2, .ssm_v_heads = 4, .ssm_head_dim = 32,
       .n_nextn = 1},
      {.name = "tiny-qwen35moe", .architecture = "qwen35moe", .n_embd = 256, .n_layer = 4,
       .n_head = 4, .n_head_kv = 2, .n_ff = 256, .n_vocab = 512, .n_ctx = 512,
       .rope_freq_base = 1e7f, .rms_eps = 1e-6f, .head_size = 64, .qk_norm = QkNorm::kPerHead,
       .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256, .rope_dim = 16,
       .rope_sections = {3, 3, 2, 0}, .attn_output_gate = true, .ffn_norm_post_attention = true,
       .full_attention_interval = 4, .ssm_conv_kernel = 4, .ssm_k_heads = 2, .ssm_v_heads = 4,
       .ssm_head_dim = 32, .n_ff_shexp = 256, .shexp_gate = true, .n_nextn = 1},
      {.name = "tinyllama-1.1b", .architecture = "llama", .n_embd = 2048, .n_layer = 22,
       .n_head = 32, .n_head_kv = 4, .n_ff = 5632, .n_vocab = 32000, .n_ctx = 2048},
      {.name = "qwen2-0.5b", .architecture = "qwen2", .n_embd = 896, .n_layer = 24, .n_head = 14,
       .n_head_kv = 2, .n_ff = 4864, .n_vocab = 151936, .n_ctx = 32768, .rope_freq_base = 1e6f,
       .rms_eps = 1e-6f, .tied_embeddings = true, .qkv_bias = true},
      {.name = "llama2-7b", .architecture = "llama", .n_embd = 4096, .n_layer = 32, .n_head = 32,
       .n_head_kv = 32, .n_ff = 11008, .n_vocab = 32000, .n_ctx = 4096},
      {.name = "llama3-8b", .architecture = "llama", .n_embd = 4096, .n_layer = 32, .n_head = 32,
       .n_head_kv = 8, .n_ff = 14336, .n_vocab = 128256, .n_ctx = 8192,
       .rope_freq_base = 500000.0f},
      {.name = "qwen3-0.6b", .architecture = "qwen3", .n_embd = 1024, .n_layer = 28, .n_head = 16,
       .n_head_kv = 8, .n_ff = 3072, .n_vocab = 151936, .n_ctx = 40960, .rope_freq_base = 1e6f,
       .rms_eps = 1e-6f, .tied_embeddings = true, .head_size = 128,
       .qk_norm = QkNorm::kPerHead},
      {.name = "olmoe-1b-7b", .architecture = "olmoe", .n_embd = 2048, .n_layer = 16, .n_head = 16,
       .n_head_kv = 16, .n_ff = 1024, .n_vocab = 50304, .n_ctx = 4096,
       .qk_norm = QkNorm::kWhole, .n_expert = 64, .n_expert_used = 8, .n_ff_exp = 1024},
      {.name = "mixtral-mini", .architecture = "llama", .n_embd = 2048, .n_layer = 16, .n_head = 32,
       .n_head_kv = 8, .n_ff = 5632, .n_vocab = 32000, .n_ctx = 32768, .rope_freq_base = 1e6f,
       .n_expert = 8, .n_expert_used = 2},
      // A Mixtral layout whose experts are nearly all of it (277M of 289M parameters, ~300 MB
      // in Q8_0): tests and benchmarks of experts left in the file mapping under a memory limit.
      {.name = "mixtral-experts", .architecture = "llama", .n_embd = 1024, .n_layer = 4,
       .n_head = 16, .n_head_kv = 4, .n_ff = 2816, .n_vocab = 512, .n_ctx = 512,
       .rope_freq_base = 1e6f, .n_expert = 8, .n_expert_used = 2},
      {.name = "gemma3-1b", .architecture = "gemma3", .n_embd = 1152, .n_layer = 26, .n_head = 4,
       .n_head_kv = 1, .n_ff = 6912, .n_vocab = 262144, .n_ctx = 32768, .rope_freq_base = 1e6f,
       .rms_eps = 1e-6f, .tied_embeddings = true, .head_size = 256,
       .qk_norm = QkNorm::kPerHead, .post_norms = true, .sliding_window = 512,
       .rope_freq_base_swa = 10000.0f},
      // Gemma 4 E2B's text model as the reference converter writes it (google/gemma-4-E2B
      // text_config): 35 layers, 4 windowed (512 tokens, heads of 256, RoPE base 1e4) then 1
      // global (heads of 512, a quarter turning at base 1e6), 8 query heads and 1 KV head in
      // both kinds (so head_count_kv stays one value); the last 20 layers read layers 13 and
      // 14's K/V and have a double-wide FFN (12288); per-layer embeddings of 256. No vision or
      // audio encoder: 4.63 B parameters, 2.35 B of them per_layer_token_embd.
      {.name = "gemma4-e2b", .architecture = "gemma4", .n_embd = 1536, .n_layer = 35,
       .n_head = 8, .n_head_kv = 1, .n_ff = 6144, .n_vocab = 262144, .n_ctx = 131072,
       .rope_freq_base = 1e6f, .rms_eps = 1e-6f, .tied_embeddings = true, .head_size = 512,
       .qk_norm = QkNorm::kPerHead, .post_norms = true, .sliding_window = 512,
       .sliding_window_pattern = 5, .rope_freq_base_swa = 10000.0f, .final_softcap = 30.0f,
       .head_size_swa = 256, .window_pattern_per_layer = true, .n_kv_shared = 20,
       .n_ff_kv_shared = 12288, .n_embd_per_layer = 256, .layer_output_scale = true,
       .rope_freqs_rotated = 128},
      {.name = "phi3-mini", .architecture = "phi3", .n_embd = 3072, .n_layer = 32, .n_head = 32,
       .n_head_kv = 32, .n_ff = 8192, .n_vocab = 32064, .n_ctx = 4096, .fused_qkv = true,
       .fused_gate_up = true, .sliding_window = 2047},
      // Qwen3.5-0.8B's text model with its multi-token-prediction layer (without the vision
      // encoder): 18 DeltaNet and 6 attention layers, 64 of each 256-wide head rotated, in
      // sections [11, 11, 10] of the multi-axis RoPE.
      {.name = "qwen35-0.8b", .architecture = "qwen35", .n_embd = 1024, .n_layer = 24,
       .n_head = 8, .n_head_kv = 2, .n_ff = 3584, .n_vocab = 248320, .n_ctx = 262144,
       .rope_freq_base = 1e7f, .rms_eps = 1e-6f, .tied_embeddings = true, .head_size = 256,
       .qk_norm = QkNorm::kPerHead, .rope_dim = 64, .rope_sections = {11, 11, 10, 0},
       .attn_output_gate = true, .ffn_norm_post_attention = true, .full_attention_interval = 4,
       .ssm_conv_kernel = 4, .ssm_k_heads = 16, .ssm_v_heads = 16, .ssm_head_dim = 128,
       .n_nextn = 1},
      // Qwen3.5-35B-A3B's layers at a size a small machine runs: its attention (16 heads, 2 KV
      // heads of 256) and DeltaNet (16 key, 32 value heads of 128) mixers as published, on a
      // 1024-wide residual stream (2048 published) of 24 layers (40), with 64 experts of 256
      // (256 of 512), 8 routed, beside a gated shared expert of 256 (512); its
      // multi-token-prediction layer as published.
      {.name = "qwen35moe-mini", .architecture = "qwen35moe", .n_embd = 1024, .n_layer = 24,
       .n_head = 16, .n_head_kv = 2, .n_ff = 256, .n_vocab = 248320, .n_ctx = 262144,
       .rope_freq_base = 1e7f, .rms_eps = 1e-6f, .head_size = 256, .qk_norm = QkNorm::kPerHead,
       .n_expert = 64, .n_expert_used = 8, .n_ff_exp = 256, .rope_dim = 64,
       .rope_sections = {11, 11, 10, 0}, .attn_output_gate = true,
       .ffn_norm_post_attention = true, .full_attention_interval = 4, .ssm_conv_kernel = 4,
       .ssm_k_heads = 16, .ssm_v_heads = 32, .ssm_head_dim = 128, .n_ff_shexp = 256,
       .shexp_gate = true, .n_nextn = 1},
      // DeepSeek-V3 at test size, as ../shared's tiny-deepseek2: latent attention with a q
      // bottleneck, one leading dense layer, sigmoid routing over 4 groups of 2 experts; then
      // the checkpoint's multi-token-prediction block, which that file leaves out (the reference
      // converter drops DeepSeek-V3's, keeps V3.2's).
      {.name = "tiny-deepseek2", .architecture = "deepseek2", .n_embd = 128, .n_layer = 3,
       .n_head = 4, .n_head_kv = 1, .n_ff = 256, .n_vocab = 512, .n_ctx = 1024, .rms_eps = 1e-6f,
       .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 64, .rope_dim = 16,
       .n_shared_experts = 1, .q_lora_rank = 96, .kv_lora_rank = 64, .mla_nope_dim = 32,
       .mla_v_dim = 32, .n_dense_lead = 1, .sigmoid_routing = true, .n_expert_groups = 4,
       .n_expert_groups_used = 2, .expert_weights_scale = 2.5f, .n_nextn = 1},
      // DeepSeek-V3's layers at a size a small machine runs: its latent attention per head (a
      // 1536 q bottleneck, 512 + 64 cached values, heads of 128 + 64 and values of 128) with 16
      // heads (128) on a 2048-wide stream (7168) of 12 layers (61), the first dense; 64 experts
      // of 512 (256 of 2048) in 8 groups, 4 of them used, 8 experts routed, one shared expert;
      // the multi-token-prediction block (an MoE layer) as published.
      {.name = "deepseek3-mini", .architecture = "deepseek2", .n_embd = 2048, .n_layer = 12,
       .n_head = 16, .n_head_kv = 1, .n_ff = 5632, .n_vocab = 129280, .n_ctx = 163840,
       .rms_eps = 1e-6f, .n_expert = 64, .n_expert_used = 8, .n_ff_exp = 512, .rope_dim = 64,
       .n_shared_experts = 1, .q_lora_rank = 1536, .kv_lora_rank = 512, .mla_nope_dim = 128,
       .mla_v_dim = 128, .n_dense_lead = 1, .sigmoid_routing = true, .n_expert_groups = 8,
       .n_expert_groups_used = 4, .expert_weights_scale = 2.5f, .n_nextn = 1},
      // gpt-oss at test size, as ../shared's tiny-openai-moe: sliding (even) and global layers,
      // sinks, q/k/v/o biases, YaRN, 8 experts of 64 with biases, 2 routed.
      {.name = "tiny-gpt-oss", .architecture = "gpt-oss", .n_embd = 128, .n_layer = 3,
       .n_head = 4, .n_head_kv = 2, .n_ff = 64, .n_vocab = 512, .n_ctx = 1024,
       .rope_freq_base = 150000.0f, .qkv_bias = true, .head_size = 64, .n_expert = 8,
       .n_expert_used = 2, .n_ff_exp = 64, .sliding_window = 8,
       .ffn_norm_post_attention = true, .attn_sinks = true, .output_bias = true,
       .expert_biases = true, .yarn_factor = 4.0f, .yarn_original_context = 256},
      // gpt-oss-20b's layers as published (2880 wide, 64 query and 8 KV heads of 64, 32 experts
      // of 2880, 4 routed, a 128-token window on even layers, YaRN 32 over 4096) but 8 layers of
      // 24: about 4.8 GB in MXFP4_MOE, for a small machine.
      {.name = "gpt-oss-20b-mini", .architecture = "gpt-oss", .n_embd = 2880, .n_layer = 8,
       .n_head = 64, .n_head_kv = 8, .n_ff = 2880, .n_vocab = 201088, .n_ctx = 131072,
       .rope_freq_base = 150000.0f, .qkv_bias = true, .head_size = 64, .n_expert = 32,
       .n_expert_used = 4, .n_ff_exp = 2880, .sliding_window = 128,
       .ffn_norm_post_attention = true, .attn_sinks = true, .output_bias = true,
       .expert_biases = true, .yarn_factor = 32.0f, .yarn_original_context = 4096},
      // GLM-4.5 at test size, as ../shared's tiny-glm4moe: q/k/v biases, q/k norms per head of
      // 64 (GLM-4.5's; the Air has none), half of each head rotated, one leading dense layer, 4
      // sigmoid-routed experts of 64 beside a shared one, and the multi-token-prediction block.
      {.name = "tiny-glm4moe", .architecture = "glm4moe", .n_embd = 128, .n_layer = 3,
       .n_head = 4, .n_head_kv = 2, .n_ff = 256, .n_vocab = 512, .n_ctx = 2048,
       .rope_freq_base = 1e6f, .qkv_bias = true, .head_size = 64, .qk_norm = QkNorm::kPerHead,
       .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 64, .rope_dim = 32,
       .ffn_norm_post_attention = true, .n_shared_experts = 1, .n_dense_lead = 1,
       .sigmoid_routing = true, .expert_weights_scale = 2.5f, .n_nextn = 1},
      // GLM-4.5-Air's layers at a size a small machine runs: heads of 128 with half of each
      // rotated, q/k/v biases and no q/k norms as published, 48 query and 4 KV heads (96 and 8)
      // on a 2048-wide stream (4096) of 8 layers (46), the first dense; 32 experts of 1408 (128),
      // 8 routed by sigmoid scores with a selection bias, beside one shared expert; the
      // multi-token-prediction block as published.
      {.name = "glm4.5-air-mini", .architecture = "glm4moe", .n_embd = 2048, .n_layer = 8,
       .n_head = 48, .n_head_kv = 4, .n_ff = 5472, .n_vocab = 151552, .n_ctx = 131072,
       .rope_freq_base = 1e6f, .qkv_bias = true, .head_size = 128, .n_expert = 32,
       .n_expert_used = 8, .n_ff_exp = 1408, .rope_dim = 64, .ffn_norm_post_attention = true,
       .n_shared_experts = 1, .n_dense_lead = 1, .sigmoid_routing = true,
       .expert_weights_scale = 1.0f, .n_nextn = 1},
  };
  // clang-format on
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

std::string shape_problem(const ModelShape& s) {
  if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_ff <= 0 ||
      s.head_size < 0 || s.n_ff_exp < 0 || s.sliding_window < 0 || s.sliding_window_pattern < 0)
    return "a size is not positive";
  if (s.head_size == 0 && s.n_embd % s.n_head != 0)
    return "n_head does not divide n_embd (give an explicit head size)";
  if (s.n_head % s.n_head_kv != 0) return "n_head_kv does not divide n_head";
  if (s.n_expert < 0 || (s.n_expert > 0 && (s.n_expert_used <= 0 || s.n_expert_used > s.n_expert)))
    return "expert_used_count must be in [1, expert_count]";
  if (s.n_expert == 0 && (s.n_expert_used != 0 || s.n_ff_exp != 0))
    return "expert fields without experts";
  if (s.sliding_window_pattern > 0 && s.sliding_window == 0)
    return "a sliding-window pattern without a window";
  if (s.rope_dim < 0 || s.rope_dim % 2 != 0 || (!s.latent_attention() && s.rope_dim > s.head_dim()))
    return "rope_dim must be even and at most the head size";
  for (int32_t pairs : s.rope_sections)
    if (pairs < 0) return "a RoPE section is negative";
  if (s.full_attention_interval < 0 || s.ssm_conv_kernel < 0 || s.ssm_k_heads < 0 ||
      s.ssm_v_heads < 0 || s.ssm_head_dim < 0 || s.n_ff_shexp < 0)
    return "a size is not positive";
  const bool ssm =
      s.ssm_conv_kernel > 0 || s.ssm_k_heads > 0 || s.ssm_v_heads > 0 || s.ssm_head_dim > 0;
  if (s.hybrid() != ssm) return "DeltaNet geometry and full_attention_interval go together";
  if (s.hybrid()) {
    if (s.ssm_conv_kernel < 2 || s.ssm_k_heads == 0 || s.ssm_v_heads == 0 || s.ssm_head_dim == 0)
      return "the DeltaNet geometry needs a kernel of 2 or more taps and positive head counts";
    if (s.ssm_v_heads % s.ssm_k_heads != 0) return "ssm_k_heads does not divide ssm_v_heads";
  }
  if ((s.n_ff_shexp > 0 || s.n_shared_experts > 0) && s.n_expert == 0)
    return "a shared expert without experts";
  if (s.n_ff_shexp > 0 && s.n_shared_experts > 0)
    return "a shared expert's width is n_ff_shexp or n_shared_experts experts, not both";
  if (s.q_lora_rank < 0 || s.kv_lora_rank < 0 || s.mla_nope_dim < 0 || s.mla_v_dim < 0 ||
      s.n_dense_lead < 0 || s.n_shared_experts < 0 || s.n_expert_groups < 0 ||
      s.n_expert_groups_used < 0 || s.expert_weights_scale < 0)
    return "a size is not positive";
  if (s.latent_attention() &&
      (s.mla_nope_dim == 0 || s.mla_v_dim == 0 || s.rope_dim == 0 || s.hybrid()))
    return "latent attention needs its nope, value and rope sizes, and no DeltaNet layers";
  if (!s.latent_attention() && (s.q_lora_rank > 0 || s.mla_nope_dim > 0 || s.mla_v_dim > 0))
    return "latent-attention sizes without kv_lora_rank";
  if (s.n_dense_lead > s.n_layer) return "more leading dense layers than layers";
  if (s.n_expert_groups > 0 &&
      (s.n_expert % s.n_expert_groups != 0 || s.n_expert_groups_used > s.n_expert_groups))
    return "expert groups must divide the experts, and the used groups be among them";
  if (s.shexp_gate && s.n_ff_shexp == 0) return "a shared-expert gate without a shared expert";
  if ((s.expert_biases && s.n_expert == 0) || s.yarn_factor < 0 || s.yarn_original_context < 0 ||
      (s.yarn_factor > 0) != (s.yarn_original_context > 0))
    return "expert biases need experts; YaRN needs both its factor and original context";
  if (s.n_nextn < 0) return "a size is not positive";
  if (s.ffn_norm_post_attention && s.post_norms)
    return "post_attention_norm cannot be both the FFN's norm and a post-norm";
  if (s.head_size_swa < 0 || s.n_head_kv_global < 0 || s.n_kv_shared < 0 || s.n_ff_kv_shared < 0 ||
      s.n_embd_per_layer < 0 || s.rope_freqs_rotated < 0)
    return "a size is not positive";
  if ((s.head_size_swa > 0 || s.n_head_kv_global > 0 || s.window_pattern_per_layer) &&
      s.sliding_window_pattern == 0)
    return "per-layer window geometry needs a sliding-window pattern";
  if (s.head_size_swa % 2 != 0) return "head_size_swa must be even";
  if (s.n_head_kv_global > 0 && s.n_head % s.n_head_kv_global != 0)
    return "n_head_kv_global does not divide n_head";
  if (s.rope_freqs_rotated % 2 != 0 || s.rope_freqs_rotated > s.head_dim())
    return "rope_freqs_rotated must be even and at most the head size";
  if (s.n_kv_shared > 0) {
    if (s.hybrid() || s.latent_attention() || s.n_nextn > 0)
      return "KV sharing needs plain attention layers";
    // Each sharing layer reads the last earlier layer of its kind that keeps K/V.
    const int32_t first = s.n_layer - s.n_kv_shared;
    for (int32_t i = first; i < s.n_layer; ++i) {
      int32_t j = first - 1;
      while (j >= 0 && s.windowed_layer(j) != s.windowed_layer(i)) --j;
      if (j < 0)
        return "layer " + std::to_string(i) + " shares K/V with no earlier layer of its kind";
    }
  }
  return "";
}

int64_t TensorSpec::n_rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < ne.size(); ++i) n *= ne[i];
  return n;
}

std::vector<TensorSpec> model_tensors(const ModelShape& s, int32_t n_vocab) {
  const int64_t embd = s.n_embd, ff_exp = s.expert_ff(), n_exp = s.n_expert,
                per_layer = s.n_embd_per_layer, all_per_layer = int64_t(s.n_layer) * per_layer;
  std::vector<TensorSpec> t;
  t.push_back({"token_embd.weight", {embd, n_vocab}, TensorKind::kTokenEmbd, -1});
  t.push_back({"output_norm.weight", {embd}, TensorKind::kOutputNorm, -1});
  if (!s.tied_embeddings) t.push_back({"output.weight", {embd, n_vocab}, TensorKind::kOutput, -1});
  if (s.rope_freqs_rotated > 0)
    t.push_back({"rope_freqs.weight", {s.head_dim() / 2}, TensorKind::kRopeFreqs, -1});
  if (per_layer > 0) {
    t.push_back(
        {"per_layer_token_embd.weight", {all_per_layer, n_vocab}, TensorKind::kTokenEmbd, -1});
    t.push_back({"per_layer_model_proj.weight", {embd, all_per_layer}, TensorKind::kMatrix, -1});
    t.push_back({"per_layer_proj_norm.weight", {per_layer}, TensorKind::kNorm, -1});
  }
  // The decoder's layers, then the multi-token-prediction blocks (delta_net_layer and moe_layer
  // give those theirs).
  for (int32_t i = 0; i < s.n_blocks(); ++i) {
    // This layer's geometry (the model's but in Gemma 4).
    const int64_t head = s.layer_head_dim(i), q_dim = int64_t(s.n_head) * head,
                  kv_dim = int64_t(s.layer_head_kv(i)) * head, ff = s.layer_ff(i);
    const bool own_kv = !s.kv_shared_layer(i);
    const std::string p = "blk." + std::to_string(i) + ".";
    const auto add = [&](const std::string& name, std::vector<int64_t> ne, TensorKind kind) {
      t.push_back({p + name, std::move(ne), kind, i});
    };
    add("attn_norm.weight", {embd}, TensorKind::kNorm);
    if (s.ffn_norm_post_attention) add("post_attention_norm.weight", {embd}, TensorKind::kNorm);
    if (s.latent_attention()) {
      const int64_t heads = s.n_head, key = int64_t(s.mla_nope_dim) + s.rope_dim,
                    lora = s.kv_lora_rank;
      if (s.q_lora_rank > 0) {
        add("attn_q_a_norm.weight", {s.q_lora_rank}, TensorKind::kNorm);
        add("attn_kv_a_norm.weight", {lora}, TensorKind::kNorm);
        add("attn_q_a.weight", {embd, s.q_lora_rank}, TensorKind::kMatrix);
        add("attn_q_b.weight", {s.q_lora_rank, heads * key}, TensorKind::kMatrix);
      } else {
        add("attn_kv_a_norm.weight", {lora}, TensorKind::kNorm);
        add("attn_q.weight", {embd, heads * key}, TensorKind::kMatrix);
      }
      add("attn_kv_a_mqa.weight", {embd, lora + s.rope_dim}, TensorKind::kMatrix);
      add("attn_k_b.weight", {s.mla_nope_dim, lora, heads}, TensorKind::kMatrix);
      add("attn_v_b.weight", {lora, s.mla_v_dim, heads}, TensorKind::kMatrix);
      add("attn_output.weight", {heads * s.mla_v_dim, embd}, TensorKind::kMatrix);
    } else if (s.delta_net_layer(i)) {
      const int64_t channels = s.ssm_conv_channels(), value_dim = s.ssm_value_dim(),
                    v_heads = s.ssm_v_heads;
      add("attn_qkv.weight", {embd, channels}, TensorKind::kMatrix);  // rows q, k, v
      add("attn_gate.weight", {embd, value_dim}, TensorKind::kMatrix);
      add("ssm_conv1d.weight", {s.ssm_conv_kernel, channels}, TensorKind::kConv);
      add("ssm_dt.bias", {v_heads}, TensorKind::kBias);
      add("ssm_a", {v_heads}, TensorKind::kDecay);  // the converters' name has no .weight
      add("ssm_beta.weight", {embd, v_heads}, TensorKind::kMatrix);
      add("ssm_alpha.weight", {embd, v_heads}, TensorKind::kMatrix);
      add("ssm_norm.weight", {s.ssm_head_dim}, TensorKind::kNorm);
      add("ssm_out.weight", {value_dim, embd}, TensorKind::kMatrix);
    } else if (s.fused_qkv) {
      add("attn_qkv.weight", {embd, q_dim + 2 * kv_dim}, TensorKind::kMatrix);
    } else {
      add("attn_q.weight", {embd, s.attn_output_gate ? 2 * q_dim : q_dim}, TensorKind::kMatrix);
      if (s.qkv_bias) add("attn_q.bias", {q_dim}, TensorKind::kBias);
      if (own_kv) {
        add("attn_k.weight", {embd, kv_dim}, TensorKind::kMatrix);
        if (s.qkv_bias) add("attn_k.bias", {kv_dim}, TensorKind::kBias);
        add("attn_v.weight", {embd, kv_dim}, TensorKind::kMatrix);
        if (s.qkv_bias) add("attn_v.bias", {kv_dim}, TensorKind::kBias);
      }
    }
    if (!s.delta_net_layer(i) && !s.latent_attention()) {
      add("attn_output.weight", {q_dim, embd}, TensorKind::kMatrix);
      if (s.output_bias) add("attn_output.bias", {embd}, TensorKind::kBias);
      if (s.attn_sinks) add("attn_sinks.weight", {s.n_head}, TensorKind::kBias);
      if (s.qk_norm != QkNorm::kNone) {
        const bool full = s.qk_norm == QkNorm::kWhole;
        add("attn_q_norm.weight", {full ? q_dim : head}, TensorKind::kNorm);
        if (own_kv) add("attn_k_norm.weight", {full ? kv_dim : head}, TensorKind::kNorm);
      }
    }
    if (s.post_norms) add("post_attention_norm.weight", {embd}, TensorKind::kNorm);
    if (s.layer_output_scale) add("layer_output_scale.weight", {1}, TensorKind::kScale);
    if (!s.ffn_norm_post_attention) add("ffn_norm.weight", {embd}, TensorKind::kNorm);
    if (s.moe_layer(i)) {
      add("ffn_gate_inp.weight", {embd, n_exp}, TensorKind::kMatrix);
      if (s.expert_biases) add("ffn_gate_inp.bias", {n_exp}, TensorKind::kBias);
      if (s.sigmoid_routing) add("exp_probs_b.bias", {n_exp}, TensorKind::kBias);
      add("ffn_gate_exps.weight", {embd, ff_exp, n_exp}, TensorKind::kMatrix);
      if (s.expert_biases) add("ffn_gate_exps.bias", {ff_exp, n_exp}, TensorKind::kBias);
      add("ffn_up_exps.weight", {embd, ff_exp, n_exp}, TensorKind::kMatrix);
      if (s.expert_biases) add("ffn_up_exps.bias", {ff_exp, n_exp}, TensorKind::kBias);
      add("ffn_down_exps.weight", {ff_exp, embd, n_exp}, TensorKind::kMatrix);
      if (s.expert_biases) add("ffn_down_exps.bias", {embd, n_exp}, TensorKind::kBias);
      if (const int64_t sff = s.shared_expert_ff(); sff > 0) {
        if (s.shexp_gate) add("ffn_gate_inp_shexp.weight", {embd}, TensorKind::kBias);
        add("ffn_gate_shexp.weight", {embd, sff}, TensorKind::kMatrix);
        add("ffn_up_shexp.weight", {embd, sff}, TensorKind::kMatrix);
        add("ffn_down_shexp.weight", {sff, embd}, TensorKind::kMatrix);
      }
    } else if (s.fused_gate_up) {
      add("ffn_up.weight", {embd, 2 * ff}, TensorKind::kMatrix);
      add("ffn_down.weight", {ff, embd}, TensorKind::kMatrix);
    } else {
      add("ffn_gate.weight", {embd, ff}, TensorKind::kMatrix);
      add("ffn_up.weight", {embd, ff}, TensorKind::kMatrix);
      add("ffn_down.weight", {ff, embd}, TensorKind::kMatrix);
    }
    if (s.post_norms) add("post_ffw_norm.weight", {embd}, TensorKind::kNorm);
    if (per_layer > 0) {
      add("inp_gate.weight", {embd, per_layer}, TensorKind::kMatrix);
      add("proj.weight", {per_layer, embd}, TensorKind::kMatrix);
      add("post_norm.weight", {embd}, TensorKind::kNorm);
    }
    if (i >= s.n_layer) {
      // eh_proj's row is [enorm(embedding) | hnorm(hidden state)]; shared_head_norm is the
      // block's output norm before the model's head.
      add("nextn.eh_proj.weight", {2 * embd, embd}, TensorKind::kMatrix);
      add("nextn.enorm.weight", {embd}, TensorKind::kNorm);
      add("nextn.hnorm.weight", {embd}, TensorKind::kNorm);
      add("nextn.shared_head_norm.weight", {embd}, TensorKind::kNorm);
    }
  }
  return t;
}

}  // namespace vela
