// `vela bench -m MODEL`: prompt-processing and generation speed (llama-bench style) for each
// thread count, from position 0 or after contexts of -d tokens, with the machine's measured
// bandwidth and arithmetic peak as the roofline (a tg test's bytes: the weights, the recurrent
// state and the K/V it attends). With
// --tensor-parallel-size / --pipeline-parallel-size the model is split over that many ranks
// (main() joined the group: spawned workers, or mpirun's ranks), each running -t threads; the
// report adds rank 0's communication share and each rank's bytes sent per token, and the
// roofline compares one rank's share of the work with one rank's ceiling.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "cli_args.h"
#include "commands.h"
#include "dist/tensor_group.h"
#include "kernels/cpu_features.h"
#include "model/expert_loading.h"
#include "model/model.h"
#include "moe_experts_flag.h"
#include "tensor_parallel_role.h"
#include "tools_support/bench/bench_report.h"
#include "tools_support/bench/model_bench.h"
#include "tools_support/bench/roofline.h"
#include "trace_option.h"
#include "util/trace.h"
#include "util/trace_profile.h"

namespace vela::cli {
namespace {}  // namespace

int run_bench(int argc, char** argv) {
  // Sub-benchmarks: `vela bench throughput ...` (serving engine, offline).
  if (argc > 0 && std::string_view(argv[0]) == "throughput")
    return run_bench_throughput(argc - 1, argv + 1);
  if (argc > 0 && std::string_view(argv[0]) == "matmul")
    return run_bench_matmul(argc - 1, argv + 1);
  if (argc > 0 && std::string_view(argv[0]) == "serve") return run_bench_serve(argc - 1, argv + 1);
  if (argc > 0 && std::string_view(argv[0]) == "mask") return run_bench_mask(argc - 1, argv + 1);
  if (argc > 0 && std::string_view(argv[0]) == "spec") return run_bench_spec(argc - 1, argv + 1);
  Args args("bench",
            "-m MODEL.gguf [options]   (also: vela bench throughput|serve|matmul|spec|mask --help)",
            {{"model", 'm', "FILE", "GGUF model file"},
             {"n-prompt", 'p', "N[,N..]", "prompt tokens per pp test; 0 = skip (default 512)"},
             {"n-gen", 'n', "N[,N..]", "generated tokens per tg test; 0 = skip (default 128)"},
             {"n-depth", 'd', "N[,N..]",
              "tokens of context computed (untimed) before each pp and tg test, as llama-bench's "
              "\"tg128 @ d4096\" (default 0)"},
             {"batch-size", 'b', "N", "prompt tokens per forward pass (default 512)"},
             {"threads", 't', "N[,N..]", "thread counts (default: physical cores)"},
             {"repetitions", 'r', "N", "repetitions of each test (default 3)"},
             {"output", 'o', "FORMAT", "md (default) or json"},
             {"bw-mib", 0, "N",
              "bandwidth test buffer in MiB (default: 4x the last-level cache, >= 256)"},
             {"no-roofline", 0, "", "skip the bandwidth and peak measurements"},
             {"profile", 0, "",
              "time each forward-pass part, layer and operation; print a table with their share "
              "of the pass"},
             {"trace", 0, "FILE", "write a Chrome/Perfetto trace of the runs to FILE"},
             {"tensor-parallel-size", 0, "N", kTensorParallelHelp},
             {"pipeline-parallel-size", 0, "N", kPipelineParallelHelp},
             {"moe-experts", 0, "MODE", kMoeExpertsHelp}});
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  if (!args.has("model") || !args.positional().empty()) {
    std::fprintf(stderr, "vela bench: expected -m MODEL (see --help)\n");
    return 2;
  }
  const std::string format = args.get("output", "md");
  if (format != "md" && format != "json") {
    std::fprintf(stderr, "vela bench: --output must be md or json, got '%s'\n", format.c_str());
    return 2;
  }
  const int32_t default_threads = cpu_features().physical_cores;
  auto prompts = args.get_int_list("n-prompt", 512, 0, 1 << 20);
  auto gens = args.get_int_list("n-gen", 128, 0, 1 << 20);
  auto depths = args.get_int_list("n-depth", 0, 0, 1 << 20);
  auto threads = args.get_int_list("threads", default_threads, 1, 1024);
  auto batch = args.get_int("batch-size", 512, 1, 1 << 16);
  auto reps = args.get_int("repetitions", 3, 1, 1000);
  auto bw_mib = args.get_int("bw-mib", 0, 1, 1 << 20);
  auto tensor_parallel = args.get_int("tensor-parallel-size", 1, 1, 256);
  auto pipeline_parallel = args.get_int("pipeline-parallel-size", 1, 1, 256);
  auto moe_experts = read_moe_experts(args);
  for (const Error* e :
       {prompts ? nullptr : &prompts.error(), gens ? nullptr : &gens.error(),
        depths ? nullptr : &depths.error(), threads ? nullptr : &threads.error(),
        batch ? nullptr : &batch.error(), reps ? nullptr : &reps.error(),
        bw_mib ? nullptr : &bw_mib.error(), tensor_parallel ? nullptr : &tensor_parallel.error(),
        pipeline_parallel ? nullptr : &pipeline_parallel.error(),
        moe_experts ? nullptr : &moe_experts.error()}) {
    if (e) {
      std::fprintf(stderr, "%s\n", e->message.c_str());
      return 2;
    }
  }
  int32_t max_prompt = 0, max_gen = 0, max_depth = 0;
  for (int32_t p : *prompts) max_prompt = std::max(max_prompt, p);
  for (int32_t n : *gens) max_gen = std::max(max_gen, n);
  for (int32_t d : *depths) max_depth = std::max(max_depth, d);
  if (max_prompt == 0 && max_gen == 0) {
    std::fprintf(stderr, "vela bench: nothing to run (-p and -n are both 0)\n");
    return 2;
  }

  const std::string path = args.get("model");
  const dist::ParallelSizes sizes{int32_t(*tensor_parallel), int32_t(*pipeline_parallel)};
  // The group main() joined (this is world rank 0): the same sizes return the same group.
  std::shared_ptr<TensorParallel> group;
  if (sizes.ranks() > 1) {
    auto joined = dist::join(sizes);
    if (!joined) {
      std::fprintf(stderr, "vela bench: %s\n", joined.message().c_str());
      return 1;
    }
    group = std::move(*joined);
  }
  ModelLoadOptions load_options;
  load_options.shard = {0, sizes.tensor, 0, sizes.pipeline};
  {
    // auto: the bench's KV cache is small beside the weights, so the file alone decides.
    auto file = GgufFile::open(path);
    if (!file) {
      std::fprintf(stderr, "vela bench: %s\n", file.message().c_str());
      return 1;
    }
    const auto requested = *parse_expert_placement(*moe_experts);
    const uint64_t file_bytes = file->file_size(), expert_bytes = routed_expert_bytes(*file);
    const MemoryLimits limits = read_memory_limits();
    const ExpertPlacement placed =
        choose_expert_placement(requested, 0, file_bytes, expert_bytes, limits);
    if (requested == ExpertPlacement::kAuto && expert_bytes > 0)
      std::fprintf(stderr, "vela bench: %s\n",
                   describe_expert_choice(placed, 0, file_bytes, expert_bytes, limits).c_str());
    load_options.repack_experts = placed != ExpertPlacement::kMapped;
  }
  auto model = Model::load(path, load_options);
  if (!model) {
    std::fprintf(stderr, "vela bench: %s\n", model.message().c_str());
    return 1;
  }
  // --profile records the same spans as --trace, in memory.
  const bool profile = args.has("profile");
  TraceOption trace_file(args.get("trace"), "bench");
  std::unique_ptr<trace::Recorder> profiler;
  if (profile && !trace_file.on()) {
    profiler = std::make_unique<trace::Recorder>();
    trace::Recorder::install(profiler.get());
  }
  bench::BenchReport report;
  report.model_path = path;
  const uint64_t file_bytes = uint64_t((*model)->gguf().file_size());
  report.model = bench::profile_model(**model, path, file_bytes);
  report.tensor_parallel = sizes.tensor;
  report.pipeline_parallel = sizes.pipeline;
  report.rank_model = report.model;
  if (group) {
    // The whole model's figures from an unsplit view of the same mapping (not repacked: only
    // the matrices' shapes and types are read).
    ModelLoadOptions whole_options;
    whole_options.repack_weights = false;
    auto whole = Model::load(path, whole_options);
    if (!whole) {
      std::fprintf(stderr, "vela bench: %s\n", whole.message().c_str());
      return 1;
    }
    report.model = bench::profile_model(**whole, path, file_bytes);
    report.rank_model =
        bench::per_rank_profile(report.rank_model, report.model, (*model)->config().n_layer,
                                (*model)->whole_config().n_layer, sizes.tensor);
  }
  // The roofline's work: one rank's share of a split model.
  const bench::ModelProfile& work = report.rank_model;
  report.cpu = describe_cpu();
  report.isa = kernel_isa_name(selected_kernel_isa());
  report.threads_supported = bench::forward_supports_threads();
  if (!report.threads_supported && (threads->size() > 1 || threads->front() > 1))
    std::fprintf(stderr,
                 "vela bench: note: this build's forward pass is single-threaded; -t is nominal\n");
  const bool roofline = !args.has("no-roofline");
  if (roofline)
    report.bandwidth_buffer_bytes =
        *bw_mib > 0 ? size_t(*bw_mib) << 20 : bench::default_bandwidth_buffer_bytes();

  for (int32_t t : *threads) {
    bench::Roofline ceiling;
    ceiling.n_threads = t;
    if (roofline) {
      std::fprintf(stderr, "vela bench: measuring the roofline with %d thread(s)...\n", t);
      ceiling = bench::measure_roofline(t, selected_kernel_isa(), report.bandwidth_buffer_bytes);
      report.rooflines.push_back(ceiling);
    }
    const auto measure = [&](bench::CeilingKind kind) {
      return bench::measure_ceiling(kind, t, selected_kernel_isa(), report.bandwidth_buffer_bytes);
    };
    bench::ModelBench runner(*model, t, int32_t(*batch), max_prompt, max_gen, 1234, group,
                             max_depth);
    if (group) {
      // The other ranks build their slices for this runner's passes, with t threads each.
      dist::ShardSetup setup;
      setup.model_path = path;
      setup.max_batch_tokens = runner.n_batch();
      setup.max_logits = 1;
      setup.max_context = runner.max_context();
      setup.n_threads = t;
      setup.kv = runner.cache_config();
      if (auto st = dist::start_workers(*group, setup); !st) {
        std::fprintf(stderr, "vela bench: %s\n", st.message().c_str());
        return 1;
      }
    }
    // Untimed passes (the warm-up, a context's) stay out of --profile and --trace, which then
    // show the timed runs' passes alone (a 512-token warm-up would swamp a tg profile).
    const auto untraced = [](const auto& work) -> Status {
      trace::Recorder* recorder = trace::Recorder::active();
      trace::Recorder::uninstall();
      Status st = work();
      if (recorder != nullptr) trace::Recorder::install(recorder);
      return st;
    };
    if (auto st = untraced([&] { return runner.warmup(); }); !st) {
      std::fprintf(stderr, "vela bench: %s\n", st.message().c_str());
      return 1;
    }
    // Every rank's totals after the warm-up: each test's figures are the change from the last.
    std::vector<TensorParallelTraffic> gathered;
    if (group) gathered = group->gather_traffic();
    const auto run_test = [&](int32_t n_prompt, int32_t n_gen) -> bool {
      bench::TestResult r;
      r.n_prompt = n_prompt;
      r.n_gen = n_gen;
      r.n_depth = runner.depth();
      r.n_batch = int32_t(std::min<int64_t>(*batch, std::max(n_prompt, 1)));
      r.n_threads = t;
      r.test = bench::test_name(n_prompt, n_gen, r.n_depth);
      const bench::CeilingKind kind =
          n_prompt > 0 ? bench::prompt_ceiling(work, ceiling) : bench::CeilingKind::kReadBandwidth;
      r.work_per_run = n_prompt > 0 ? bench::prompt_flops(work, n_prompt, int32_t(*batch))
                                    : bench::generation_bytes(work, r.n_depth, n_gen);
      r.ceiling_name = bench::ceiling_name(kind);
      // The ceiling next to each run: measured before the first and after every run, a run
      // taking the mean of the two around it.
      double ceiling_before = roofline ? measure(kind) : 0;
      r.step_seconds.reserve(size_t(n_gen) * size_t(*reps));  // no allocation between steps
      for (int64_t i = 0; i < *reps; ++i) {
        const TensorParallelTraffic before = group ? group->traffic() : TensorParallelTraffic{};
        auto s = n_prompt > 0 ? runner.run_prompt(n_prompt)
                              : runner.run_generation(n_gen, &r.step_seconds);
        if (!s) {
          std::fprintf(stderr, "vela bench: %s\n", s.message().c_str());
          return false;
        }
        r.seconds.push_back(*s);
        if (roofline) {
          const double ceiling_after = measure(kind);
          r.ceilings.push_back((ceiling_before + ceiling_after) / 2);
          ceiling_before = ceiling_after;
        }
        if (group) {
          r.forward_seconds += *s;  // a run is its forward passes alone
          r.communication_seconds += group->traffic().seconds - before.seconds;
        }
        std::fprintf(stderr, "vela bench: %s, %d thread(s), run %lld/%lld: %.2f t/s\n",
                     r.test.c_str(), t, (long long)i + 1, (long long)*reps,
                     r.tokens() / std::max(*s, 1e-12));
      }
      if (group) {
        std::vector<TensorParallelTraffic> now = group->gather_traffic();
        r.ranks = traffic_since(gathered, now);
        gathered = std::move(now);
      }
      report.results.push_back(std::move(r));
      return true;
    };
    for (int32_t d : *depths) {
      if (d > 0)
        std::fprintf(stderr, "vela bench: computing a context of %d tokens, %d thread(s)...\n", d,
                     t);
      if (auto st = untraced([&] { return runner.set_depth(d); }); !st) {
        std::fprintf(stderr, "vela bench: %s\n", st.message().c_str());
        return 1;
      }
      for (int32_t p : *prompts)
        if (p > 0 && !run_test(p, 0)) return 1;
      for (int32_t n : *gens)
        if (n > 0 && !run_test(0, n)) return 1;
    }
  }
  const std::string out =
      format == "json" ? bench::format_json(report) : bench::format_markdown(report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (profile) {
    trace::Recorder::uninstall();
    const trace::Recorder* source = trace_file.on() ? trace_file.recorder() : profiler.get();
    // The timed runs' own clock, which the spans are held against.
    double run_seconds = 0;
    for (const bench::TestResult& r : report.results)
      for (const double s : r.seconds) run_seconds += s;
    const std::string table =
        trace::format_profile(trace::profile_forward(source->events(), run_seconds));
    std::fwrite(table.data(), 1, table.size(), stdout);
  }
  return trace_file.finish() ? 0 : 1;
}

}  // namespace vela::cli
