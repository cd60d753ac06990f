#include "constraint/constraint.h"

#include <nlohmann/json.hpp>

#include "constraint/gbnf.h"
#include "constraint/json_schema_to_gbnf.h"
#include "constraint/regex_to_gbnf.h"
#include "util/json_depth.h"

namespace vela::constraint {

namespace {

constexpr size_t kMaxChoices = 100'000;
constexpr int32_t kMaxSchemaNesting = 128;

std::string cache_key(const StructuredOutputs& s) {
  std::string key;
  const auto add = [&key](char tag, const std::string& text) {
    key += tag;
    key += std::to_string(text.size());
    key += ':';
    key += text;
  };
  if (s.json) add('j', *s.json);
  if (s.json_object) add('o', "");
  if (s.regex) add('r', *s.regex);
  for (const std::string& c : s.choice) add('c', c);
  if (s.grammar) add('g', *s.grammar);
  key += s.compact_whitespace ? 'C' : 'L';
  return key;
}

}  // namespace

Result<std::string> structured_outputs_to_gbnf(const StructuredOutputs& s) {
  const int n = int(bool(s.json)) + int(s.json_object) + int(bool(s.regex)) +
                int(!s.choice.empty()) + int(bool(s.grammar));
  if (n == 0) return make_error("no structured-output constraint given");
  if (n > 1)
    return make_error("at most one of json, json_object, regex, choice and grammar may be given");
  JsonGrammarOptions options;
  options.compact_whitespace = s.compact_whitespace;
  if (s.json) {
    if (json_nesting_depth(*s.json) > kMaxSchemaNesting)
      return make_error("invalid JSON schema: nested more than " +
                        std::to_string(kMaxSchemaNesting) + " levels");
    nlohmann::ordered_json schema;  // members keep the schema's order
    try {
      schema = nlohmann::ordered_json::parse(*s.json);
    } catch (const nlohmann::ordered_json::exception& e) {
      return make_error(std::string("invalid JSON schema: not valid JSON: ") + e.what());
    }
    return json_schema_to_gbnf(schema, options);
  }
  if (s.json_object) return json_object_gbnf(options);
  if (s.regex) {
    auto expr = regex_to_gbnf(*s.regex, /*json_string_content=*/false);
    if (!expr) return expr.error();
    return "root ::= " + *expr + "\n";
  }
  if (!s.choice.empty()) {
    if (s.choice.size() > kMaxChoices) return make_error("too many choices");
    std::string body;
    for (const std::string& c : s.choice) {
      if (c.empty()) return make_error("a choice is the empty string");
      body += (body.empty() ? "" : " | ") + gbnf_literal(c);
    }
    return "root ::= " + body + "\n";
  }
  return *s.grammar;
}

ConstraintCompiler::ConstraintCompiler(VocabularyFactory vocabulary, size_t max_cached)
    : factory_(std::move(vocabulary)), max_cached_(std::max<size_t>(max_cached, 1)) {}

std::shared_ptr<const TokenVocabulary> ConstraintCompiler::vocabulary() {
  if (!vocab_) vocab_ = factory_();
  return vocab_;
}

ConstraintCompiler::Stats ConstraintCompiler::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

Result<std::shared_ptr<const CompiledGrammar>> ConstraintCompiler::compile(
    const StructuredOutputs& spec) {
  const std::string key = cache_key(spec);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      ++stats_.cache_hits;
      return it->second.first;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto text = structured_outputs_to_gbnf(spec);
  if (!text) return text.error();
  auto grammar = compile_gbnf(*text);
  if (!grammar) return grammar.error();
  std::shared_ptr<const TokenVocabulary> vocab;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    vocab = vocabulary();
  }
  auto compiled = std::make_shared<const CompiledGrammar>(std::move(*grammar), vocab);
  if (compiled->initial().empty()) return make_error("the grammar matches nothing");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.compiled;
  if (stats_.compile_seconds.size() >= 4096) stats_.compile_seconds.clear();
  stats_.compile_seconds.push_back(seconds);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second.first;
  lru_.push_front(key);
  cache_.emplace(key, std::make_pair(compiled, lru_.begin()));
  while (cache_.size() > max_cached_) {
    cache_.erase(lru_.back());
    lru_.pop_back();
  }
  return std::shared_ptr<const CompiledGrammar>(compiled);
}

SequenceConstraint::SequenceConstraint(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)),
      state_(grammar_->initial()),
      mask_(grammar_->vocab().mask_words(), 0) {}

std::span<const uint64_t> SequenceConstraint::mask() {
  if (!mask_valid_) {
    grammar_->fill_mask(state_, mask_);
    mask_valid_ = true;
  }
  return mask_;
}

bool SequenceConstraint::allows(int32_t token) {
  if (token < 0 || token >= grammar_->vocab().n_vocab()) return false;
  const auto m = mask();
  return (m[size_t(token) >> 6] >> (token & 63)) & 1;
}

bool SequenceConstraint::accept(int32_t token) {
  if (!grammar_->advance_token(state_, token)) return false;
  mask_valid_ = false;
  return true;
}

}  // namespace vela::constraint
