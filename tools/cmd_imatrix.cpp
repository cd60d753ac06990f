// `vela imatrix -m MODEL -f TEXT -o FILE`: computes an importance matrix (the mean squared input
// of each column of each layer matrix over a calibration text) and writes it in the GGUF imatrix
// format that quantizers read. Progress and errors on stderr.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "cli_args.h"
#include "commands.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tools_support/imatrix_compute.h"

namespace vela::cli {

int run_imatrix(int argc, char** argv) {
  Args args("imatrix", "-m MODEL.gguf -f TEXT -o OUTPUT.gguf [options]",
            {{"model", 'm', "FILE", "GGUF model file"},
             {"file", 'f', "FILE", "calibration text"},
             {"output", 'o', "FILE", "where to write the importance matrix (default imatrix.gguf)"},
             {"chunk-size", 0, "N", "tokens per chunk, each run from position 0 (default 256)"},
             {"chunks", 0, "N", "use at most N chunks (default: every whole chunk of the text)"},
             {"threads", 't', "N", "threads (default: physical cores)"},
             {"kv-type", 0, "TYPE", "KV cache type: f16 (default), bf16, q8_0 or f32"},
             {"parse-special", 0, "", "read special-token texts like <s> in the text as tokens"}});
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  if (!args.has("model") || !args.has("file") || !args.positional().empty()) {
    std::fprintf(stderr, "vela imatrix: expected -m MODEL and -f TEXT (see --help)\n");
    return 2;
  }
  auto chunk_size = args.get_int("chunk-size", 256, 1, 1 << 20);
  auto chunks = args.get_int("chunks", -1, 1, INT32_MAX);
  auto threads = args.get_int("threads", 0, 0, 1024);
  auto kv_type = parse_kv_type(args.get("kv-type", "f16"));
  for (const Error* e :
       {chunk_size ? nullptr : &chunk_size.error(), chunks ? nullptr : &chunks.error(),
        threads ? nullptr : &threads.error()}) {
    if (e) {
      std::fprintf(stderr, "%s\n", e->message.c_str());  // names the command and flag
      return 2;
    }
  }
  if (!kv_type) {
    std::fprintf(stderr, "vela imatrix: --kv-type: %s\n", kv_type.message().c_str());
    return 2;
  }
  const std::string model_path = args.get("model"), text_path = args.get("file");
  const std::string out_path = args.get("output", "imatrix.gguf");

  std::ifstream in(text_path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "vela imatrix: cannot read '%s': %s\n", text_path.c_str(),
                 std::strerror(errno));
    return 1;
  }
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto model = Model::load(model_path);
  if (!model) {
    std::fprintf(stderr, "vela imatrix: %s: %s\n", model_path.c_str(), model.message().c_str());
    return 1;
  }
  auto tokenizer = Tokenizer::from_gguf((*model)->gguf());
  if (!tokenizer) {
    std::fprintf(stderr, "vela imatrix: %s: %s\n", model_path.c_str(), tokenizer.message().c_str());
    return 1;
  }

  ImatrixOptions options;
  options.chunk_size = int32_t(*chunk_size);
  options.max_chunks = args.has("chunks") ? int32_t(*chunks) : -1;
  options.n_threads = int32_t(*threads);
  options.kv_type = *kv_type;
  const std::vector<int32_t> tokens = imatrix_tokens(*tokenizer, text, args.has("parse-special"));
  const int32_t bos = tokenizer->add_bos() ? tokenizer->bos_id() : -1;
  std::fprintf(stderr, "vela imatrix: %s: %zu tokens, chunks of %d\n", text_path.c_str(),
               tokens.size(), options.chunk_size);
  const auto progress = [](int32_t done, int32_t total, double seconds) {
    std::fprintf(stderr, "vela imatrix: chunk %d/%d, %.2f s per chunk, %.1f s left\n", done, total,
                 seconds / done, seconds / done * (total - done));
  };
  auto matrix = compute_imatrix(*model, tokens, bos, options, {text_path}, progress);
  if (!matrix) {
    std::fprintf(stderr, "vela imatrix: %s: %s\n", text_path.c_str(), matrix.message().c_str());
    return 1;
  }
  if (Status s = write_imatrix(*matrix, out_path); !s) {
    std::fprintf(stderr, "vela imatrix: %s\n", s.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "vela imatrix: wrote %zu tensors' importance over %d chunks of %d to %s\n",
               matrix->entries.size(), matrix->chunk_count, matrix->chunk_size, out_path.c_str());
  return 0;
}

}  // namespace vela::cli
