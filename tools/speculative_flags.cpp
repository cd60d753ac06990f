#include "speculative_flags.h"

namespace vela::cli {

void add_speculative_flags(Args& args) {
  std::vector<Flag> flags;
  flags.push_back({"speculative-method", 0, "M",
                   "speculative decoding: mtp (the model's multi-token-prediction layers), ngram "
                   "(prompt lookup), draft, eagle3 (an EAGLE-3 head given as --draft-model), auto "
                   "(mtp where the file has them, else ngram) or none (default none; auto when "
                   "--num-speculative-tokens is given)"});
  flags.push_back({"draft-model", 0, "FILE",
                   "draft model with the same vocabulary, or an EAGLE-3 head (selects "
                   "--speculative-method draft or eagle3)"});
  flags.push_back(
      {"num-speculative-tokens", 0, "K", "proposals per step at most, 1-16 (default 4)"});
  flags.push_back(
      {"prompt-lookup-min", 0, "N", "shortest suffix the n-gram lookup matches (default 1)"});
  flags.push_back(
      {"prompt-lookup-max", 0, "N", "longest suffix the n-gram lookup matches (default 4)"});
  flags.push_back(
      {"no-spec-adaptive", 0, "",
       "always verify every proposal (default: only where measured costs predict a gain)"});
  flags.push_back({"speculative-draft-vocab", 0, "N",
                   "mtp proposes among the first N token ids only, cutting its output head to "
                   "N rows (BPE ids rise as tokens grow rarer; default 0 = whole vocabulary)"});
  args.add_group("Speculative decoding", flags);
}

Result<SpeculativeFlags> read_speculative_flags(const Args& args) {
  SpeculativeFlags f;
  // Asking for proposals without naming a method speculates with the best the file allows.
  f.method =
      args.get("speculative-method",
               args.has("num-speculative-tokens") && !args.has("draft-model") ? "auto" : "none");
  f.draft_model = args.get("draft-model");
  auto k = args.get_int("num-speculative-tokens", 4, -1000000, 1000000);
  if (!k) return k.error();
  auto lo = args.get_int("prompt-lookup-min", 1, -1000000, 1000000);
  if (!lo) return lo.error();
  auto hi = args.get_int("prompt-lookup-max", 4, -1000000, 1000000);
  if (!hi) return hi.error();
  f.num_speculative_tokens = int32_t(*k);
  f.prompt_lookup_min = int32_t(*lo);
  f.prompt_lookup_max = int32_t(*hi);
  auto vocab = args.get_int("speculative-draft-vocab", 0, -1000000000, 1000000000);
  if (!vocab) return vocab.error();
  f.draft_vocab = *vocab;
  f.adaptive = !args.has("no-spec-adaptive");
  return f;
}

}  // namespace vela::cli
