#include "serve_flags.h"

#include "moe_experts_flag.h"
#include "server/reasoning/reasoning_parser.h"
#include "server/tool_calls.h"
#include "speculative_flags.h"
#include "tensor_parallel_role.h"

namespace vela::cli {

Args serve_args() {
  Args args("serve", "-m MODEL.gguf [options]", {});
  args.add_group(
      "Model and memory",
      {{"model", 'm', "FILE", "GGUF model file"},
       {"threads", 't', "N", "forward-pass threads (default: physical cores)"},
       {"ctx-size", 'c', "N",
        "longest prompt + output of one request (default: the model's, at most 4096)"},
       {"kv-cache-bytes", 0, "N", "KV-cache budget in bytes (512M, 2G, ...)"},
       {"kv-cache-fraction", 0, "F",
        "KV-cache budget as a fraction of MemAvailable, in (0, 1] (default: what max-num-seqs full "
        "contexts need, at most 0.25 of MemAvailable)"},
       {"kv-type", 0, "TYPE", "KV-cache element type: f16 (default), f32, bf16, q8_0"},
       {"block-size", 0, "N", "KV-cache token slots per block, 1-1024 (default 8)"},
       {"no-prefix-caching", 0, "", "do not reuse the KV cache of shared prompt prefixes"},
       {"moe-experts", 0, "MODE", kMoeExpertsHelp}});
  args.add_group(
      "Scheduling",
      {{"max-num-seqs", 0, "N", "requests decoded together at most (default 64)"},
       {"max-num-batched-tokens", 0, "N", "tokens computed per engine step (default 512)"},
       {"target-itl-ms", 0, "X",
        "while streams decode, admit only the prefill tokens that keep a step under X ms, "
        "predicted from measured steps (default 50; 0 = off: prefill takes the whole budget)"},
       {"target-itl-ratio", 0, "R",
        "raise that target to R x the time of the running decodes alone, when longer "
        "(default 2; 0 = the fixed target only)"},
       {"min-prefill-tokens", 0, "N",
        "prefill tokens per step at least, under the ITL target (default 8)"},
       {"max-wait-ms", 0, "X",
        "an idle engine waits this long for more requests to batch (default 0)"}});
  args.add_group(
      "HTTP server",
      {{"host", 0, "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)"},
       {"port", 0, "N", "TCP port (default 8080; 0 = any free port, printed at start)"},
       {"request-threads", 0, "N",
        "threads that parse, template and tokenize requests beside the I/O thread (default 2)"},
       {"no-webui", 0, "", "do not serve the chat page at / (docs/chat-page.md)"}});
  args.add_group(
      "API behaviour",
      {{"served-model-name", 0, "NAME",
        "the model name clients use (default: the file name's stem)"},
       {"chat-template", 0, "FILE",
        "chat template for /v1/chat/completions (default: the model's)"},
       {"reasoning-parser", 0, "NAME",
        "split the model's thinking into reasoning_content: auto (from the chat template, "
        "default), " +
            server::reasoning_format_list()},
       {"tool-call-parser", 0, "NAME",
        "the model's tool-call syntax: auto (from the chat template, default), none, " +
            server::tool_call_format_list()},
       {"embedding-pooling", 0, "HOW",
        "/v1/embeddings: mean (of the final hidden states, default) or last (token's)"}});
  args.add_group("Security",
                 {{"api-key", 0, "KEY",
                   "require 'Authorization: Bearer KEY' on /v1/*, /tokenize and /detokenize "
                   "(repeatable; also $VELA_API_KEY)"},
                  {"api-key-file", 0, "FILE", "API keys, one per line ('#' comments)"},
                  {"protect-metrics", 0, "", "/health and /metrics need an API key too"}});
  args.add_group(
      "Limits and timeouts",
      {{"max-queued-requests", 0, "N",
        "waiting requests beyond which new ones get 429 at once (default 256; 0 = no bound)"},
       {"max-body-bytes", 0, "N", "largest request body; larger ones get 413 (default 8M)"},
       {"max-stream-buffer-bytes", 0, "N",
        "unsent streamed bytes before a slow client is dropped (default 1M)"},
       {"max-connections", 0, "N",
        "open client connections at most; beyond it the longest-idle one is closed (default: "
        "the open-file limit, raised to its hard limit, less 64)"},
       {"header-timeout-seconds", 0, "S",
        "a request's header (and then its body) must arrive within S seconds of its first byte "
        "(default 30)"},
       {"idle-timeout-seconds", 0, "S",
        "a kept-alive connection may wait S seconds for its next request (default 120)"},
       {"request-timeout", 0, "S",
        "answer a generation request within S seconds of its arrival: past it the request is "
        "aborted (504, or a stream ended with finish_reason \"abort\") (default 0 = no limit)"},
       {"shutdown-grace-seconds", 0, "S",
        "on SIGTERM/SIGINT, let running requests finish for up to S seconds (default 30)"}});
  args.add_group(
      "Observability",
      {{"trace", 0, "FILE",
        "record a Chrome/Perfetto trace (engine steps, forward-pass layers and operations, "
        "sampling, detokenizing, HTTP requests) and write it to FILE at shutdown"}});
  args.add_group("Parallelism", {{"tensor-parallel-size", 0, "N", kTensorParallelHelp},
                                 {"pipeline-parallel-size", 0, "N", kPipelineParallelHelp}});
  add_speculative_flags(args);
  args.add_group(
      "Testing",
      {{"test-scripted-output", 0, "",
        "for tests only: a request's \"vela_test_script\" makes the model write the given text"}});
  return args;
}

}  // namespace vela::cli
