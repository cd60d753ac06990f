#include "engine/engine_proposer.h"

#include <cassert>

#include "spec/draft_model.h"
#include "spec/head_proposer.h"

namespace vela::engine_proposer {

namespace {

// The engine's batch, context and cache sizes, which every proposer running passes takes.
template <class Options>
Options sized_options(const EngineConfig& c) {
  Options o;
  o.max_seqs = c.scheduler.max_num_seqs;
  o.max_tokens = c.scheduler.max_num_batched_tokens;
  o.max_context = c.max_context;
  o.n_blocks = c.n_blocks;
  o.block_size = c.block_size;
  o.max_proposals = c.speculative.num_speculative_tokens;
  o.kv_type = c.kv_type;
  return o;
}

}  // namespace

std::unique_ptr<Proposer> make_proposer(const Model& target, const EngineConfig& c,
                                        std::shared_ptr<ThreadPool> pool) {
  const SpeculativeConfig& spec = c.speculative;
  switch (spec.method) {
    case SpecMethod::kNone:
      return nullptr;
    case SpecMethod::kNgram:
      return LookupProposer::ngram(spec.prompt_lookup_min, spec.prompt_lookup_max);
    case SpecMethod::kDraft: {
      assert(c.draft_model);
      auto o = sized_options<DraftModelOptions>(c);
      o.target_bytes = target.gguf().file_size();
      return std::make_unique<DraftModel>(c.draft_model, o, std::move(pool));
    }
    case SpecMethod::kMtp:
    case SpecMethod::kEagle3: {
      assert(c.draft_head);
      auto o = sized_options<HeadProposerOptions>(c);
      o.kind = spec.method == SpecMethod::kMtp ? HeadKind::kMtp : HeadKind::kEagle3;
      o.draft_vocab = spec.draft_vocab;
      // A chained pass runs one layer and the output head: about one layer's share of the step.
      o.pass_share = 1.0 / double(target.whole_config().n_layer + 1);
      return std::make_unique<HeadProposer>(c.draft_head, o, std::move(pool));
    }
  }
  return nullptr;
}

}  // namespace vela::engine_proposer
