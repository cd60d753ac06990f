#pragma once
// Grammars that force a tool call (tool_choice "required" or a named function) in the formats
// that write the function's name outside the arguments: DeepSeek-V3.1 (JSON arguments by the
// tool's schema), Qwen3-Coder XML and GLM-4.5 (each parameter by name; string values free text
// without '<', other values JSON by the parameter's schema).
// Free functions; no thread-safety concerns.
#include <string>

#include "server/tool_calls.h"
#include "util/result.h"

namespace vela::server {

Result<std::string> named_tool_call_grammar(const ToolRequest& request, ToolCallFormat format,
                                            int max_calls);

}  // namespace vela::server
