#pragma once
// Builds what `vela serve` runs: Model::load + Tokenizer::from_gguf + Engine (KV budget in
// blocks from a byte budget or a fraction of available memory) wrapped in an AsyncEngine, plus
// the chat template (a file, or the model's tokenizer.chat_template).
// Free functions; no shared state.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine/engine_factory.h"
#include "server/server_context.h"
#include "util/result.h"

namespace vela::server {

struct EngineSetupOptions {
  EngineOptions engine;  // model, threads, context, batching, KV budget, type and block size
  double max_wait_ms = 0;
  int32_t max_queued_requests = 0;        // 0 = no bound
  std::string chat_template_path;         // overrides the model's template
  std::string reasoning_parser = "auto";  // --reasoning-parser: auto, none or a format's name
  std::string tool_call_parser = "auto";  // --tool-call-parser: auto, none or a format's name
};

// The --reasoning-parser and --tool-call-parser values as the chat template resolves them
// (`auto` reads its markers), with a log line for each; an error for a name that is not a
// parser, or for `auto` over a template that reads tools in a syntax no parser knows.
Status resolve_output_parsers(const EngineSetupOptions& options, const std::string* template_source,
                              const Tokenizer& tokenizer, LoadedModel& model, std::string& log);

// Loads everything; `log` receives human-readable lines for stderr. Errors are fatal for the
// server (bad model file, bad option, unreadable template file).
Result<std::shared_ptr<LoadedModel>> load_model_for_serving(const EngineSetupOptions& options,
                                                            std::string& log);

}  // namespace vela::server
