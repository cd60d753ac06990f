#include "tools_support/builtin_vocab.h"

#include <cstdio>
#include <vector>

#include "io/gguf_writer.h"

namespace vela {

Status write_builtin_vocab(const std::string& path) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};  // unknown, control, control
  std::vector<float> scores = {0, 0, 0};
  for (int c = 0x20; c <= 0x7e; ++c) {
    tokens.push_back(c == ' ' ? std::string("\xe2\x96\x81") : std::string(1, char(c)));
    types.push_back(1);
    scores.push_back(-1.0f);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    tokens.push_back(name);
    types.push_back(6);  // byte
    scores.push_back(0.0f);
  }
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("general.name", "vela builtin byte vocabulary");
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_strings("tokenizer.ggml.tokens", tokens);
  w.add_f32s("tokenizer.ggml.scores", scores);
  w.add_i32s("tokenizer.ggml.token_type", types);
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_bool("tokenizer.ggml.add_eos_token", false);
  w.add_string("tokenizer.chat_template",
               "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
               "message['content'] + "
               "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
               "'<|im_start|>assistant\\n' }}"
               "{% endif %}");
  return w.write_file(path);
}

}  // namespace vela
