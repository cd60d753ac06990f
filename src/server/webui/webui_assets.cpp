#include "server/webui/webui_assets.h"

namespace vela::server {

std::optional<WebAsset> find_web_asset(std::string_view path) {
  for (const WebAsset& asset : web_assets())
    if (asset.path == path) return asset;
  return std::nullopt;
}

}  // namespace vela::server
