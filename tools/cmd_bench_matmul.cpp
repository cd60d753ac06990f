// `vela bench matmul`: one weight matrix times 1, 2, 4 ... activation rows, as the forward pass
// runs it (activations quantized, rows split over the thread pool), for each weight type and
// layout. The matrix is copied until the copies outgrow the last-level cache and the calls
// rotate through them, so a single row is bound by memory as in decoding. Reports each batch's
// cost relative to one row (the batched-decode scaling the kernels issue asks for) and GMAC/s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "commands.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/packed/packed_layout.h"
#include "quant/ggml_type.h"
#include "quant/quantize.h"
#include "tools_support/bench/roofline.h"
#include "tools_support/quant_recipe.h"
#include "util/huge_pages.h"
#include "util/thread_pool.h"

namespace vela::cli {
namespace {

struct Case {
  GgmlType type;
  WeightLayout layout;
  int64_t n_tokens;
  double seconds = 0;  // median per call
};

// The tensor type whose GGUF name is `name`, if any.
std::optional<GgmlType> tensor_type_named(const std::string& name) {
  for (uint32_t type = 0; type < 64; ++type)
    if (ggml_type_info(type) && ggml_type_name(type) == name) return static_cast<GgmlType>(type);
  return std::nullopt;
}

const char* layout_name(WeightLayout l) {
  return l == WeightLayout::kInterleaved16 ? "interleaved16" : "row-major";
}

}  // namespace

int run_bench_matmul(int argc, char** argv) {
  Args args("bench matmul", "[options]",
            {{"type", 0, "T[,T..]", "weight types (default Q4_0,Q8_0)"},
             {"rows", 0, "N", "weight rows (default 5632, TinyLlama's FFN)"},
             {"cols", 0, "N", "weight columns (default 2048)"},
             {"tokens", 0, "N[,N..]", "activation rows (default 1,2,4,8,16,32,64,512)"},
             {"threads", 't', "N", "threads (default: physical cores)"},
             {"repetitions", 'r', "N", "calls timed per case; the median is kept (default 9)"},
             {"working-set-mib", 0, "N",
              "bytes of weight copies the calls rotate through (default: 4x the last-level "
              "cache, >= 256)"},
             {"output", 'o', "md|json", "output format (default md)"}});
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  auto rows = args.get_int("rows", 5632, 16, 1 << 20);
  auto cols = args.get_int("cols", 2048, 256, 1 << 20);
  auto threads = args.get_int("threads", cpu_features().physical_cores, 1, 1024);
  auto reps = args.get_int("repetitions", 9, 1, 1000);
  auto working_set_mib = args.get_int(
      "working-set-mib", int64_t(bench::default_bandwidth_buffer_bytes() >> 20), 1, 1 << 20);
  auto tokens = args.get_int_list("tokens", 0, 1, 8192);  // 0: the default list below
  for (const Result<int64_t>* r : {&rows, &cols, &threads, &reps, &working_set_mib})
    if (!*r) {
      std::fprintf(stderr, "vela bench matmul: %s\n", r->message().c_str());
      return 2;
    }
  if (!tokens) {
    std::fprintf(stderr, "%s\n", tokens.message().c_str());
    return 2;
  }
  if (!args.has("tokens")) *tokens = {1, 2, 4, 8, 16, 32, 64, 512};
  if (*rows % 16 != 0 || *cols % 256 != 0) {
    std::fprintf(stderr, "vela bench matmul: --rows must be a multiple of 16 and --cols of 256\n");
    return 2;
  }
  std::vector<GgmlType> types;
  {
    const std::string list = args.get("type", "Q4_0,Q8_0");
    size_t pos = 0;
    while (pos <= list.size()) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      const std::string name = list.substr(pos, comma - pos);
      // A tensor type's own name first: IQ2_S also names a mix, whose base type is IQ2_XS.
      std::optional<GgmlType> t = tensor_type_named(name);
      if (!t) {
        auto target = parse_quant_target(name);
        if (target && !target->k_mix) t = target->base;
      }
      if (!t || !can_quantize(*t)) {
        std::fprintf(stderr, "vela bench matmul: unsupported --type '%s'\n", name.c_str());
        return 2;
      }
      types.push_back(*t);
      pos = comma + 1;
    }
  }
  const std::string format = args.get("output", "md");
  if (format != "md" && format != "json") {
    std::fprintf(stderr, "vela bench matmul: --output must be md or json\n");
    return 2;
  }

  ThreadPool pool(static_cast<int32_t>(*threads));
  const int64_t n_max = *std::max_element(tokens->begin(), tokens->end());
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_max * *cols));
  for (float& v : x) v = normal(rng);
  std::vector<float> y(static_cast<size_t>(n_max * *rows));
  MatmulScratch scratch;
  MatmulSplit split;

  std::vector<Case> results;
  for (GgmlType type : types) {
    // One matrix, then copies filling the working set (by default 4x the last-level cache).
    std::vector<float> row(static_cast<size_t>(*cols));
    const int64_t row_bytes_n = row_bytes(*ggml_type_info(uint32_t(type)), *cols);
    const size_t matrix_bytes = size_t(row_bytes_n * *rows);
    std::vector<uint8_t> one(static_cast<size_t>(matrix_bytes));
    for (int64_t r = 0; r < *rows; ++r) {
      for (float& v : row) v = 0.02f * normal(rng);
      quantize_row(type, row.data(), one.data() + size_t(r) * size_t(row_bytes_n), *cols);
    }
    const size_t copies = std::max<size_t>(1, (size_t(*working_set_mib) << 20) / matrix_bytes);
    for (WeightLayout layout : {WeightLayout::kRowMajor, WeightLayout::kInterleaved16}) {
      if (layout == WeightLayout::kInterleaved16 && !prefers_interleaved16(type, *rows, *cols))
        continue;
      const size_t stored_bytes = layout == WeightLayout::kInterleaved16
                                      ? size_t(*rows / 16 * interleaved16_group_bytes(type, *cols))
                                      : matrix_bytes;
      // On huge pages, as a model's repacked weights are.
      const HugePageBuffer weights = allocate_huge_pages(stored_bytes * copies);
      if (!weights) {
        std::fprintf(stderr, "vela bench matmul: out of memory for %zu copies of %zu bytes\n",
                     copies, stored_bytes);
        return 1;
      }
      for (size_t c = 0; c < copies; ++c) {
        if (layout == WeightLayout::kInterleaved16)
          pack_interleaved16(type, one.data(), *cols, 0, *rows, weights.get() + c * stored_bytes);
        else
          std::copy(one.begin(), one.end(), weights.get() + c * stored_bytes);
      }
      size_t next = 0;
      for (int64_t n : *tokens) {
        const auto call = [&] {
          const void* w = weights.get() + (next++ % copies) * stored_bytes;
          const QuantizedActivations act =
              prepare_activations(type, x.data(), *cols, n, scratch, layout);
          convert_activations(act, x.data(), *cols, 0, n, scratch);
          split.clear();
          split.add(type, w, *rows, *cols, act, n, y.data(), layout);
          split.split(pool.n_threads());
          pool.parallel_for(split.n_chunks(), [&](int64_t c, int32_t) { split.run_chunk(c); });
        };
        call();  // warm-up
        std::vector<double> times;
        for (int64_t i = 0; i < *reps; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          call();
          times.push_back(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::nth_element(times.begin(), times.begin() + ptrdiff_t(times.size() / 2), times.end());
        results.push_back({type, layout, n, times[times.size() / 2]});
        std::fprintf(stderr, "vela bench matmul: %s %s %lld rows: %.3f ms\n",
                     ggml_type_name(uint32_t(type)).c_str(), layout_name(layout), (long long)n,
                     results.back().seconds * 1e3);
      }
    }
  }

  const auto single = [&](const Case& c) {
    for (const Case& o : results)
      if (o.type == c.type && o.layout == c.layout && o.n_tokens == 1) return o.seconds;
    return 0.0;
  };
  const double macs_per_token = double(*rows) * double(*cols);
  if (format == "json") {
    nlohmann::json out = {{"rows", *rows},
                          {"cols", *cols},
                          {"threads", *threads},
                          {"cpu", describe_cpu()},
                          {"results", nlohmann::json::array()}};
    for (const Case& c : results)
      out["results"].push_back(
          {{"type", ggml_type_name(uint32_t(c.type))},
           {"layout", layout_name(c.layout)},
           {"tokens", c.n_tokens},
           {"ms", c.seconds * 1e3},
           {"cost_vs_one_row", single(c) > 0 ? c.seconds / single(c) : 0},
           {"gmac_per_s", macs_per_token * double(c.n_tokens) / c.seconds / 1e9}});
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("matmul %lld x %lld, %lld thread(s), %s\n\n", (long long)*rows, (long long)*cols,
              (long long)*threads, describe_cpu().c_str());
  std::printf("| type | layout | rows of activations | ms | cost vs 1 row | GMAC/s |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Case& c : results)
    std::printf("| %s | %s | %lld | %.3f | %.2fx | %.1f |\n",
                ggml_type_name(uint32_t(c.type)).c_str(), layout_name(c.layout),
                (long long)c.n_tokens, c.seconds * 1e3, single(c) > 0 ? c.seconds / single(c) : 0.0,
                macs_per_token * double(c.n_tokens) / c.seconds / 1e9);
  return 0;
}

}  // namespace vela::cli
