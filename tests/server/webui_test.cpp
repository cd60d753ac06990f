// The chat page of `vela serve` over HTTP (docs/chat-page.md): GET / and the page's files with
// their types and the headers that keep the page on its own origin, HEAD, no API key needed for
// them, --no-webui (404), and no reference to another origin in any embedded file.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "server/webui/webui_assets.h"
#include "server_harness.h"
#include "support/shared_data.h"

namespace vela::test {
namespace {

using server::web_assets;
using server::WebAsset;

std::string model_path() {
  return shared_path("models/aidreams260K.gguf").string();
}

TEST(WebUiServer, ServesThePageAndItsFilesWithTheirHeaders) {
  VELA_REQUIRE_SHARED();
  // With an API key required: the page itself needs none (it asks for the key for the API).
  auto s = ServerProcess::start({"-m", model_path(), "--api-key", "k-1"});
  EXPECT_NE(s->log().find("chat page at http://127.0.0.1:" + std::to_string(s->port()) + "/\n"),
            std::string::npos)
      << s->log();

  const HttpResult page = s->get("/");
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_TRUE(page.has_header("content-type: text/html; charset=utf-8")) << page.headers;
  EXPECT_TRUE(page.has_header("content-security-policy: default-src 'self';")) << page.headers;
  EXPECT_TRUE(page.has_header("connect-src 'self'")) << page.headers;
  EXPECT_TRUE(page.has_header("x-content-type-options: nosniff")) << page.headers;
  EXPECT_TRUE(page.has_header("cache-control: no-cache")) << page.headers;
  EXPECT_EQ(page.body, std::string(web_assets()[0].body));
  EXPECT_NE(page.body.find("<script src=\"/webui/app.js\""), std::string::npos);
  EXPECT_EQ(s->get("/?from=bookmark").body, page.body);  // the query is not part of the path
  EXPECT_EQ(s->get("/v1/models").status, 401);           // ...while the API wants the key

  const std::pair<std::string, std::string> files[] = {
      {"/webui/app.js", "content-type: text/javascript; charset=utf-8"},
      {"/webui/style.css", "content-type: text/css; charset=utf-8"}};
  for (const auto& [path, type] : files) {
    SCOPED_TRACE(path);
    const HttpResult r = s->get(path);
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.has_header(type)) << r.headers;
    EXPECT_TRUE(r.has_header("content-security-policy: default-src 'self';")) << r.headers;
    EXPECT_TRUE(r.has_header("x-content-type-options: nosniff")) << r.headers;
    EXPECT_EQ(r.body, std::string(server::find_web_asset(path)->body));
  }

  // HEAD: the headers and length of a GET, no body.
  const HttpResult head = s->get("/", "-I");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.has_header("content-length: " + std::to_string(page.body.size())))
      << head.headers;
  EXPECT_EQ(head.body.find("<html"), std::string::npos);  // (curl -I saves the header there)

  const HttpResult post = s->post("/", "{}");
  EXPECT_EQ(post.status, 405) << post.body;
  EXPECT_EQ(s->get("/webui/missing.js").status, 404);
  EXPECT_EQ(s->get("/index.html").status, 404);
}

TEST(WebUiServer, NoWebuiMakesThePageA404) {
  VELA_REQUIRE_SHARED();
  auto s = ServerProcess::start({"-m", model_path(), "--no-webui"});
  for (const char* path : {"/", "/webui/app.js", "/webui/style.css"}) {
    SCOPED_TRACE(path);
    const HttpResult r = s->get(path);
    EXPECT_EQ(r.status, 404);
    EXPECT_NE(r.body.find("no such endpoint"), std::string::npos) << r.body;
  }
  EXPECT_EQ(s->log().find("chat page at"), std::string::npos) << s->log();
  EXPECT_EQ(s->get("/health").status, 200);
}

TEST(WebUiServer, EmbeddedFilesReachNoOtherOrigin) {
  ASSERT_GE(web_assets().size(), 3u);
  const WebAsset& index = web_assets()[0];
  EXPECT_EQ(index.path, "/");
  EXPECT_NE(index.body.find("<html"), std::string_view::npos);
  for (const WebAsset& asset : web_assets()) {
    SCOPED_TRACE(std::string(asset.path));
    EXPECT_FALSE(asset.body.empty());
    for (std::string_view absolute : {"http://", "https://", "//cdn", "@import", "url("})
      EXPECT_EQ(asset.body.find(absolute), std::string_view::npos) << absolute;
    // Model output goes into the page as text, never as markup.
    EXPECT_EQ(asset.body.find("innerHTML"), std::string_view::npos);
    EXPECT_EQ(asset.body.find("insertAdjacentHTML"), std::string_view::npos);
    // The page names each of its other files, by the path it is served at.
    if (asset.path != "/") {
      EXPECT_NE(index.body.find(asset.path), std::string_view::npos);
    }
    const auto found = server::find_web_asset(asset.path);
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(found->body.data(), asset.body.data());
  }
  EXPECT_FALSE(server::find_web_asset("/webui/").has_value());
  EXPECT_FALSE(server::find_web_asset("").has_value());
}

}  // namespace
}  // namespace vela::test
