#include "dist/worker_setup.h"

#include <nlohmann/json.hpp>

namespace vela::dist {

std::string encode_setup(const ShardSetup& s) {
  const nlohmann::json j = {{"model_path", s.model_path},
                            {"repack_weights", s.repack_weights},
                            {"max_batch_tokens", s.max_batch_tokens},
                            {"max_logits", s.max_logits},
                            {"max_context", s.max_context},
                            {"n_threads", s.n_threads},
                            {"micro_batch_tokens", s.micro_batch_tokens},
                            {"kv",
                             {s.kv.n_layer, s.kv.n_head_kv, s.kv.head_dim, s.kv.block_size,
                              s.kv.n_blocks, int(s.kv.type)}}};
  return j.dump();
}

Result<ShardSetup> decode_setup(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    ShardSetup s;
    s.model_path = j.at("model_path").get<std::string>();
    s.repack_weights = j.at("repack_weights").get<bool>();
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
    return s;
  } catch (const std::exception& e) {
    return make_error(std::string("malformed setup message: ") + e.what());
  }
}

std::unique_ptr<Worker> load_worker(const std::string& setup_text,
                                    const std::shared_ptr<TensorParallel>& group,
                                    std::string& status) {
  auto setup = decode_setup(setup_text);
  if (!setup) {
    status = setup.message();
    return nullptr;
  }
  ModelLoadOptions lo;
  lo.repack_weights = setup->repack_weights;
  lo.shard = {group->rank(), group->size(), group->stage(), group->n_stages()};
  auto model = Model::load(setup->model_path, lo);
  if (!model) {
    status = model.message();
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
  const KvCacheConfig kv = model_cache_config(c, sent.block_size, sent.n_blocks, sent.type);
  ForwardOptions fo;
  fo.max_batch_tokens = setup->max_batch_tokens;
  fo.max_logits = setup->max_logits;
  fo.max_context = setup->max_context;
  fo.n_threads = threads_per_rank(setup->n_threads);
  fo.tensor_parallel = group;
  fo.micro_batch_tokens = setup->micro_batch_tokens;
  return std::unique_ptr<Worker>(new Worker{*model, DecoderForward(*model, fo), KvCache(kv)});
}

}  // namespace vela::dist
