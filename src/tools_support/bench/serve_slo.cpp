#include "tools_support/bench/serve_slo.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace vela {

std::string ServeSlo::describe() const {
  std::string out;
  const auto item = [&](const char* name, const std::optional<double>& v) {
    if (!v) return;
    if (!out.empty()) out += ", ";
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, *v * 1e3);
    out += std::string(name) + " <= " + std::string(buf, r.ptr) + " ms";
  };
  item("ttft", ttft_s);
  item("itl", itl_s);
  item("tpot", tpot_s);
  item("e2el", e2e_s);
  return out;
}

Status add_goodput_objectives(std::span<const std::string> specs, ServeSlo& slo) {
  for (const std::string& spec : specs) {
    size_t pos = 0;
    while (pos < spec.size()) {
      const size_t end = std::min(spec.find_first_of(", ", pos), spec.size());
      const std::string item = spec.substr(pos, end - pos);
      pos = end + 1;
      if (item.empty()) continue;
      const size_t colon = item.find(':');
      const std::string key = item.substr(0, colon);
      double ms = 0;
      const char* first = item.data() + (colon == std::string::npos ? item.size() : colon + 1);
      const char* last = item.data() + item.size();
      const auto parsed = std::from_chars(first, last, ms);
      if (colon == std::string::npos || parsed.ec != std::errc() || parsed.ptr != last ||
          !std::isfinite(ms) || ms <= 0)
        return make_error(
            "--goodput: expected KEY:MS with a positive number of milliseconds, got '" + item +
            "'");
      std::optional<double>* target = key == "ttft"   ? &slo.ttft_s
                                      : key == "itl"  ? &slo.itl_s
                                      : key == "tpot" ? &slo.tpot_s
                                      : key == "e2el" ? &slo.e2e_s
                                                      : nullptr;
      if (!target)
        return make_error("--goodput: unknown objective '" + key +
                          "' (expected ttft, itl, tpot or e2el)");
      *target = ms / 1e3;
    }
  }
  return {};
}

bool meets_slo(const ServeSlo& slo, const ServedRequest& r) {
  if (!r.ok) return false;
  if (slo.ttft_s && r.ttft > *slo.ttft_s) return false;
  if (slo.e2e_s && r.e2e > *slo.e2e_s) return false;
  if (slo.itl_s &&
      std::any_of(r.itl.begin(), r.itl.end(), [&](double g) { return g > *slo.itl_s; }))
    return false;
  if (slo.tpot_s && r.tpot() && *r.tpot() > *slo.tpot_s) return false;
  return true;
}

}  // namespace vela
