#include "server/engine_setup.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "engine/engine_factory.h"
#include "kernels/cpu_features.h"
#include "model/model.h"

namespace vela::server {

namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Status resolve_output_parsers(const EngineSetupOptions& o, const std::string* source,
                              const Tokenizer& tokenizer, LoadedModel& model, std::string& log) {
  // Reasoning.
  if (o.reasoning_parser == "auto") {
    std::string why = "no chat template";
    model.reasoning = source ? detect_reasoning_format(*source, why) : ReasoningFormat::kNone;
    log += std::string("vela serve: reasoning parser ") + reasoning_format_name(model.reasoning) +
           " (auto: " + why + ")\n";
  } else if (auto f = reasoning_format_from_name(o.reasoning_parser)) {
    model.reasoning = *f;
    log += std::string("vela serve: reasoning parser ") + reasoning_format_name(*f) + "\n";
  } else {
    return make_error("--reasoning-parser: unknown parser '" + o.reasoning_parser +
                      "' (expected auto, " + reasoning_format_list() + ")");
  }
  if (model.reasoning != ReasoningFormat::kNone)
    model.reasoning_end_tokens = tokenizer.encode(reasoning_markers(model.reasoning).end,
                                                  /*add_special=*/false, /*parse_special=*/true);
  // Tool calls.
  const std::string names = tool_call_format_list();
  if (o.tool_call_parser == "none") {
    model.tools_unavailable = "the server was started with --tool-call-parser none";
    log += "vela serve: tool-call parser none: requests with tools are refused\n";
  } else if (o.tool_call_parser == "auto") {
    const std::optional<ToolCallFormat> found =
        source ? detect_tool_call_format(*source) : std::nullopt;
    if (found) {
      model.tool_format = found;
      log += std::string("vela serve: tool-call parser ") + tool_call_format_name(*found) +
             " (auto: the chat template writes its markers)\n";
    } else if (source && template_uses_tools(*source)) {
      return make_error(
          "--tool-call-parser auto: the chat template reads the request's tools but writes none "
          "of the tool-call syntaxes vela parses; name one with --tool-call-parser (" +
          names + "), or give --tool-call-parser none to serve without tool calling");
    } else {
      model.tools_unavailable =
          source ? "the chat template has no tool support" : "there is no chat template";
      log += "vela serve: tool-call parser none (auto: " + model.tools_unavailable +
             "; requests with tools are refused; --tool-call-parser NAME picks one)\n";
    }
  } else if (auto f = tool_call_format_from_name(o.tool_call_parser)) {
    model.tool_format = f;
    log += std::string("vela serve: tool-call parser ") + tool_call_format_name(*f) + "\n";
  } else {
    return make_error("--tool-call-parser: unknown parser '" + o.tool_call_parser +
                      "' (expected auto, none, " + names + ")");
  }
  return {};
}

Result<std::shared_ptr<LoadedModel>> load_model_for_serving(const EngineSetupOptions& o,
                                                            std::string& log) {
  if (o.engine.max_num_seqs < 1) return make_error("--max-num-seqs must be at least 1");
  if (o.engine.max_num_batched_tokens < 1)
    return make_error("--max-num-batched-tokens must be at least 1");

  // Read the template file first: a typo should fail before a long model load.
  std::optional<std::string> template_file;
  if (!o.chat_template_path.empty()) {
    auto text = read_file(o.chat_template_path);
    if (!text) return make_error("--chat-template: " + text.message());
    template_file = std::move(*text);
  }

  auto engine = make_engine(o.engine);
  if (!engine) return engine.error();
  const Tokenizer* tokenizer = &(*engine)->tokenizer();
  const ModelConfig& mc = (*engine)->model().config();
  const int32_t n_layer = (*engine)->model().whole_config().n_layer;  // every stage's
  const GgufFile& gguf = (*engine)->model().gguf();

  auto loaded = std::make_shared<LoadedModel>();
  const std::string bos =
      tokenizer->bos_id() >= 0 ? std::string(tokenizer->token_text(tokenizer->bos_id())) : "";
  const std::string eos =
      tokenizer->eos_id() >= 0 ? std::string(tokenizer->token_text(tokenizer->eos_id())) : "";
  std::optional<std::string> source = template_file;
  if (!source) {
    auto meta = gguf.get_string("tokenizer.chat_template");
    if (meta && *meta) source = std::string(**meta);
  }
  if (!source) {
    loaded->chat_unavailable = "the model file has no tokenizer.chat_template";
  } else {
    auto formatter = ChatFormatter::create(*source, bos, eos);
    if (formatter) {
      loaded->chat = std::move(*formatter);
    } else if (template_file) {
      return make_error("--chat-template: " + formatter.message());
    } else {
      loaded->chat_unavailable = "its chat template is not supported: " + formatter.message();
    }
  }

  std::string parsers_log;
  if (auto st = resolve_output_parsers(o, loaded->chat ? &loaded->chat->source() : nullptr,
                                       *tokenizer, *loaded, parsers_log);
      !st)
    return st.error();

  const EngineConfig& actual = (*engine)->config();
  const std::vector<CacheGroupUsage> cache_groups = (*engine)->cache_groups();
  const uint64_t bytes_per_block = KvCache::bytes_per_block(
      model_cache_config(mc, actual.block_size, 1, actual.kv_type, 0,
                         /*group_windows=*/!(*engine)->config().tensor_parallel));
  loaded->block_size = actual.block_size;
  loaded->max_model_len =
      int32_t(std::min<int64_t>(actual.max_context, int64_t(actual.n_blocks) * actual.block_size));
  AsyncEngineConfig ac;
  ac.max_wait_ms = o.max_wait_ms;
  ac.max_queued_requests = o.max_queued_requests;
  loaded->engine = std::make_shared<AsyncEngine>(std::move(*engine), ac);

  std::ostringstream itl_target;
  if (o.engine.target_itl_ms <= 0)
    itl_target << "off";
  else if (o.engine.target_itl_ratio > 0)
    itl_target << o.engine.target_itl_ms << " ms or " << o.engine.target_itl_ratio
               << "x the decodes' step";
  else
    itl_target << o.engine.target_itl_ms << " ms";
  std::ostringstream s;
  s << "vela serve: model " << o.engine.model_path << " (" << mc.arch_name << ", " << n_layer
    << " layers, vocab " << mc.n_vocab << "), context " << actual.max_context << ", KV cache "
    << actual.n_blocks << " blocks x " << actual.block_size << " tokens ("
    << (double(bytes_per_block) * actual.n_blocks / (1 << 20)) << " MiB "
    << kv_type_name(actual.kv_type) << "), max " << o.engine.max_num_seqs << " sequences, "
    << o.engine.max_num_batched_tokens << " tokens per step, ITL target " << itl_target.str()
    << ", prefix caching " << (actual.enable_prefix_caching ? "on" : "off") << ", kernels "
    << describe_cpu() << "\n";
  // What one sequence at the full context holds: windowed layers only their window's blocks.
  uint64_t held = 0, every_position = 0;
  s << "vela serve: cache groups:";
  for (const CacheGroupUsage& g : cache_groups) {
    s << " " << g.name << " (" << g.n_layers << " layers, ";
    const uint64_t full = g.bytes_per_token * uint64_t(actual.max_context);
    if (g.bytes_per_token == 0) {  // a recurrent state
      s << g.bytes_per_sequence << " bytes per sequence, " << g.total << " sequences)";
      held += g.bytes_per_sequence;
      every_position += g.bytes_per_sequence;
      continue;
    }
    s << g.bytes_per_token << " bytes per token";
    if (g.window > 0) s << ", window " << g.window;
    s << ")";
    held += g.bytes_per_sequence > 0 ? std::min(full, g.bytes_per_sequence) : full;
    every_position += full;
  }
  s << "; one sequence of " << actual.max_context << " tokens holds " << double(held) / (1 << 20)
    << " MiB";
  if (held != every_position)
    s << " (every position of every layer: " << double(every_position) / (1 << 20) << " MiB)";
  s << "\n";
  if (loaded->chat)
    s << "vela serve: chat template from " << (template_file ? o.chat_template_path : "the model")
      << " (" << ChatFormatter::engine_name() << ")\n";
  else
    s << "vela serve: /v1/chat/completions unavailable: " << loaded->chat_unavailable << "\n";
  s << parsers_log;
  if (loaded->max_model_len < actual.max_context)
    s << "vela serve: warning: the KV budget holds only " << loaded->max_model_len
      << " tokens, less than one full context\n";
  log = s.str();
  return loaded;
}

}  // namespace vela::server
