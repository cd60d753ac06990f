// `vela tokenize -m MODEL TEXT`: the token ids of a text, as the model's tokenizer produces them.
#include <cstdio>
#include <string>

#include "cli_args.h"
#include "commands.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace vela::cli {

int run_tokenize(int argc, char** argv) {
  Args args(
      "tokenize", "-m MODEL.gguf TEXT",
      {{"model", 'm', "FILE", "GGUF file with the tokenizer (a vocabulary-only file is fine)"},
       {"no-bos", 0, "", "do not add BOS/EOS even when the model asks for them"},
       {"no-parse-special", 0, "", "treat special-token texts like <s> as plain text"},
       {"pieces", 0, "", "print each id with the text it decodes to"}});
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  if (!args.has("model") || args.positional().size() != 1) {
    std::fprintf(stderr, "vela tokenize: expected -m MODEL and one TEXT argument (see --help)\n");
    return 2;
  }
  auto file = GgufFile::open(args.get("model"));
  if (!file) {
    std::fprintf(stderr, "vela tokenize: %s\n", file.message().c_str());
    return 1;
  }
  auto tokenizer = Tokenizer::from_gguf(*file);
  if (!tokenizer) {
    std::fprintf(stderr, "vela tokenize: %s: %s\n", args.get("model").c_str(),
                 tokenizer.message().c_str());
    return 1;
  }
  const auto ids =
      tokenizer->encode(args.positional()[0], !args.has("no-bos"), !args.has("no-parse-special"));
  if (args.has("pieces")) {
    for (int32_t id : ids) std::printf("%6d '%s'\n", id, tokenizer->token_to_piece(id).c_str());
    return 0;
  }
  for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
  std::printf("\n");
  return 0;
}

}  // namespace vela::cli
