#include "model/model.h"

#include <cstdlib>
#include <string_view>

namespace vela {

namespace {
// VELA_REPACK=0 keeps every matrix as the file has it (to compare kernels on the same model).
bool repack_disabled_by_env() {
  const char* env = std::getenv("VELA_REPACK");
  return env != nullptr && std::string_view(env) == "0";
}
// VELA_REPACK_EXPERTS=0 leaves the experts in the file mapping (A/B of the two placements).
bool expert_repack_disabled_by_env() {
  const char* env = std::getenv("VELA_REPACK_EXPERTS");
  return env != nullptr && std::string_view(env) == "0";
}
}  // namespace

Result<std::shared_ptr<const Model>> Model::load(const std::string& path,
                                                 const ModelLoadOptions& options) {
  auto gguf = GgufFile::open(path);
  if (!gguf) return gguf.error();
  auto model = from_gguf(std::make_shared<const GgufFile>(std::move(*gguf)), options);
  if (!model) return make_error("'" + path + "': " + model.message());
  return model;
}

Result<std::shared_ptr<const Model>> Model::from_gguf(std::shared_ptr<const GgufFile> gguf,
                                                      const ModelLoadOptions& options) {
  if (auto arch = gguf->get_string("general.architecture");
      arch && arch->has_value() && **arch == "eagle3")
    return make_error(
        "an EAGLE-3 draft head: load it with a target model (--speculative-method eagle3 "
        "--draft-model FILE)");
  auto config = ModelConfig::from_gguf(*gguf);
  if (!config) return config.error();
  const bool repack = options.repack_weights && !repack_disabled_by_env();
  auto weights = ModelWeights::load(
      *gguf, *config, repack, repack && options.repack_experts && !expert_repack_disabled_by_env(),
      options.shard);
  if (!weights) return weights.error();
  auto model = std::shared_ptr<Model>(new Model());
  model->gguf_ = std::move(gguf);
  model->config_ = shard_config(*config, weights->shard);
  model->whole_config_ = std::move(*config);
  model->weights_ = std::move(*weights);
  model->shard_ = options.shard;
  return std::shared_ptr<const Model>(std::move(model));
}

Result<std::shared_ptr<const Model>> Model::mtp_block(std::shared_ptr<const Model> target,
                                                      const ModelLoadOptions& options) {
  if (!target) return make_error("no target model for the multi-token-prediction block");
  auto config = mtp_block_config(target->whole_config());
  if (!config) return config.error();
  const bool repack = options.repack_weights && !repack_disabled_by_env();
  // A shard's output head is a slice of the vocabulary (and its matrices may be only some of
  // the model's): the block reads its own from the file.
  const TensorShard& shard = target->shard();
  const bool share = !shard.sharded() && shard.n_stages == 1;
  auto weights =
      ModelWeights::load(*target->gguf_, *config, repack,
                         repack && options.repack_experts && !expert_repack_disabled_by_env(),
                         TensorShard{}, share ? &target->weights() : nullptr);
  if (!weights) return make_error("multi-token-prediction block: " + weights.message());
  auto model = std::shared_ptr<Model>(new Model());
  model->gguf_ = target->gguf_;
  model->config_ = *config;
  model->whole_config_ = std::move(*config);
  model->weights_ = std::move(*weights);
  model->target_ = std::move(target);
  return std::shared_ptr<const Model>(std::move(model));
}

Result<std::shared_ptr<const Model>> Model::eagle3_head(std::shared_ptr<const GgufFile> head,
                                                        std::shared_ptr<const Model> target,
                                                        const ModelLoadOptions& options) {
  if (!head) return make_error("no EAGLE-3 head file");
  if (!target) return make_error("no target model for the EAGLE-3 head");
  auto config = eagle3_head_config(*head, target->whole_config());
  if (!config) return config.error();
  const bool repack = options.repack_weights && !repack_disabled_by_env();
  // A shard's output head is a slice of the vocabulary (and its matrices may be only some of
  // the model's): the head reads the whole ones from the target's file.
  const TensorShard& shard = target->shard();
  const bool share = !shard.sharded() && shard.n_stages == 1;
  auto weights = ModelWeights::load(*head, *config, repack, false, TensorShard{},
                                    share ? &target->weights() : nullptr, target->gguf_.get());
  if (!weights) return weights.error();
  auto model = std::shared_ptr<Model>(new Model());
  model->gguf_ = std::move(head);
  model->config_ = *config;
  model->whole_config_ = std::move(*config);
  model->weights_ = std::move(*weights);
  model->target_ = std::move(target);
  return std::shared_ptr<const Model>(std::move(model));
}

}  // namespace vela
