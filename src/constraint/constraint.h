#pragma once
// The constraint engine's interface to the rest of vela: StructuredOutputs -> GBNF -> Grammar
// -> CompiledGrammar (cached by its text), and the per-sequence matcher the engine asks for a
// token mask before sampling and tells about each accepted token.
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "constraint/compiled_grammar.h"
#include "util/result.h"
#include "vela/sampling_params.h"

namespace vela::constraint {

// The GBNF text a StructuredOutputs stands for; errors name the problem ("invalid JSON schema
// at #/properties/a: ...", "invalid regex at offset 3: ...", "grammar error (line 2): ...").
Result<std::string> structured_outputs_to_gbnf(const StructuredOutputs& spec);

// Compiles and caches grammars for one vocabulary.
// Thread-safety: compile() may be called from any thread; the vocabulary is built on first use.
class ConstraintCompiler {
 public:
  using VocabularyFactory = std::function<std::shared_ptr<const TokenVocabulary>()>;
  explicit ConstraintCompiler(VocabularyFactory vocabulary, size_t max_cached = 64);

  Result<std::shared_ptr<const CompiledGrammar>> compile(const StructuredOutputs& spec);

  struct Stats {
    uint64_t compiled = 0, cache_hits = 0;
    std::vector<double> compile_seconds;  // last compilations (for benchmarks)
  };
  Stats stats() const;

 private:
  std::shared_ptr<const TokenVocabulary> vocabulary();

  VocabularyFactory factory_;
  size_t max_cached_;
  mutable std::mutex mutex_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const CompiledGrammar>,
                                            std::list<std::string>::iterator>>
      cache_;
  Stats stats_;
};

// One sequence's position in its grammar.
// Thread-safety: none; owned by one request, used by the engine thread.
class SequenceConstraint {
 public:
  explicit SequenceConstraint(std::shared_ptr<const CompiledGrammar> grammar);

  // The allowed tokens now: [mask_words] bits, bit t = token t. Valid until the next accept().
  std::span<const uint64_t> mask();
  // Records a sampled token; false when the grammar does not allow it (the state is kept).
  bool accept(int32_t token);
  bool allows(int32_t token);
  // The text so far is a complete match.
  bool accepting() const { return is_accepting(state_); }
  // Complete, and nothing more can follow.
  bool finished() const { return !can_continue(state_); }

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
  StackSet state_;
  std::vector<uint64_t> mask_;  // [mask_words]
  bool mask_valid_ = false;
};

}  // namespace vela::constraint
