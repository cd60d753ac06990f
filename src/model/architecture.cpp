#include "model/architecture.h"

#include <vector>

namespace vela {
namespace {

const std::vector<ArchDescription>& registry() {
  static const std::vector<ArchDescription> all = {
      arch::llama(),     arch::qwen2(),    arch::qwen3(),   arch::qwen3moe(), arch::olmoe(),
      arch::gemma2(),    arch::gemma3(),   arch::phi3(),    arch::qwen35(),   arch::qwen35moe(),
      arch::deepseek2(), arch::qwen2moe(), arch::glm4moe(), arch::gpt_oss(),  arch::gemma4(),
      arch::eagle3(),    arch::qwen3next()};
  return all;
}

}  // namespace

const ArchDescription* find_architecture(std::string_view name) {
  for (const ArchDescription& d : registry())
    if (d.name == name) return &d;
  return nullptr;
}

std::string supported_architectures() {
  std::string out;
  for (const ArchDescription& d : registry())
    out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

}  // namespace vela
