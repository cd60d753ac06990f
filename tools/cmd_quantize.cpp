// `vela quantize IN.gguf OUT.gguf TYPE [--imatrix FILE]`: converts a float model to a quantized
// type or mix, choosing each tensor's type as the common GGUF quantizer does and weighting the
// rounding by an importance matrix when one is given.
#include <chrono>
#include <cstdio>
#include <string>

#include "cli_args.h"
#include "commands.h"
#include "quant/quantize.h"
#include "tools_support/imatrix_file.h"
#include "tools_support/quant_mixes.h"
#include "tools_support/quantize_model.h"

namespace vela::cli {
namespace {

// One line per name: the GGUF file type, what it holds, and whether it takes an importance
// matrix or is beyond this build's quantizers.
std::string mix_table() {
  std::string out =
      "TYPE (file type number; what it holds). [imatrix]: needs --imatrix; [not yet]: this\n"
      "build has no quantizer for its main type:\n";
  for (const QuantMix& m : quant_mixes()) {
    char line[160];
    std::snprintf(line, sizeof(line), "  %-10s %2u  %s%s%s\n", m.name, m.file_type, m.summary,
                  m.needs_importance ? " [imatrix]" : "",
                  can_quantize_weighted(m.base) ? "" : " [not yet]");
    out += line;
  }
  out.pop_back();  // the usage text ends without a newline
  return out;
}

}  // namespace

int run_quantize(int argc, char** argv) {
  Args args("quantize", "IN.gguf OUT.gguf TYPE [options]\n\n" + mix_table(),
            {{"imatrix", 0, "FILE",
              "importance matrix (`vela imatrix`, or the common tool's .gguf / .dat) weighting "
              "each tensor's rounding; needed by the [imatrix] types"},
             {"pure", 0, "", "every matrix in TYPE (no output / mix rules)"},
             {"threads", 't', "N", "threads (default: all)"},
             {"quiet", 'q', "", "no per-tensor progress"}});
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  if (args.positional().size() != 3) {
    std::fprintf(stderr, "vela quantize: expected IN.gguf OUT.gguf TYPE (see --help)\n");
    return 2;
  }
  auto target = parse_quant_target(args.positional()[2]);
  auto threads = args.get_int("threads", 0, 0, 1024);
  for (const Error* e :
       {target ? nullptr : &target.error(), threads ? nullptr : &threads.error()}) {
    if (e) {
      std::fprintf(stderr, "vela quantize: %s\n", e->message.c_str());
      return 2;
    }
  }
  QuantizeOptions o;
  o.input_path = args.positional()[0];
  o.output_path = args.positional()[1];
  o.target = *target;
  o.pure = args.has("pure");
  o.n_threads = int(*threads);
  ImportanceMatrix imatrix;
  if (args.has("imatrix")) {
    o.imatrix_path = args.get("imatrix");
    auto m = read_imatrix(o.imatrix_path);
    if (!m) {
      std::fprintf(stderr, "vela quantize: %s\n", m.message().c_str());
      return 1;
    }
    imatrix = std::move(*m);
    o.imatrix = &imatrix;
  }
  if (!args.has("quiet"))
    o.on_tensor = [](size_t i, size_t n, const std::string& name, GgmlType from, GgmlType to) {
      std::fprintf(stderr, "[%4zu/%4zu] %-32s %-5s -> %s\n", i + 1, n, name.c_str(),
                   ggml_type_name(uint32_t(from)).c_str(), ggml_type_name(uint32_t(to)).c_str());
    };
  const auto t0 = std::chrono::steady_clock::now();
  auto summary = quantize_model(o);
  if (!summary) {
    std::fprintf(stderr, "vela quantize: %s\n", summary.message().c_str());
    return 1;
  }
  if (!summary->without_importance.empty() && !args.has("quiet"))
    std::fprintf(stderr,
                 "vela quantize: %zu tensors had no entry in the importance matrix and were "
                 "quantized without (first: %s)\n",
                 summary->without_importance.size(), summary->without_importance[0].c_str());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(
      stderr, "vela quantize: wrote %s (%s): %.2f MiB -> %.2f MiB, %zu tensors, in %.1f s\n",
      o.output_path.c_str(), target->name.c_str(), double(summary->input_bytes) / (1 << 20),
      double(summary->output_bytes) / (1 << 20), summary->n_tensors, seconds);
  return 0;
}

}  // namespace vela::cli
