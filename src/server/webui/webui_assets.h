#pragma once
// The chat page served at GET / (docs/chat-page.md): the files of src/server/webui/, built into
// the binary at build time (embed_web_assets.cmake), each with the URL path it is served at
// ("/" for index.html, "/webui/NAME" for the others) and its Content-Type.
// Thread-safety: immutable static data; any thread may read it at any time.
#include <optional>
#include <span>
#include <string_view>

namespace vela::server {

struct WebAsset {
  std::string_view path;          // "/", "/webui/app.js", ...
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view body;
};

// Every embedded file, index.html ("/") first.
std::span<const WebAsset> web_assets();

// The file served at `path` (a request target without its query), if there is one.
std::optional<WebAsset> find_web_asset(std::string_view path);

}  // namespace vela::server
