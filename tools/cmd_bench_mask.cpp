// `vela bench mask`: the constraint engine's costs on a real vocabulary: schema compile time
// (P50/P99 over a corpus), and per-token mask cost (fill the allowed-token bitmask and apply it
// to a logits row) along random walks, cold (first walk: masks computed) and warm (cached).
// --synth N grows the vocabulary to N tokens with concatenations of its pieces, to measure
// large (150k-class) vocabularies.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cli_args.h"
#include "commands.h"
#include "constraint/constraint.h"
#include "io/gguf.h"
#include "sampling/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace vela::cli {

namespace {

using Clock = std::chrono::steady_clock;

const char* const kCorpus[] = {
    R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]})",
    R"({"type":"object","properties":{"id":{"type":"string","format":"uuid"},"when":{"type":"string","format":"date-time"},"tags":{"type":"array","items":{"type":"string"},"maxItems":8}},"required":["id","when","tags"]})",
    R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"number"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["value"]}},"$ref":"#/$defs/node"})",
    R"({"type":"array","items":{"enum":["red","green","blue","cyan","magenta","yellow","black","white"]},"minItems":1})",
    R"({"anyOf":[{"type":"object","properties":{"ok":{"const":true},"result":{"type":"string"}},"required":["ok","result"]},{"type":"object","properties":{"ok":{"const":false},"error":{"type":"string","maxLength":64}},"required":["ok","error"]}]})",
    R"({"type":"object","properties":{"user":{"type":"object","properties":{"first":{"type":"string"},"last":{"type":"string"},"email":{"type":"string","format":"email"},"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["street","city","zip"]}},"required":["first","last","address"]},"active":{"type":"boolean"},"score":{"type":"integer","minimum":0,"maximum":100}},"required":["user","active","score"]})",
    R"({"type":"object","properties":{"query":{"type":"string"},"filters":{"type":"array","items":{"type":"object","properties":{"field":{"type":"string"},"op":{"enum":["eq","ne","lt","gt"]},"value":{"type":["string","number","null"]}},"required":["field","op","value"]}},"limit":{"type":"integer","minimum":1,"maximum":1000}},"required":["query","filters"]})",
    R"({"type":"string","pattern":"^[A-Z][a-z]+( [A-Z][a-z]+)*$"})",
    R"({})",
    R"({"type":"object","additionalProperties":{"type":"array","items":{"type":"integer"}}})",
};

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

int run_bench_mask(int argc, char** argv) {
  Args args("bench mask", "--vocab FILE.gguf [options]",
            {{"vocab", 0, "FILE", "GGUF file whose tokenizer gives the vocabulary"},
             {"synth", 0, "N", "grow the vocabulary to N tokens with concatenated pieces"},
             {"steps", 0, "N", "tokens per random walk (default 256)"},
             {"walks", 0, "N", "random walks per schema (default 4)"},
             {"compiles", 0, "N", "compilations per schema for compile time (default 20)"}});
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  const auto synth = args.get_int("synth", 0, 0, 10'000'000);
  const auto steps = args.get_int("steps", 256, 1, 1'000'000);
  const auto walks = args.get_int("walks", 4, 1, 10'000);
  const auto compiles = args.get_int("compiles", 20, 1, 10'000);
  if (!synth || !steps || !walks || !compiles || !args.has("vocab")) {
    std::fprintf(stderr, "vela bench mask: expected --vocab FILE.gguf and numeric options\n");
    return 2;
  }
  auto gguf = GgufFile::open(args.get("vocab"));
  if (!gguf) {
    std::fprintf(stderr, "vela bench mask: %s\n", gguf.message().c_str());
    return 1;
  }
  auto tok = Tokenizer::from_gguf(*gguf);
  if (!tok) {
    std::fprintf(stderr, "vela bench mask: %s\n", tok.message().c_str());
    return 1;
  }
  std::vector<std::string> pieces;
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tok->n_vocab(); ++id) {
    if (tok->is_eog(id)) eog.push_back(id);
    pieces.push_back(tok->is_eog(id) ? std::string() : std::string(tok->piece_view(id)));
  }
  std::mt19937_64 rng(1);
  const size_t base = pieces.size();
  while (int64_t(pieces.size()) < *synth) {
    const std::string& a = pieces[rng() % base];
    const std::string& b = pieces[rng() % base];
    if (!a.empty() && !b.empty() && a.size() + b.size() <= 24) pieces.push_back(a + b);
  }
  const auto vocab = std::make_shared<const constraint::TokenVocabulary>(std::move(pieces), eog);

  std::vector<double> compile_s, first_mask_s, cold_us, warm_us;
  std::vector<float> logits(size_t(vocab->n_vocab()));
  for (const char* schema : kCorpus) {
    StructuredOutputs spec;
    spec.json = schema;
    std::shared_ptr<const constraint::CompiledGrammar> grammar;
    for (int64_t c = 0; c < *compiles; ++c) {
      constraint::ConstraintCompiler compiler([vocab] { return vocab; });
      const auto t = Clock::now();
      auto g = compiler.compile(spec);
      compile_s.push_back(seconds_since(t));
      if (!g) {
        std::fprintf(stderr, "vela bench mask: %s\n", g.message().c_str());
        return 1;
      }
      grammar = *g;
    }
    for (int64_t w = 0; w < 2 * *walks; ++w) {
      const bool warm = w >= *walks;  // the second round revisits the first round's states
      std::mt19937_64 walk_rng(uint64_t(w % *walks));
      constraint::SequenceConstraint seq(grammar);
      for (int64_t s = 0; s < *steps; ++s) {
        for (float& x : logits) x = float(walk_rng() % 1000) * 1e-2f;
        const auto t = Clock::now();
        const auto mask = seq.mask();
        sampling::mask_disallowed(logits, mask);
        const double us = seconds_since(t) * 1e6;
        if (s == 0 && w == 0) first_mask_s.push_back(us * 1e-6);
        (warm ? warm_us : cold_us).push_back(us);
        // A random allowed token (uniform, as a random-weight model would pick).
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < vocab->n_vocab(); ++id)
          if ((mask[size_t(id) >> 6] >> (id & 63)) & 1) allowed.push_back(id);
        const int32_t pick = allowed[walk_rng() % allowed.size()];
        if (std::find(eog.begin(), eog.end(), pick) != eog.end() || !seq.accept(pick)) break;
        if (seq.finished()) break;
      }
    }
  }
  const auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / double(v.size());
  };
  std::printf("vocabulary: %d tokens; %zu schemas\n\n", vocab->n_vocab(), std::size(kCorpus));
  std::printf("| measure | P50 | P99 | mean |\n|---|---|---|---|\n");
  std::printf("| schema compile (ms) | %.3f | %.3f | %.3f |\n", pct(compile_s, 0.5) * 1e3,
              pct(compile_s, 0.99) * 1e3, mean(compile_s) * 1e3);
  std::printf("| first mask of a schema (ms) | %.2f | %.2f | %.2f |\n",
              pct(first_mask_s, 0.5) * 1e3, pct(first_mask_s, 0.99) * 1e3,
              mean(first_mask_s) * 1e3);
  std::printf("| mask per token, cold walk (us) | %.1f | %.1f | %.1f |\n", pct(cold_us, 0.5),
              pct(cold_us, 0.99), mean(cold_us));
  std::printf("| mask per token, warm walk (us) | %.1f | %.1f | %.1f |\n", pct(warm_us, 0.5),
              pct(warm_us, 0.99), mean(warm_us));
  return 0;
}

}  // namespace vela::cli
