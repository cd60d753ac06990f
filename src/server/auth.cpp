#include "server/auth.h"

#include <cctype>
#include <fstream>

namespace vela::server {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walk the longer length in full so a short guess takes as long as a long one; volatile keeps
  // the compiler from turning the loop into an early-exit comparison.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::vector<std::string>> read_api_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error("cannot read the API key file '" + path + "'");
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    const std::string_view key = trim(line);
    if (key.empty() || key.front() == '#') continue;
    keys.emplace_back(key);
  }
  if (keys.empty()) return make_error("the API key file '" + path + "' holds no keys");
  return keys;
}

bool ApiKeys::check(std::string_view authorization) const {
  if (keys_.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() < kBearer.size()) return false;
  // The scheme name is case-insensitive (RFC 9110).
  for (size_t i = 0; i < kBearer.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
        std::tolower(static_cast<unsigned char>(kBearer[i])))
      return false;
  return check_key(authorization.substr(kBearer.size()));
}

bool ApiKeys::check_key(std::string_view key) const {
  if (keys_.empty()) return true;
  const std::string_view token = trim(key);
  // Compare against every key (no early exit) so timing does not tell which key was close.
  bool ok = false;
  for (const std::string& k : keys_) ok = constant_time_equal(token, k) || ok;
  return ok;
}

}  // namespace vela::server
