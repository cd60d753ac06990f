#pragma once
// Entry points of the `vela` subcommands; each returns the process exit code.
namespace vela::cli {

int run_info(int argc, char** argv);
int run_tokenize(int argc, char** argv);
int run_generate(int argc, char** argv);
int run_quantize(int argc, char** argv);
int run_imatrix(int argc, char** argv);
int run_synth(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_bench_throughput(int argc, char** argv);  // `vela bench throughput`
int run_bench_serve(int argc, char** argv);       // `vela bench serve`
int run_bench_soak(int argc, char** argv);        // `vela bench serve --duration S`
int run_bench_matmul(int argc, char** argv);      // `vela bench matmul`
int run_bench_spec(int argc, char** argv);        // `vela bench spec`
int run_bench_mask(int argc, char** argv);        // `vela bench mask`
int run_serve(int argc, char** argv);

}  // namespace vela::cli
