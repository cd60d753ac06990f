// `vela info MODEL`: the GGUF header, metadata and tensor table, and the model's configuration.
#include <cstdio>
#include <map>
#include <string>

#include "cli_args.h"
#include "commands.h"
#include "io/gguf.h"
#include "model/model_config.h"

namespace vela::cli {

int run_info(int argc, char** argv) {
  Args args("info", "MODEL.gguf",
            {{"no-tensors", 0, "", "do not list the tensors"},
             {"max-items", 0, "N", "array items shown per metadata value (default 8)"}});
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  if (args.positional().size() != 1) {
    std::fprintf(stderr, "vela info: expected exactly one model file (see --help)\n");
    return 2;
  }
  auto max_items = args.get_int("max-items", 8, 0, 1 << 20);
  if (!max_items) {
    std::fprintf(stderr, "%s\n", max_items.message().c_str());
    return 2;
  }
  auto file = GgufFile::open(args.positional()[0]);
  if (!file) {
    std::fprintf(stderr, "vela info: %s\n", file.message().c_str());
    return 1;
  }
  const GgufFile& g = *file;
  std::printf("file: %s\nGGUF version: %u\nsize: %zu bytes\nalignment: %llu\ndata offset: %llu\n",
              args.positional()[0].c_str(), g.version(), g.file_size(),
              (unsigned long long)g.alignment(), (unsigned long long)g.data_offset());
  std::printf("\nmetadata (%zu keys):\n", g.metadata().size());
  for (const auto& [key, value] : g.metadata())
    std::printf("  %-48.*s %-4s %s\n", int(key.size()), key.data(),
                std::string(gguf_value_type_name(value.type)).c_str(),
                value.to_string(size_t(*max_items)).c_str());

  uint64_t total_bytes = 0, total_elems = 0;
  for (const auto& t : g.tensors()) {
    total_bytes += t.n_bytes;
    total_elems += uint64_t(t.n_elements());
  }
  std::printf("\ntensors: %zu, %llu parameters, %.2f MiB\n", g.tensors().size(),
              (unsigned long long)total_elems, double(total_bytes) / (1024.0 * 1024.0));
  // Files mix types (the K and IQ mixes): what each type holds, by type number.
  struct TypeShare {
    int tensors = 0;
    uint64_t bytes = 0, elements = 0;
  };
  std::map<uint32_t, TypeShare> by_type;
  for (const auto& t : g.tensors()) {
    TypeShare& share = by_type[t.type];
    ++share.tensors;
    share.bytes += t.n_bytes;
    share.elements += uint64_t(t.n_elements());
  }
  for (const auto& [type, share] : by_type)
    std::printf("  %-8s %4d tensors, %10.2f MiB (%5.1f%% of bytes), %.3f bits per weight\n",
                ggml_type_name(type).c_str(), share.tensors,
                double(share.bytes) / (1024.0 * 1024.0),
                total_bytes ? 100.0 * double(share.bytes) / double(total_bytes) : 0.0,
                share.elements ? 8.0 * double(share.bytes) / double(share.elements) : 0.0);
  if (!args.has("no-tensors")) {
    for (const auto& t : g.tensors()) {
      std::string shape;
      for (uint32_t d = 0; d < t.n_dims; ++d) shape += (d ? " x " : "") + std::to_string(t.ne[d]);
      std::printf("  %-40.*s %-6s [%s] offset %llu, %llu bytes\n", int(t.name.size()),
                  t.name.data(), ggml_type_name(t.type).c_str(), shape.c_str(),
                  (unsigned long long)t.offset, (unsigned long long)t.n_bytes);
    }
  }

  auto config = ModelConfig::from_gguf(g);
  if (!config) {
    std::printf("\nmodel: not loadable as a model (%s)\n", config.message().c_str());
    return 0;
  }
  const ModelConfig& c = *config;
  const ArchDescription& d = *c.arch;
  std::printf(
      "\nmodel: %s%s%s\n  n_vocab %d, n_ctx_train %d, n_embd %d, n_layer %d, n_head %d, n_head_kv "
      "%d, "
      "head_dim %d, n_ff %d, rms_eps %g\n",
      c.arch_name.c_str(), c.name.empty() ? "" : " / ", c.name.c_str(), c.n_vocab, c.n_ctx_train,
      c.n_embd, c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, double(c.rms_eps));
  static const char* const kScaling[] = {"none", "linear", "yarn", "longrope"};
  const auto print_rope = [&](const char* what, const RopeConfig& r) {
    std::printf("  rope%s: %s pairs, n_rot %d, freq_base %g, scaling %s", what,
                c.rope_style == RopeStyle::kNormal ? "adjacent" : "neox", c.n_rot,
                double(r.freq_base), kScaling[int(r.scaling)]);
    if (r.scaling == RopeScaling::kLinear || r.scaling == RopeScaling::kYarn)
      std::printf(" (factor %g)", 1.0 / double(r.freq_scale));
    if (r.scaling == RopeScaling::kYarn || r.scaling == RopeScaling::kLongRope)
      std::printf(", original context %d, attn_factor %g", r.original_context,
                  double(r.attn_factor));
    std::printf("\n");
  };
  print_rope("", c.rope);
  std::string windowed;
  int n_windowed = 0;
  for (int32_t i = 0; i < c.n_layer; ++i)
    if (c.layers[size_t(i)].sliding_window > 0) {
      windowed += (n_windowed++ ? "," : "") + std::to_string(i);
    }
  if (c.sliding_window > 0) {
    std::printf("  sliding window %d on %d of %d layers (%s; pattern %s)\n", c.sliding_window,
                n_windowed, c.n_layer, windowed.c_str(),
                c.window_pattern < 0    ? "per layer"
                : c.window_pattern == 0 ? "all"
                                        : std::to_string(c.window_pattern).c_str());
    if (c.separate_local_rope) print_rope(" (windowed layers)", c.rope_local);
  } else {
    std::printf("  attention: global on every layer\n");
  }
  std::printf("  layout: q/k norm %s, qkv bias %s, %s, ffn %s%s%s%s\n",
              d.qk_norm == QkNorm::kNone      ? "none"
              : d.qk_norm == QkNorm::kPerHead ? "per head"
                                              : "whole projection",
              d.qkv_bias == TensorRule::kAbsent     ? "no"
              : d.qkv_bias == TensorRule::kRequired ? "yes"
                                                    : "optional",
              d.post_norms ? "pre- and post-norms" : "pre-norms",
              d.activation == FfnActivation::kGeluTanh ? "GeGLU (tanh)" : "SwiGLU",
              d.fused_qkv ? ", fused qkv" : "", d.fused_gate_up ? ", fused gate+up" : "",
              d.scale_embeddings ? ", embeddings x sqrt(n_embd)" : "");
  if (c.attn_softcap > 0 || c.final_softcap > 0)
    std::printf("  soft-caps: attention %g, final logits %g\n", double(c.attn_softcap),
                double(c.final_softcap));
  if (c.moe())
    std::printf("  experts: %d, %d used per token, expert FFN %d, weights %s\n", c.n_expert,
                c.n_expert_used, c.n_ff_expert,
                c.renormalize_experts ? "renormalised" : "as routed");
  if (c.moe()) {
    int32_t n_dense = 0;
    for (const LayerConfig& l : c.layers) n_dense += l.moe ? 0 : 1;
    std::printf(
        "  routing: %s scores, %d of %d expert groups, weights x %g; shared expert FFN %d%s; "
        "leading dense layers %d\n",
        c.expert_gating == ExpertGating::kSigmoid ? "sigmoid" : "softmax", c.n_expert_groups_used,
        c.n_expert_groups, double(c.expert_weights_scale), c.n_ff_shared_expert,
        c.shared_expert_gated ? " (gated)" : "", n_dense);
  }
  if (c.latent_attention())
    std::printf(
        "  latent attention: q_lora %d, kv_lora %d, head %d + %d rope, v %d, score scale %g; "
        "cache row %d values, no V\n",
        c.mla.q_lora_rank, c.mla.kv_lora_rank, c.mla.nope_dim, c.mla.rope_dim, c.mla.v_head_dim,
        double(c.mla.scale), c.mla.cache_dim());
  return 0;
}

}  // namespace vela::cli
