// `vela synth -o OUT.gguf --shape NAME --type TYPE --vocab-from FILE.gguf`: writes a random-weight
// model of a known shape (for benchmarks and tests without downloading checkpoints).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli_args.h"
#include "commands.h"
#include "tools_support/builtin_vocab.h"
#include "tools_support/synth.h"

namespace vela::cli {

int run_synth(int argc, char** argv) {
  Args args("synth", "-o OUT.gguf --shape NAME --type TYPE --vocab-from FILE.gguf [options]",
            {{"output", 'o', "FILE", "GGUF file to write"},
             {"shape", 0, "NAME", "model shape: " + known_shape_names()},
             {"type", 0, "TYPE", "tensor type: " + quant_target_names()},
             {"vocab-from", 0, "FILE",
              "GGUF file whose tokenizer is copied (its size sets n_vocab); 'builtin' = a small "
              "byte-level vocabulary with a ChatML template"},
             {"seed", 's', "N",
              "random seed (default 0); the same seed gives the same weights in every type"},
             {"pad-vocab", 0, "", "pad the vocabulary with unused tokens up to the shape's size"},
             {"pure", 0, "", "every matrix in TYPE (no Q6_K output / K-mix rules)"},
             {"threads", 't', "N", "threads (default: all)"},
             {"quiet", 'q', "", "no per-tensor progress"}});
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  if (!args.has("output") || !args.has("shape") || !args.has("type") || !args.has("vocab-from") ||
      !args.positional().empty()) {
    std::fprintf(stderr,
                 "vela synth: expected -o OUT.gguf --shape NAME --type TYPE --vocab-from FILE (see "
                 "--help)\n");
    return 2;
  }
  const ModelShape* shape = find_shape(args.get("shape"));
  if (!shape) {
    std::fprintf(stderr, "vela synth: unknown shape '%s' (known: %s)\n", args.get("shape").c_str(),
                 known_shape_names().c_str());
    return 2;
  }
  auto target = parse_quant_target(args.get("type"));
  auto seed = args.get_int("seed", 0, 0, INT64_MAX);
  auto threads = args.get_int("threads", 0, 0, 1024);
  for (const Error* e : {target ? nullptr : &target.error(), seed ? nullptr : &seed.error(),
                         threads ? nullptr : &threads.error()}) {
    if (e) {
      std::fprintf(stderr, "vela synth: %s\n", e->message.c_str());
      return 2;
    }
  }

  SynthOptions o;
  o.output_path = args.get("output");
  o.shape = *shape;
  o.target = *target;
  o.vocab_path = args.get("vocab-from");
  if (o.vocab_path == "builtin") {
    o.vocab_path = o.output_path + ".vocab.gguf";
    if (auto st = write_builtin_vocab(o.vocab_path); !st) {
      std::fprintf(stderr, "vela synth: %s\n", st.message().c_str());
      return 1;
    }
  }
  o.seed = uint64_t(*seed);
  o.pure = args.has("pure");
  o.pad_vocab = args.has("pad-vocab");
  o.n_threads = int(*threads);
  if (!args.has("quiet"))
    o.on_tensor = [](size_t i, size_t n, const std::string& name, GgmlType type) {
      std::fprintf(stderr, "[%4zu/%4zu] %-32s %s\n", i + 1, n, name.c_str(),
                   ggml_type_name(uint32_t(type)).c_str());
    };
  const auto t0 = std::chrono::steady_clock::now();
  auto summary = synthesize_model(o);
  // The builtin vocabulary is copied into the model: its temporary file is not left behind.
  if (args.get("vocab-from") == "builtin") {
    std::error_code ec;
    std::filesystem::remove(o.vocab_path, ec);
  }
  if (!summary) {
    std::fprintf(stderr, "vela synth: %s\n", summary.message().c_str());
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (summary->n_vocab != shape->n_vocab)
    std::fprintf(stderr,
                 "vela synth: note: the vocabulary has %d tokens (shape %s nominally has %d; "
                 "--pad-vocab pads up to it); using %d\n",
                 summary->n_vocab, shape->name.c_str(), shape->n_vocab, summary->n_vocab);
  std::fprintf(stderr,
               "vela synth: wrote %s: %s %s, %.3f B parameters, %.2f MiB, %zu tensors, in %.1f s\n",
               o.output_path.c_str(), shape->name.c_str(), target->name.c_str(),
               double(summary->n_params) / 1e9, double(summary->file_bytes) / (1 << 20),
               summary->n_tensors, seconds);
  return 0;
}

}  // namespace vela::cli
