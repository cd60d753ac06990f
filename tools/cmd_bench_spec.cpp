// `vela bench spec -m MODEL`: what speculative decoding costs and gives on this machine.
//  1. Verification cost: one forward pass over K + 1 tokens of a sequence (logits for each)
//     against a pass over 1 token, at the same context, median of several repetitions.
//  2. End to end, one stream: greedy decode tokens/s with speculation and without, the
//     acceptance rate, the mean accepted run and the speed-up; the outputs must be identical.
//     --replay-acceptance A replaces the proposals by ones of a known acceptance (the plain run's
//     output, each token right with probability A), to measure what the engine makes of a
//     proposer that good, whatever the model: prompt lookup is replaced outright; a proposer that
//     runs passes (a draft model, the MTP block) still runs them, so their cost is measured.
//  3. Acceptance by position in the run (what /metrics reports as
//     spec_decode_num_accepted_tokens_per_pos), for the end-to-end speculative run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cli_args.h"
#include "commands.h"
#include "engine/engine_factory.h"
#include "model/decoder_forward.h"
#include "speculative_flags.h"
#include "trace_option.h"

namespace vela::cli {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds of a pass over n tokens at positions [context, context + n), median of `reps`.
// verifying: a verification pass (a recurrent model saves its state after each token).
Result<double> pass_seconds(DecoderForward& fwd, KvCache& cache, const std::vector<int32_t>& table,
                            int32_t context, int32_t n, int32_t reps, std::vector<float>& logits,
                            bool verifying) {
  const size_t count = static_cast<size_t>(n);
  std::vector<int32_t> tokens(count), positions(count), seq(count, 0), rows(count);
  for (int32_t i = 0; i < n; ++i) {
    tokens[size_t(i)] = (i * 7919 + 13) % fwd.model().config().n_vocab;
    positions[size_t(i)] = context + i;
    rows[size_t(i)] = i;
  }
  ForwardBatch b;
  b.token_ids = tokens;
  b.positions = positions;
  b.seq_index = seq;
  b.block_tables = table;
  b.max_blocks_per_seq = int32_t(table.size());
  // A recurrent model's sequence runs on state slot 0 (the timed passes advance it: their cost
  // does not depend on its values) and, as the engine's verification does, saves its state after
  // each token but the last into slots 1, 2, ...
  const int32_t slot = 0;
  std::vector<StateCheckpointWrite> checkpoints;
  if (fwd.model().config().recurrent()) {
    b.state_slots = {&slot, 1};
    if (verifying)
      for (int32_t j = 0; j + 1 < n; ++j) checkpoints.push_back({0, context + 1 + j, 1 + j});
    b.state_checkpoints = checkpoints;
  }
  // Logits for every token of a verification pass; for the last token only when filling.
  b.logits_indices = std::span<const int32_t>(rows).last(
      std::min(count, fwd.options().max_logits > 0 ? size_t(fwd.options().max_logits) : 1));
  std::vector<double> times;
  for (int32_t r = 0; r <= reps; ++r) {
    const auto t0 = Clock::now();
    if (auto st = fwd.forward(b, cache, logits); !st) return st.error();
    if (r > 0) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median(times);
}

struct StreamResult {
  std::vector<int32_t> tokens;
  double decode_tokens_per_s = 0;
  EngineCounters counters;
};

// A proposer standing in for one of acceptance `rate`: it proposes the continuation `output` (the
// plain run's greedy output for `prompt`), each proposed token right with probability `rate`
// and otherwise another token, from `seed` (each repetition its own: a run of n tokens sees only
// a few dozen coins, and which come first decides much of an adaptive policy's run).
TokenProposer replay_proposer(const std::vector<int32_t>& prompt, std::vector<int32_t> output,
                              double rate, int32_t n_vocab, uint64_t seed) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return [prompt_size = prompt.size(), output = std::move(output), rate, n_vocab, rng](
             uint64_t, std::span<const int32_t> tokens, std::span<int32_t> out) {
    const size_t done = tokens.size() - prompt_size;
    int32_t n = 0;
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    for (; size_t(n) < out.size() && done + size_t(n) < output.size(); ++n) {
      const int32_t right = output[done + size_t(n)];
      out[size_t(n)] = coin(*rng) < rate ? right : (right + 1) % n_vocab;
    }
    return n;
  };
}

// replay: proposals of a known acceptance, standing in for the method's own (a lookup replaces
// prompt lookup; a proposer that runs passes still runs them, its tokens replaced).
Result<StreamResult> run_stream(const EngineOptions& o, const std::vector<int32_t>& prompt,
                                int32_t n_gen, const TokenProposer& replay = {}) {
  auto engine = make_engine(o);
  if (!engine) return engine.error();
  if (replay) {
    if ((*engine)->config().speculative.method == SpecMethod::kNgram)
      (*engine)->set_proposer(replay);
    else
      (*engine)->set_proposal_replay(replay);
  }
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n_gen;
  p.ignore_eos = true;
  StreamResult out;
  Clock::time_point first, last;
  auto id = (*engine)->add_request(prompt, p, 0, [&](const RequestEvent& e) {
    if (e.token >= 0) {
      if (first == Clock::time_point{}) first = Clock::now();
      last = Clock::now();
    }
    if (e.finished) out.tokens = e.output->token_ids;
  });
  if (!id) return id.error();
  while ((*engine)->has_unfinished())
    if (auto st = (*engine)->step(); !st) return st.error();
  const double seconds = std::chrono::duration<double>(last - first).count();
  out.decode_tokens_per_s = seconds > 0 ? double(out.tokens.size() - 1) / seconds : 0;
  out.counters = (*engine)->counters();
  return out;
}

}  // namespace

int run_bench_spec(int argc, char** argv) {
  std::vector<Flag> flags = {
      {"model", 'm', "FILE", "GGUF model file"},
      {"threads", 't', "N", "threads (default: physical cores)"},
      {"context", 'c', "N", "context the verification passes run at (default 128)"},
      {"repetitions", 'r', "N",
       "passes per verification measurement, and end-to-end runs of each kind (default 5)"},
      {"n-gen", 'n', "N", "tokens generated per end-to-end run (default 64; 0 = skip)"},
      {"prompt", 'p', "TEXT", "end-to-end prompt (default: a passage that repeats itself)"},
      {"prompt-file", 0, "FILE", "read the prompt from FILE"},
      {"replay-acceptance", 0, "A",
       "instead of the method's proposer, propose the plain run's own output with each token "
       "right with probability A in [0, 1]: the speed-up a proposer of that acceptance gives"},
      {"trace", 0, "FILE", "write a Chrome/Perfetto trace of the passes and runs to FILE"}};
  Args args("bench spec", "-m MODEL.gguf [options]", flags);
  add_speculative_flags(args);
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  if (!args.has("model") || !args.positional().empty()) {
    std::fprintf(stderr, "vela bench spec: expected -m MODEL (see --help)\n");
    return 2;
  }
  auto threads = args.get_int("threads", 0, 0, 1024);
  auto context = args.get_int("context", 128, 1, 1 << 16);
  auto reps = args.get_int("repetitions", 5, 1, 1000);
  auto n_gen = args.get_int("n-gen", 64, 0, 1 << 16);
  auto spec = read_speculative_flags(args);
  auto replay = args.get_float("replay-acceptance", 0.0, 0.0, 1.0);
  for (const Error* e : {threads ? nullptr : &threads.error(), context ? nullptr : &context.error(),
                         reps ? nullptr : &reps.error(), n_gen ? nullptr : &n_gen.error(),
                         spec ? nullptr : &spec.error(), replay ? nullptr : &replay.error()}) {
    if (e) {
      std::fprintf(stderr, "%s\n", e->message.c_str());  // the flag errors name the command
      return 2;
    }
  }
  if (spec->method == "none") spec->method = spec->draft_model.empty() ? "ngram" : "draft";
  const int32_t k = spec->num_speculative_tokens;
  if (k < 1 || k > kMaxSpeculativeTokens) {
    std::fprintf(stderr, "vela bench spec: --num-speculative-tokens must be in [1, %d]\n",
                 kMaxSpeculativeTokens);
    return 2;
  }
  const std::string path = args.get("model");
  auto model = Model::load(path);
  if (!model) {
    std::fprintf(stderr, "vela bench spec: %s\n", model.message().c_str());
    return 1;
  }

  TraceOption trace_file(args.get("trace"), "bench spec");
  // 1. Verification cost.
  {
    const int32_t ctx = int32_t(*context);
    ForwardOptions fo;
    fo.max_batch_tokens = std::max(std::min(ctx, 512), k + 1);
    fo.max_logits = k + 1;
    fo.max_context = ctx + k + 1;
    fo.n_threads = int32_t(*threads);
    DecoderForward fwd(*model, fo);
    const ModelConfig& mc = (*model)->config();
    const KvCacheConfig kc = model_cache_config(mc, 16, (ctx + k + 1 + 15) / 16, KvType::kF16,
                                                mc.recurrent() ? k + 1 : 0);
    KvCache cache(kc);
    std::vector<int32_t> table(size_t(kc.n_blocks));
    for (int32_t i = 0; i < kc.n_blocks; ++i) table[size_t(i)] = i;
    std::vector<float> logits(size_t(k + 1) * size_t(mc.n_vocab));
    // Fill the context in chunks, then time passes after it.
    for (int32_t done = 0; done < ctx;) {
      const int32_t n = std::min(fo.max_batch_tokens, ctx - done);
      if (auto t = pass_seconds(fwd, cache, table, done, n, 0, logits, false); !t) {
        std::fprintf(stderr, "vela bench spec: %s\n", t.message().c_str());
        return 1;
      }
      done += n;
    }
    auto one = pass_seconds(fwd, cache, table, ctx, 1, int32_t(*reps), logits, true);
    auto many = pass_seconds(fwd, cache, table, ctx, k + 1, int32_t(*reps), logits, true);
    if (!one || !many) {
      std::fprintf(stderr, "vela bench spec: %s\n", (one ? many : one).message().c_str());
      return 1;
    }
    std::printf(
        "verification at context %d, %d threads: 1 token %.2f ms, %d tokens %.2f ms: "
        "%.3fx\n",
        ctx, fwd.n_threads(), *one * 1e3, k + 1, *many * 1e3, *many / *one);
  }

  // 2. End to end, one stream.
  if (*n_gen > 0) {
    std::string text = args.get("prompt");
    if (args.has("prompt-file")) {
      std::ifstream in(args.get("prompt-file"));
      text.assign(std::istreambuf_iterator<char>(in), {});
    }
    if (text.empty())
      text =
          "The server keeps a queue of requests. Each request has a prompt and a budget. The "
          "server keeps a queue of requests. Each request has a prompt and a budget. The server";
    EngineOptions o;
    o.model_path = path;
    o.n_threads = int32_t(*threads);
    o.max_num_seqs = 1;
    o.max_context = 1024;
    auto tok = Tokenizer::from_gguf((*model)->gguf());
    if (!tok) {
      std::fprintf(stderr, "vela bench spec: %s\n", tok.message().c_str());
      return 1;
    }
    const std::vector<int32_t> prompt = tok->encode(text, true, true);
    EngineOptions spec_options = o;
    apply_speculative_flags(*spec, spec_options);
    // Plain and speculative runs alternate, so a change in the machine's load hits both; the
    // medians are reported.
    std::vector<double> plain_rates, spec_rates;
    EngineCounters c;  // the speculative runs' proposals, summed
    Result<StreamResult> plain = make_error("no run"), fast = make_error("no run");
    const bool replaying = args.has("replay-acceptance");
    for (int32_t rep = 0; rep < *reps; ++rep) {
      plain = run_stream(o, prompt, int32_t(*n_gen));
      fast = !plain      ? plain
             : replaying ? run_stream(spec_options, prompt, int32_t(*n_gen),
                                      replay_proposer(prompt, plain->tokens, *replay,
                                                      (*model)->config().n_vocab, 1234 + rep))
                         : run_stream(spec_options, prompt, int32_t(*n_gen));
      if (!plain || !fast) {
        std::fprintf(stderr, "vela bench spec: %s\n", (plain ? fast : plain).message().c_str());
        return 1;
      }
      plain_rates.push_back(plain->decode_tokens_per_s);
      spec_rates.push_back(fast->decode_tokens_per_s);
      const EngineCounters& f = fast->counters;
      c.spec_drafts += f.spec_drafts;
      c.spec_draft_tokens += f.spec_draft_tokens;
      c.spec_accepted_tokens += f.spec_accepted_tokens;
      for (size_t i = 0; i < c.spec_accepted_at.size(); ++i)
        c.spec_accepted_at[i] += f.spec_accepted_at[i];
    }
    plain->decode_tokens_per_s = median(plain_rates);
    fast->decode_tokens_per_s = median(spec_rates);
    const double acceptance =
        c.spec_draft_tokens ? double(c.spec_accepted_tokens) / double(c.spec_draft_tokens) : 0;
    const double mean_run =
        c.spec_drafts ? double(c.spec_accepted_tokens) / double(c.spec_drafts) : 0;
    std::printf(
        "end to end (%s, K=%d%s), prompt %zu tokens, %zu generated: plain %.2f tok/s, "
        "speculative %.2f tok/s: %.3fx; over the repetitions %llu runs, %llu proposed, %llu "
        "accepted "
        "(acceptance %.3f, mean accepted per run %.2f); outputs %s\n",
        replaying ? ("replayed output, each token right with probability " +
                     std::to_string(*replay).substr(0, 4))
                        .c_str()
                  : spec->method.c_str(),
        k, spec->adaptive ? ", adaptive" : "", prompt.size(), plain->tokens.size(),
        plain->decode_tokens_per_s, fast->decode_tokens_per_s,
        fast->decode_tokens_per_s / std::max(plain->decode_tokens_per_s, 1e-12),
        (unsigned long long)c.spec_drafts, (unsigned long long)c.spec_draft_tokens,
        (unsigned long long)c.spec_accepted_tokens, acceptance, mean_run,
        plain->tokens == fast->tokens ? "identical" : "DIFFER");
    std::printf("acceptance by position:");
    for (int32_t pos = 0; pos < k; ++pos) {
      // Proposal pos is verified in the runs that accepted every proposal before it.
      const uint64_t reached = pos == 0 ? c.spec_drafts : c.spec_accepted_at[size_t(pos - 1)];
      std::printf(" %d: %.3f", pos + 1,
                  reached ? double(c.spec_accepted_at[size_t(pos)]) / double(reached) : 0.0);
    }
    std::printf("\n");
    if (plain->tokens != fast->tokens) return 1;
  }
  return trace_file.finish() ? 0 : 1;
}

}  // namespace vela::cli
