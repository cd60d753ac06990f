// `vela serve -m MODEL`: an OpenAI-compatible HTTP server (/v1/completions,
// /v1/chat/completions, /v1/models, /health, /metrics). Logs and one access-log line per
// request go to stderr.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "cli_args.h"
#include "commands.h"
#include "moe_experts_flag.h"
#include "serve_flags.h"
#include "server/auth.h"
#include "server/engine_setup.h"
#include "server/http_server.h"
#include "speculative_flags.h"
#include "tensor_parallel_role.h"
#include "trace_option.h"

namespace vela::cli {
namespace {

// A 2x ratio keeps ITL P99 near twice the median while prefill still gets half of each step
// beside decodes; 50 ms is below what a reader notices, so faster decodes are not held to a
// tighter bound than that. Measured with `vela bench serve`: see docs/serving.md.
constexpr double kDefaultTargetItlMs = 50;
constexpr double kDefaultTargetItlRatio = 2;

// "123", "64K", "512M", "2G" (binary units) -> bytes.
Result<uint64_t> parse_bytes(const std::string& flag, const std::string& text) {
  std::string digits = text;
  uint64_t scale = 1;
  if (!digits.empty()) {
    const char unit = char(std::toupper(static_cast<unsigned char>(digits.back())));
    const int shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : unit == 'T' ? 40 : 0;
    if (shift) {
      scale = uint64_t(1) << shift;
      digits.pop_back();
    }
  }
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
      digits.size() > 15)
    return make_error("vela serve: --" + flag +
                      " expects a byte count like 1048576, 512M or 2G (got '" + text + "')");
  const uint64_t value = std::stoull(digits) * scale;
  if (value == 0) return make_error("vela serve: --" + flag + " must be positive");
  return value;
}

}  // namespace

int run_serve(int argc, char** argv) {
  Args args = serve_args();  // flags and their help: serve_flags.cpp
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  if (!args.has("model") || !args.positional().empty()) {
    std::fprintf(stderr, "vela serve: expected -m MODEL (see --help)\n");
    return 2;
  }

  server::ServerOptions so;
  server::EngineSetupOptions eo;
  eo.engine.model_path = args.get("model");
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "%s\n", message.c_str());
    return 2;
  };
#define VELA_INT(var, flag, def, lo, hi)      \
  auto var = args.get_int(flag, def, lo, hi); \
  if (!var) return fail(var.message());
  VELA_INT(port, "port", 8080, 0, 65535)
  VELA_INT(threads, "threads", 0, 0, 1024)
  VELA_INT(ctx, "ctx-size", 0, 0, 1 << 24)
  VELA_INT(seqs, "max-num-seqs", 64, 1, 65536)
  VELA_INT(batched, "max-num-batched-tokens", 512, 1, 1 << 20)
  VELA_INT(queued, "max-queued-requests", 256, 0, 1 << 24)
  VELA_INT(max_connections, "max-connections", 0, 0, 1 << 24)
  VELA_INT(request_threads, "request-threads", 2, 1, 256)
  VELA_INT(min_prefill, "min-prefill-tokens", kDefaultMinPrefillTokens, 1, 1 << 20)
  VELA_INT(tensor_parallel, "tensor-parallel-size", 1, 1, 256)
  VELA_INT(pipeline_parallel, "pipeline-parallel-size", 1, 1, 256)
#undef VELA_INT
  auto wait_ms = args.get_float("max-wait-ms", 0, 0, 10000);
  if (!wait_ms) return fail(wait_ms.message());
  auto grace = args.get_float("shutdown-grace-seconds", 30, 0, 86400);
  if (!grace) return fail(grace.message());
  auto header_timeout = args.get_float("header-timeout-seconds", 30, 0.01, 86400);
  if (!header_timeout) return fail(header_timeout.message());
  auto idle_timeout = args.get_float("idle-timeout-seconds", 120, 0.01, 86400);
  if (!idle_timeout) return fail(idle_timeout.message());
  auto request_timeout = args.get_float("request-timeout", 0, 0, 1e7);
  if (!request_timeout) return fail(request_timeout.message());
  auto target_itl = args.get_float("target-itl-ms", kDefaultTargetItlMs, 0, 1e7);
  if (!target_itl) return fail(target_itl.message());
  auto target_ratio = args.get_float("target-itl-ratio", kDefaultTargetItlRatio, 0, 1e6);
  if (!target_ratio) return fail(target_ratio.message());
  if (args.has("kv-cache-bytes")) {
    auto b = parse_bytes("kv-cache-bytes", args.get("kv-cache-bytes"));
    if (!b) return fail(b.message());
    eo.engine.kv_cache_bytes = *b;
  }
  if (args.has("kv-cache-fraction")) {
    auto f = args.get_float("kv-cache-fraction", 0, 1e-9, 1.0);
    if (!f) return fail(f.message());
    eo.engine.kv_cache_fraction = *f;
  }
  if (eo.engine.kv_cache_bytes && eo.engine.kv_cache_fraction)
    return fail("vela serve: give either --kv-cache-bytes or --kv-cache-fraction, not both");
  for (const char* flag : {"max-body-bytes", "max-stream-buffer-bytes"}) {
    if (!args.has(flag)) continue;
    auto b = parse_bytes(flag, args.get(flag));
    if (!b) return fail(b.message());
    (std::string(flag) == "max-body-bytes" ? so.max_body_bytes : so.max_stream_buffer_bytes) =
        size_t(*b);
  }

  eo.engine.n_threads = int32_t(*threads);
  eo.engine.max_context = int32_t(*ctx);
  eo.engine.max_num_seqs = int32_t(*seqs);
  eo.engine.max_num_batched_tokens = int32_t(*batched);
  eo.engine.target_itl_ms = *target_itl;
  eo.engine.target_itl_ratio = *target_ratio;
  eo.engine.min_prefill_tokens = int32_t(*min_prefill);
  eo.engine.tensor_parallel_size = int32_t(*tensor_parallel);
  eo.engine.pipeline_parallel_size = int32_t(*pipeline_parallel);
  eo.engine.kv_cache_type = args.get("kv-type", "f16");
  {
    auto bs = args.get_int("block-size", 8, 1, 1024);
    if (!bs) return fail("vela serve: --block-size: " + bs.message());
    eo.engine.block_size = int32_t(*bs);
  }
  eo.engine.enable_prefix_caching = !args.has("no-prefix-caching");
  {
    auto moe_experts = read_moe_experts(args);
    if (!moe_experts) return fail(moe_experts.message());
    eo.engine.moe_experts = *moe_experts;
  }
  {
    auto spec = read_speculative_flags(args);
    if (!spec) return fail("vela serve: " + spec.message());
    apply_speculative_flags(*spec, eo.engine);
  }
  eo.max_wait_ms = *wait_ms;
  eo.max_queued_requests = int32_t(*queued);
  eo.chat_template_path = args.get("chat-template");
  eo.reasoning_parser = args.get("reasoning-parser", "auto");
  eo.tool_call_parser = args.get("tool-call-parser", "auto");
  if (eo.reasoning_parser != "auto" && !server::reasoning_format_from_name(eo.reasoning_parser))
    return fail("vela serve: --reasoning-parser: unknown parser '" + eo.reasoning_parser +
                "' (expected auto, " + server::reasoning_format_list() + ")");
  if (eo.tool_call_parser != "auto" && eo.tool_call_parser != "none" &&
      !server::tool_call_format_from_name(eo.tool_call_parser))
    return fail("vela serve: --tool-call-parser: unknown parser '" + eo.tool_call_parser +
                "' (expected auto, none, " + server::tool_call_format_list() + ")");
  so.test_scripted_output = args.has("test-scripted-output");
  so.web_ui = !args.has("no-webui");

  so.host = args.get("host", "127.0.0.1");
  so.port = uint16_t(*port);
  so.protect_metrics = args.has("protect-metrics");
  so.shutdown_grace_seconds = *grace;
  so.header_timeout_seconds = *header_timeout;
  so.idle_timeout_seconds = *idle_timeout;
  so.max_connections = size_t(*max_connections);
  so.request_timeout_seconds = *request_timeout;
  so.request_threads = int32_t(*request_threads);
  const std::string pooling = args.get("embedding-pooling", "mean");
  if (pooling != "mean" && pooling != "last")
    return fail("vela serve: --embedding-pooling expects mean or last (got '" + pooling + "')");
  so.embedding_pooling = pooling == "mean" ? Pooling::kMean : Pooling::kLast;
  so.served_model_name =
      args.get("served-model-name", std::filesystem::path(eo.engine.model_path).stem().string());
  if (so.served_model_name.empty()) return fail("vela serve: --served-model-name is empty");
  so.api_keys = args.get_all("api-key");
  if (const char* env = std::getenv("VELA_API_KEY"); env && *env) so.api_keys.emplace_back(env);
  if (args.has("api-key-file")) {
    auto keys = server::read_api_key_file(args.get("api-key-file"));
    if (!keys) return fail("vela serve: " + keys.message());
    so.api_keys.insert(so.api_keys.end(), keys->begin(), keys->end());
  }
  for (const std::string& key : so.api_keys)
    if (key.empty()) return fail("vela serve: an API key is empty");

  TraceOption trace_file(args.get("trace"), "serve");
  server::HttpServer server(so, eo.engine.max_context > 0 ? eo.engine.max_context : 4096);
  if (auto st = server.listen(); !st) {
    std::fprintf(stderr, "vela serve: %s\n", st.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "vela serve: listening on http://%s:%u (model '%s' loading)%s\n",
               so.host.c_str(), unsigned(server.port()), so.served_model_name.c_str(),
               so.api_keys.empty() ? "" : ", API key required");
  if (so.web_ui)
    std::fprintf(stderr, "vela serve: chat page at http://%s:%u/\n", so.host.c_str(),
                 unsigned(server.port()));
  std::fflush(stderr);

  // Load on another thread so /health can answer 503 meanwhile.
  std::thread loader([&] {
    std::string log;
    auto model = server::load_model_for_serving(eo, log);
    if (!model) return server.model_failed(model.message());
    std::fputs(log.c_str(), stderr);
    if (!server.stopping()) server.model_ready(std::move(*model));
  });
  const int rc = server.run();
  loader.join();
  if (!trace_file.finish()) return rc == 0 ? 1 : rc;
  return rc;
}

}  // namespace vela::cli
