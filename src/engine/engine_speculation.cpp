// The engine's speculative decoding: proposals before scheduling (the configured Proposer, as
// far as the speculation policy grants), their cut by a request's grammar and by the scheduler,
// verification of a request's K + 1 rows, and the rows handed to a proposer that follows passes.
#include <algorithm>
#include <array>
#include <cassert>

#include "engine/engine.h"
#include "engine/engine_live.h"
#include "spec/acceptance.h"

namespace vela {

void Engine::set_proposer(TokenProposer proposer) {
  assert(config_.speculative.enabled());
  override_proposer_ = proposer ? std::make_unique<LookupProposer>(std::move(proposer)) : nullptr;
  proposer_ = override_proposer_ ? override_proposer_.get() : configured_proposer_.get();
}

Status Engine::propose() {
  const SpeculativeConfig& sc = config_.speculative;
  drafted_.clear();
  proposal_requests_.clear();
  if (proposer_ == nullptr) return {};
  Proposer& proposer = *proposer_;
  StepShape decodes;
  for (const auto& [id, live] : requests_) {
    const Request& r = live->request;
    if (r.in_flight) continue;
    // A grant and a refused proposal hold for the step they were made in only.
    live->granted = false;
    if (live->refused_proposal >= 0) {
      live->refused_proposal = -1;
      live->draft_q = {};
    }
    if (r.status == RequestStatus::kRunning && r.is_decode()) decodes.add(r.num_computed, 1, true);
  }
  const bool granted_first = proposer.runs_passes();
  const double reference = last_step_.seconds > 0 ? last_step_.seconds : 1.0;
  const double pass_seconds = granted_first ? proposer.pass_seconds(reference) : 0;
  spec_policy_.begin_step(decodes, reference, pass_seconds, proposer.free_proposals());
  const double prior = all_acceptance_.rate(AcceptanceEstimate::kFirstPrior);
  for (const auto& [id, live] : requests_) {
    Request& r = live->request;
    if (r.status != RequestStatus::kRunning || r.in_flight || !r.is_decode()) continue;
    if (live->speculation_blocked()) continue;
    // Room for the proposals and the token after them, within max_tokens and the capacity.
    const int32_t room = std::min(r.max_total_tokens - int32_t(r.tokens.size()),
                                  live->params.max_tokens - r.n_output()) -
                         1;
    const int32_t max_k = std::min(sc.num_speculative_tokens, room);
    if (max_k <= 0) continue;
    const double acceptance = live->acceptance.optimistic_rate(prior);
    ProposalRequest pr;
    pr.id = r.id;
    pr.tokens = r.tokens;
    pr.params = &live->params;
    pr.n_prompt = r.n_prompt;
    pr.block_table = r.kv.blocks;
    pr.proposals =
        std::span<int32_t>(proposal_out_)
            .subspan(proposal_requests_.size() * size_t(sc.num_speculative_tokens), size_t(max_k));
    if (granted_first) {
      // Proposals cost passes: the policy grants a length before the proposer runs.
      const int32_t remaining = live->params.max_tokens - r.n_output();
      int32_t k = spec_policy_.choose(
          r.num_computed, max_k, acceptance,
          proposer.upfront_seconds(r.id, int32_t(r.tokens.size()), pass_seconds), remaining);
      // A request that speculated before but has been kept from it for a while probes again, on
      // the steps all such requests probe together: their proposer's passes (a draft's, an MTP
      // head's output layer) are then shared rather than paid on every step by someone.
      if (k == 0 && live->acceptance.tested > 0 &&
          ++live->steps_undrafted >= SpeculationPolicy::kReprobeSteps && probe_step())
        k = spec_policy_.probe(r.num_computed);
      if (k == 0) continue;
      live->steps_undrafted = 0;
      live->granted = true;
      pr.max_k = k;
      pr.proposals = pr.proposals.first(size_t(k));
      proposal_requests_.push_back(pr);
      continue;
    }
    // Free proposals: the policy chooses among what the lookup found.
    pr.max_k = max_k;
    if (auto st = proposer.propose({&pr, 1}); !st) return st;
    const int32_t n_allowed = grammar_prefix(*live, pr.proposals.first(size_t(pr.n_proposed)));
    if (n_allowed == 0) continue;
    const int32_t k = spec_policy_.choose(r.num_computed, n_allowed, acceptance);
    if (k == 0) {
      live->shadow_proposal = pr.proposals[0];  // what it would have proposed, for the estimate
      continue;
    }
    r.tokens.insert(r.tokens.end(), pr.proposals.begin(), pr.proposals.begin() + k);
    r.n_draft = k;
    drafted_.push_back(&r);
  }
  return proposal_requests_.empty() ? Status{} : propose_granted();
}

Status Engine::propose_granted() {
  if (auto st = proposer_->propose(proposal_requests_); !st) return st;
  if (proposal_replay_)
    for (ProposalRequest& d : proposal_requests_) {
      if (d.n_proposed == 0) continue;
      d.n_proposed =
          std::clamp(proposal_replay_(d.id, d.tokens, d.proposals.first(size_t(d.n_proposed))), 0,
                     d.n_proposed);
      d.q = {};
    }
  const size_t n_vocab = size_t(forward_->model().config().n_vocab);
  for (const ProposalRequest& d : proposal_requests_) {
    if (d.n_proposed == 0) continue;
    Live& live = *requests_.at(d.id);
    Request& r = live.request;
    const int32_t n = grammar_prefix(live, d.proposals.first(size_t(d.n_proposed)));
    if (n < d.n_proposed) proposer_->rollback(d.id, int32_t(r.tokens.size()) + n);
    // A drawn proposal the grammar refuses still decides its row (verify_run's `refused`).
    live.refused_proposal = n < d.n_proposed && !d.q.empty() ? d.proposals[size_t(n)] : -1;
    const size_t q_rows = size_t(n) + (live.refused_proposal >= 0 ? 1 : 0);
    live.draft_q = d.q.empty() ? std::span<const float>{}
                               : std::span<const float>(d.q.data(), q_rows * n_vocab);
    if (n == 0) continue;  // its one row is sampled against the refused proposal
    r.tokens.insert(r.tokens.end(), d.proposals.begin(), d.proposals.begin() + n);
    r.n_draft = n;
    drafted_.push_back(&r);
  }
  return {};
}

void Engine::follow_pass() {
  const size_t E = size_t(forward_->model().config().n_embd);
  pass_rows_.clear();
  for (const FollowedRows& f : followed_) {
    const auto it = requests_.find(f.id);
    if (it == requests_.end()) continue;  // finished in this step
    const Request& r = it->second->request;
    // Rows the sequence kept whose next token is known.
    const int32_t known = std::min(r.num_computed, int32_t(r.tokens.size()) - 1);
    const int32_t n = std::min(f.n_rows, known - f.first_position);
    if (n <= 0) continue;
    PassRows p;
    p.id = f.id;
    p.tokens = r.tokens;
    p.block_table = r.kv.blocks;
    p.first_position = f.first_position;
    p.n_rows = n;
    // The final hidden states, or the followed layers' inputs.
    const size_t W = layer_input_width_ > 0 ? size_t(layer_input_width_) : E;
    const float* rows = layer_input_width_ > 0 ? layer_inputs_.data() : hidden_.data();
    p.hidden = std::span<const float>(rows + size_t(n_hidden_ + f.first_hidden) * W, size_t(n) * W);
    // The first proposal (the head's output layer, as costly as the model's) only for a sequence
    // the policy is likely to grant next step: granted in this one, just past its prompt, about
    // to probe again, every sequence while the policy still measures a token's price (it
    // alternates plain steps and granted ones), or every sequence when the policy is off.
    const Live& live = *it->second;
    const bool wanted =
        !config_.speculative.adaptive || live.granted || spec_policy_.measuring() ||
        (live.acceptance.tested == 0 && r.n_output() <= 1) ||
        (live.steps_undrafted + 1 >= SpeculationPolicy::kReprobeSteps && probe_step());
    const bool at_end = r.num_computed == int32_t(r.tokens.size()) - 1;
    p.decoding = at_end && wanted && !live.speculation_blocked();
    // Not wanted: the proposer may hold its rows until the sequence's grant or probe.
    p.deferrable = at_end && !p.decoding;
    pass_rows_.push_back(p);
  }
  followed_.clear();
  // A failure costs the next step's proposals only.
  if (!pass_rows_.empty()) (void)proposer_->follow(pass_rows_);
}

void Engine::observe_acceptance(Live& live, int32_t n_accepted, int32_t n_tested) {
  live.acceptance.observe(n_accepted, n_tested);
  all_acceptance_.observe(n_accepted, n_tested);
}

int32_t Engine::grammar_prefix(const Live& live, std::span<const int32_t> proposals) const {
  if (!live.constraint) return int32_t(proposals.size());
  // On a copy of the sequence's grammar state: the proposals it allows in a row, up to the one
  // that completes it (the request ends there).
  constraint::SequenceConstraint probe = *live.constraint;
  int32_t n = 0;
  while (size_t(n) < proposals.size() && probe.accept(proposals[size_t(n)])) {
    ++n;
    if (probe.finished()) break;
  }
  return n;
}

void Engine::drop_proposals() {
  for (Request* r : drafted_) {
    r->tokens.resize(r->tokens.size() - size_t(r->n_draft));
    r->n_draft = 0;
    requests_.at(r->id)->draft_q = {};
    requests_.at(r->id)->refused_proposal = -1;
    if (proposer_) proposer_->rollback(r->id, int32_t(r->tokens.size()));
  }
  drafted_.clear();
}

void Engine::trim_unscheduled_proposals(const SchedulerOutput& scheduled) {
  for (Request* r : drafted_) {
    int32_t keep = 0;
    for (const ScheduledRequest& s : scheduled.scheduled)
      if (s.request == r) keep = s.num_new_tokens - 1;
    if (keep >= r->n_draft) continue;
    r->tokens.resize(r->tokens.size() - size_t(r->n_draft - keep));
    r->n_draft = keep;
    Live& live = *requests_.at(r->id);
    // The row after the kept proposals is now the last: it has no proposal of its own.
    live.refused_proposal = -1;
    if (!live.draft_q.empty())
      live.draft_q = live.draft_q.first(size_t(keep) * size_t(live.sampler.n_vocab()));
    if (proposer_) proposer_->rollback(r->id, int32_t(r->tokens.size()));
    // The blocks for dropped proposals go back now (a preempted request holds none).
    kv_.truncate(r->kv, int32_t(r->tokens.size()));
  }
}

void Engine::verify(Live& live, std::span<float> rows) {
  Request& r = live.request;
  const int32_t n_draft = r.n_draft;
  std::array<int32_t, kMaxSpeculativeTokens> proposals{};
  std::copy(r.tokens.end() - n_draft, r.tokens.end(), proposals.begin());
  // Back to the verified sequence: its last token's K/V is computed; the tokens the run emits
  // are appended again by on_token, and each accepted proposal's K/V is already in place.
  r.tokens.resize(r.tokens.size() - size_t(n_draft));
  r.n_draft = 0;
  r.num_computed = int32_t(r.tokens.size());
  const int32_t verified = r.num_computed;  // the recurrent state covers these and n_draft more
  ++counters_.spec_drafts;
  counters_.spec_draft_tokens += uint64_t(n_draft);
  int32_t n_accepted = 0;
  const std::span<const float> q = live.draft_q;
  const int32_t refused = live.refused_proposal;
  live.draft_q = {};
  live.refused_proposal = -1;
  // A structured-output request's rows each take the mask of the grammar state the tokens
  // emitted before them reach (the sink below advances it), as plain decoding would.
  RowProcessor constrain;
  if (live.constraint)
    constrain = [&live](std::span<float>) { live.sampler.restrict_to(live.constraint->mask()); };
  const RunResult run = verify_run(
      live.sampler, rows, std::span<const int32_t>(proposals.data(), size_t(n_draft)), q,
      verify_work_, constrain,
      [&](const SampledToken& token) {
        const bool is_proposal =
            n_accepted < n_draft && token.token == proposals[size_t(n_accepted)];
        if (is_proposal) {
          counters_.spec_accepted_at[size_t(n_accepted)] += 1;
          ++n_accepted;
          ++counters_.spec_accepted_tokens;
        }
        if (!on_token(live, token)) return false;  // live is gone
        if (is_proposal) ++r.num_computed;
        return true;
      },
      refused);
  if (run.ended) return;
  live.sampler.restrict_to({});
  observe_acceptance(live, run.n_accepted, std::min(n_draft, run.n_emitted));
  // A recurrent state ran through every proposal: take the one saved after the last accepted.
  const int32_t n_kept = r.num_computed - verified;  // proposals whose K/V stay
  if (speculation_slots_ >= 0 && n_kept < n_draft)
    pending_state_copies_.push_back({speculation_slot(r.kv.state_slot, n_kept), r.kv.state_slot});
  kv_.truncate(r.kv, int32_t(r.tokens.size()));
  if (proposer_) proposer_->rollback(r.id, r.num_computed);
  kv_.cache_full_blocks(r.tokens, r.num_computed, r.kv);
  kv_.release_out_of_window(r.kv, r.num_computed);
}

}  // namespace vela
