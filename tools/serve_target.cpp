#include "serve_target.h"

namespace vela::cli {

Result<Target> parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0)
    return make_error("--url must start with http:// (got '" + url + "')");
  std::string rest = url.substr(scheme.size());
  Target t;
  const size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  t.path_prefix = slash == std::string::npos ? "" : rest.substr(slash);
  while (!t.path_prefix.empty() && t.path_prefix.back() == '/') t.path_prefix.pop_back();
  const size_t colon = hostport.rfind(':');
  t.host = hostport.substr(0, colon);
  t.port = colon == std::string::npos ? "80" : hostport.substr(colon + 1);
  if (t.host.empty()) return make_error("--url has no host");
  return t;
}

}  // namespace vela::cli
