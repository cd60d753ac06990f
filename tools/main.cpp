// `vela`: the command-line front end. Each subcommand lives in its own cmd_*.cpp.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"
#include "tensor_parallel_role.h"
#include "util/build_info.h"

namespace {

constexpr const char* kUsage =
    "usage: vela <command> [options]\n"
    "\n"
    "commands:\n"
    "  generate   generate text from a prompt with a GGUF model (streams to stdout)\n"
    "  info       print a GGUF file's metadata and tensors\n"
    "  tokenize   print the token ids of a text\n"
    "  quantize   convert a float GGUF model to a quantized type or K mix\n"
    "  imatrix    compute an importance matrix over a calibration text\n"
    "  synth      write a random-weight GGUF model of a known shape\n"
    "  bench      measure prompt and generation speed against the machine's roofline\n"
    "  serve      serve a model over an OpenAI-compatible HTTP API\n"
    "\n"
    "Run 'vela <command> --help' for a command's options, 'vela --version' for the build.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if (command == "--version" || command == "version") {
    std::printf("vela %s\n", vela::vela_build_id());
    return 0;
  }
  if (command == "tensor-parallel-worker") return vela::cli::run_spawned_worker();
  // Held until the command returns: rank 0 of a tensor-parallel run closes the group then.
  std::shared_ptr<vela::TensorParallel> tensor_parallel;
  if (command == "generate" || command == "serve" || command == "bench")
    if (auto done = vela::cli::join_tensor_parallel(argc - 2, argv + 2, tensor_parallel))
      return *done;
  if (command == "generate") return vela::cli::run_generate(argc - 2, argv + 2);
  if (command == "info") return vela::cli::run_info(argc - 2, argv + 2);
  if (command == "tokenize") return vela::cli::run_tokenize(argc - 2, argv + 2);
  if (command == "quantize") return vela::cli::run_quantize(argc - 2, argv + 2);
  if (command == "imatrix") return vela::cli::run_imatrix(argc - 2, argv + 2);
  if (command == "synth") return vela::cli::run_synth(argc - 2, argv + 2);
  if (command == "bench") return vela::cli::run_bench(argc - 2, argv + 2);
  if (command == "serve") return vela::cli::run_serve(argc - 2, argv + 2);
  std::fprintf(stderr, "vela: unknown command '%s' (see vela --help)\n", command.c_str());
  return 2;
}
