// `vela generate -m MODEL -p PROMPT`: streams generated text to stdout; logs and speed to stderr.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "cli_args.h"
#include "commands.h"
#include "moe_experts_flag.h"
#include "speculative_flags.h"
#include "tensor_parallel_role.h"
#include "trace_option.h"
#include "vela/llm.h"

namespace vela::cli {
namespace {

// Reads the sampling flags into params; a malformed value is a one-line error.
Status read_sampling(const Args& a, SamplingParams& p) {
#define VELA_READ(field, expr)                     \
  do {                                             \
    auto r_ = (expr);                              \
    if (!r_) return r_.error();                    \
    p.field = static_cast<decltype(p.field)>(*r_); \
  } while (0)
  VELA_READ(max_tokens, a.get_int("n-predict", 128, 0, 1 << 24));
  VELA_READ(temperature, a.get_float("temp", 0.8, 0.0, 100.0));
  VELA_READ(top_k, a.get_int("top-k", 40, 0, 1 << 30));
  VELA_READ(top_p, a.get_float("top-p", 0.95, 0.0, 1.0));
  VELA_READ(min_p, a.get_float("min-p", 0.05, 0.0, 1.0));
  VELA_READ(repetition_penalty, a.get_float("repeat-penalty", 1.0, 0.0, 100.0));
  VELA_READ(presence_penalty, a.get_float("presence-penalty", 0.0, -2.0, 2.0));
  VELA_READ(frequency_penalty, a.get_float("frequency-penalty", 0.0, -2.0, 2.0));
#undef VELA_READ
  if (a.has("seed")) {
    auto seed = a.get_int("seed", 0, 0, INT64_MAX);
    if (!seed) return seed.error();
    p.seed = static_cast<uint64_t>(*seed);
  }
  if (a.has("logprobs")) {
    auto n = a.get_int("logprobs", 0, 0, 20);
    if (!n) return n.error();
    p.logprobs = static_cast<int32_t>(*n);
  }
  p.stop = a.get_all("stop");
  p.ignore_eos = a.has("ignore-eos");
  return {};
}

}  // namespace

int run_generate(int argc, char** argv) {
  Args args("generate", "-m MODEL.gguf -p PROMPT [options]",
            {{"model", 'm', "FILE", "GGUF model file"},
             {"prompt", 'p', "TEXT", "the prompt"},
             {"n-predict", 'n', "N", "tokens to generate at most (default 128)"},
             {"threads", 't', "N", "threads (default: physical cores)"},
             {"temp", 0, "T", "temperature; 0 = greedy (default 0.8)"},
             {"top-k", 0, "K", "keep the K most likely tokens; 0 = off (default 40)"},
             {"top-p", 0, "P", "nucleus sampling mass; 1 = off (default 0.95)"},
             {"min-p", 0, "P", "drop tokens below P x the top probability; 0 = off (default 0.05)"},
             {"repeat-penalty", 0, "X", "repetition penalty; 1 = off (default 1)"},
             {"presence-penalty", 0, "X", "presence penalty (default 0)"},
             {"frequency-penalty", 0, "X", "frequency penalty (default 0)"},
             {"seed", 's', "N", "random seed (default: random)"},
             {"stop", 0, "TEXT", "stop at this string (repeatable; not printed)"},
             {"ignore-eos", 0, "", "keep generating past end-of-generation tokens"},
             {"logprobs", 0, "N", "print each token's logprob and N alternatives to stderr"},
             {"ctx-size", 'c', "N", "context length (default: the model's, at most 4096)"},
             {"batch-size", 'b', "N", "prompt tokens per forward pass (default 512)"},
             {"kv-type", 0, "TYPE", "KV cache type: f16 (default), bf16, q8_0 or f32"},
             {"trace", 0, "FILE", "write a Chrome/Perfetto trace of the run to FILE"},
             {"tensor-parallel-size", 0, "N", kTensorParallelHelp},
             {"pipeline-parallel-size", 0, "N", kPipelineParallelHelp},
             {"moe-experts", 0, "MODE", kMoeExpertsHelp}});
  add_speculative_flags(args);
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  if (!args.has("model") || !args.has("prompt") || !args.positional().empty()) {
    std::fprintf(stderr, "vela generate: expected -m MODEL and -p PROMPT (see --help)\n");
    return 2;
  }
  SamplingParams params;
  LLMConfig config;
  config.model_path = args.get("model");
  config.kv_cache_type = args.get("kv-type", "f16");
  auto threads = args.get_int("threads", 0, 0, 1024);
  auto ctx = args.get_int("ctx-size", 0, 0, 1 << 24);
  auto batch = args.get_int("batch-size", 512, 1, 1 << 16);
  auto tp = args.get_int("tensor-parallel-size", 1, 1, 256);
  auto pp = args.get_int("pipeline-parallel-size", 1, 1, 256);
  auto moe_experts = read_moe_experts(args);
  Status st = read_sampling(args, params);
  auto spec = read_speculative_flags(args);
  if (!spec) {
    std::fprintf(stderr, "%s\n", spec.message().c_str());
    return 2;
  }
  apply_speculative_flags(*spec, config);
  for (const Error* e :
       {threads ? nullptr : &threads.error(), ctx ? nullptr : &ctx.error(),
        batch ? nullptr : &batch.error(), tp ? nullptr : &tp.error(), pp ? nullptr : &pp.error(),
        st ? nullptr : &st.error(), moe_experts ? nullptr : &moe_experts.error()}) {
    if (e) {
      std::fprintf(stderr, "%s\n", e->message.c_str());
      return 2;
    }
  }
  config.n_threads = static_cast<int32_t>(*threads);
  config.max_context = static_cast<int32_t>(*ctx);
  config.max_batch_tokens = static_cast<int32_t>(*batch);
  config.tensor_parallel_size = static_cast<int32_t>(*tp);
  config.pipeline_parallel_size = static_cast<int32_t>(*pp);
  config.moe_experts = *moe_experts;
  config.max_num_seqs = 1;  // one prompt: KV for one sequence

  TraceOption trace_file(args.get("trace"), "generate");
  auto llm = LLM::load(config);
  if (!llm) {
    std::fprintf(stderr, "vela generate: %s\n", llm.message().c_str());
    return 1;
  }
  const LLM::Info info = (*llm)->info();
  std::fprintf(stderr, "vela: loaded %s (%s), %d layers, n_embd %d, vocab %d, context %d\n",
               config.model_path.c_str(), info.architecture.c_str(), info.n_layer, info.n_embd,
               info.n_vocab, info.n_ctx);

  const bool show_logprobs = params.logprobs.has_value();
  auto outputs = (*llm)->generate({args.get("prompt")}, params, [&](const StreamDelta& d) {
    std::fwrite(d.text.data(), 1, d.text.size(), stdout);
    std::fflush(stdout);
    if (show_logprobs && d.logprobs) {
      std::fprintf(stderr, "[token %d logprob %.4f", d.logprobs->token,
                   double(d.logprobs->logprob));
      for (const auto& alt : d.logprobs->top)
        std::fprintf(stderr, " | %d %.4f", alt.token, double(alt.logprob));
      std::fprintf(stderr, "]\n");
    }
    return true;
  });
  std::printf("\n");
  if (!outputs) {
    std::fprintf(stderr, "vela generate: %s\n", outputs.message().c_str());
    return 1;
  }
  const RequestOutput& r = outputs->front();
  const double n_prompt = double(r.prompt_token_ids.size());
  const double n_gen = double(r.outputs[0].token_ids.size());
  std::fprintf(stderr,
               "vela: prompt %.0f tokens in %.3f s (%.1f tokens/s); generated %.0f tokens in %.3f "
               "s (%.1f tokens/s); "
               "finish: %s\n",
               n_prompt, r.metrics.prefill_seconds,
               n_prompt / std::max(r.metrics.prefill_seconds, 1e-9), n_gen,
               r.metrics.decode_seconds, n_gen / std::max(r.metrics.decode_seconds, 1e-9),
               finish_reason_name(r.outputs[0].finish_reason));
  return trace_file.finish() ? 0 : 1;
}

}  // namespace vela::cli
