#include "model/model.h"

namespace vela {

Result<std::shared_ptr<const Model>> Model::load(const std::string& path) {
  auto gguf = GgufFile::open(path);
  if (!gguf) return gguf.error();
  auto model = from_gguf(std::make_shared<const GgufFile>(std::move(*gguf)));
  if (!model) return make_error("'" + path + "': " + model.message());
  return model;
}

Result<std::shared_ptr<const Model>> Model::from_gguf(std::shared_ptr<const GgufFile> gguf) {
  auto config = ModelConfig::from_gguf(*gguf);
  if (!config) return config.error();
  auto weights = ModelWeights::load(*gguf, *config);
  if (!weights) return weights.error();
  auto model = std::shared_ptr<Model>(new Model());
  model->gguf_ = std::move(gguf);
  model->config_ = std::move(*config);
  model->weights_ = std::move(*weights);
  return std::shared_ptr<const Model>(std::move(model));
}

}  // namespace vela
