#include "dist/worker_setup.h"

#include <nlohmann/json.hpp>

namespace vela::dist {

std::string encode_setup(const ShardSetup& s) {
  const nlohmann::json j = {{"model_path", s.model_path},
                            {"repack_weights", s.repack_weights},
                            {"repack_experts", s.repack_experts},
                            {"max_batch_tokens", s.max_batch_tokens},
                            {"max_logits", s.max_logits},
                            {"max_context", s.max_context},
                            {"n_threads", s.n_threads},
                            {"micro_batch_tokens", s.micro_batch_tokens},
                            {"kv",
                             {s.kv.n_layer, s.kv.n_head_kv, s.kv.head_dim, s.kv.block_size,
                              s.kv.n_blocks, int(s.kv.type), s.kv.n_state_slots}},
                            {"identity", identity_to_json(s.expected)}};
  return j.dump();
}

Result<ShardSetup> decode_setup(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    ShardSetup s;
    s.model_path = j.at("model_path").get<std::string>();
    s.repack_weights = j.at("repack_weights").get<bool>();
    s.repack_experts = j.at("repack_experts").get<bool>();
    s.max_batch_tokens = j.at("max_batch_tokens").get<int32_t>();
    s.max_logits = j.at("max_logits").get<int32_t>();
    s.max_context = j.at("max_context").get<int32_t>();
    s.n_threads = j.at("n_threads").get<int32_t>();
    s.micro_batch_tokens = j.at("micro_batch_tokens").get<int32_t>();
    const auto& kv = j.at("kv");
    s.kv = KvCacheConfig{.n_layer = kv.at(0).get<int32_t>(),
                         .n_head_kv = kv.at(1).get<int32_t>(),
                         .head_dim = kv.at(2).get<int32_t>(),
                         .block_size = kv.at(3).get<int32_t>(),
                         .n_blocks = kv.at(4).get<int32_t>(),
                         .type = KvType(kv.at(5).get<int>())};
    s.kv.n_state_slots = kv.at(6).get<int32_t>();
    if (s.kv.n_state_slots < 0) return make_error("negative state slot count in the setup");
    auto expected = identity_from_json(j.at("identity"));
    if (!expected) return expected.error();
    s.expected = *expected;
    return s;
  } catch (const std::exception& e) {
    return make_error(std::string("malformed setup message: ") + e.what());
  }
}

namespace {

std::unique_ptr<Worker> load_checked_worker(const std::string& setup_text,
                                            const std::shared_ptr<TensorParallel>& group,
                                            nlohmann::json& answer, std::string& status) {
  auto setup = decode_setup(setup_text);
  if (!setup) {
    status = setup.message();
    return nullptr;
  }
  // The file is opened once: its identity is checked before the model is built from it (a
  // wrong file can be large, or fail to load with a less clear error).
  auto file = GgufFile::open(setup->model_path);
  if (!file) {
    status = "'" + setup->model_path + "': " + file.message();
    return nullptr;
  }
  const auto gguf = std::make_shared<const GgufFile>(std::move(*file));
  const RankIdentity mine = identify_rank(*gguf);
  answer["identity"] = identity_to_json(mine);
  if (std::string why = identity_mismatch(setup->expected, mine); !why.empty()) {
    status = why;
    return nullptr;
  }
  ModelLoadOptions lo;
  lo.repack_weights = setup->repack_weights;
  lo.repack_experts = setup->repack_experts;
  lo.shard = {group->rank(), group->size(), group->stage(), group->n_stages()};
  auto model = Model::from_gguf(gguf, lo);
  if (!model) {
    status = "'" + setup->model_path + "': " + model.message();
    return nullptr;
  }
  const ModelConfig& c = (*model)->config();
  const KvCacheConfig& sent = setup->kv;
  if (sent.n_head_kv != c.n_head_kv || sent.head_dim != c.head_dim ||
      (group->n_stages() == 1 && sent.n_layer != c.n_layer)) {
    status = "'" + setup->model_path + "' is not the model rank 0 loaded";
    return nullptr;
  }
  // Rank 0's blocks (the block ids are the same on every rank) in this rank's own layout: its
  // stage's layers, and what its model keeps per token (a K-only row for latent attention).
  const KvCacheConfig kv =
      model_cache_config(c, sent.block_size, sent.n_blocks, sent.type, sent.n_state_slots);
  ForwardOptions fo;
  fo.max_batch_tokens = setup->max_batch_tokens;
  fo.max_logits = setup->max_logits;
  fo.max_context = setup->max_context;
  fo.n_threads = threads_per_rank(setup->n_threads);
  fo.tensor_parallel = group;
  fo.micro_batch_tokens = setup->micro_batch_tokens;
  return std::unique_ptr<Worker>(new Worker{*model, DecoderForward(*model, fo), KvCache(kv)});
}

}  // namespace

std::unique_ptr<Worker> load_worker(const std::string& setup_text,
                                    const std::shared_ptr<TensorParallel>& group,
                                    std::string& reply) {
  nlohmann::json answer = nlohmann::json::object();
  std::string status;
  auto worker = load_checked_worker(setup_text, group, answer, status);
  // The reply must fit kStatusBytes whole to stay JSON.
  if (!worker) answer["error"] = status.substr(0, kStatusBytes / 2);
  reply = answer.dump();
  return worker;
}

Status check_worker_reply(int32_t rank, const std::string& reply, const RankIdentity& expected,
                          std::string& note) {
  const std::string who = "rank " + std::to_string(rank);
  const nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  const bool has_error = j.is_object() && j.contains("error") && j["error"].is_string();
  if (!j.is_object() || (!j.contains("identity") && !has_error))
    return make_error(who +
                      " answered the setup without its identity: it runs another vela "
                      "build than rank 0's " +
                      expected.build);
  Result<RankIdentity> mine = make_error("no identity");
  if (j.contains("identity")) mine = identity_from_json(j["identity"]);
  const std::string where = mine ? who + " (host " + mine->host + ")" : who;
  if (has_error) return make_error(where + ": " + j["error"].get<std::string>());
  if (!mine) return make_error(who + ": " + mine.message());
  if (std::string why = identity_mismatch(expected, *mine); !why.empty())
    return make_error(where + ": " + why);
  note.clear();
  if (mine->kernels != expected.kernels)
    note = where + " runs the " + mine->kernels + " kernels, rank 0 the " + expected.kernels +
           " ones (its CPU's best, or VELA_ISA): outputs agree within the kernels' tested bounds, "
           "not bit for bit with a run on one level";
  return {};
}

}  // namespace vela::dist
