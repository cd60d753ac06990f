#include "util/trace_profile.h"

#include <cstdio>
#include <cstring>
#include <map>

namespace vela::trace {

namespace {

double seconds(const Event& e) {
  return double(e.end_ns - e.begin_ns) * 1e-9;
}

int64_t arg(const Event& e, const char* key) {
  for (const Arg& a : e.args)
    if (a.key && std::strcmp(a.key, key) == 0) return a.value;
  return -1;
}

}  // namespace

Profile profile_forward(const std::vector<Event>& events, double clock_seconds) {
  Profile p;
  double prepare = 0, output = 0, layers_total = 0;
  std::map<int64_t, double> layers;
  std::vector<std::string> op_order;
  std::map<std::string, double> ops;
  for (const Event& e : events) {
    const std::string_view cat = e.category;
    const std::string_view name = e.name;
    if (cat == "forward" && name == "forward") {
      ++p.passes;
      p.forward_seconds += seconds(e);
    } else if (cat == "forward" && name == "prepare") {
      prepare += seconds(e);
    } else if (cat == "forward" && name == "output") {
      output += seconds(e);
    } else if (cat == "layer") {
      layers[arg(e, "layer")] += seconds(e);
      layers_total += seconds(e);
    } else if (cat == "op") {
      if (!ops.count(e.name)) op_order.emplace_back(e.name);
      ops[e.name] += seconds(e);
    }
  }
  const double total = p.forward_seconds > 0 ? p.forward_seconds : 1;
  auto row = [&](std::string name, double s) { return ProfileRow{std::move(name), s, s / total}; };
  p.parts.push_back(row("prepare (embeddings, RoPE tables)", prepare));
  for (const auto& [layer, s] : layers) p.parts.push_back(row("layer " + std::to_string(layer), s));
  p.parts.push_back(row("output head", output));
  double parts = 0;
  for (const ProfileRow& r : p.parts) parts += r.seconds;
  p.parts_share = parts / total;
  double op_sum = 0;
  for (const std::string& name : op_order) {
    p.operations.push_back(row(name, ops[name]));
    op_sum += ops[name];
  }
  p.operations_share = layers_total > 0 ? op_sum / layers_total : 0;
  p.clock_seconds = clock_seconds;
  p.clock_share = clock_seconds > 0 ? p.forward_seconds / clock_seconds : 0;
  return p;
}

std::string format_profile(const Profile& p) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line),
                "\n### Profile: %lld forward passes, %.3f ms each\n\n| part | ms / pass | %% of "
                "pass |\n|---|---:|---:|\n",
                static_cast<long long>(p.passes),
                p.passes ? p.forward_seconds * 1e3 / double(p.passes) : 0.0);
  out += line;
  const double per = p.passes ? 1e3 / double(p.passes) : 0.0;
  for (const ProfileRow& r : p.parts) {
    std::snprintf(line, sizeof(line), "| %s | %.4f | %.1f |\n", r.name.c_str(), r.seconds * per,
                  r.share * 100);
    out += line;
  }
  std::snprintf(line, sizeof(line), "| **sum of parts** | | **%.1f** |\n", p.parts_share * 100);
  out += line;
  if (p.clock_seconds > 0) {
    std::snprintf(line, sizeof(line), "| **passes / the runs' own clock** | | **%.1f** |\n",
                  p.clock_share * 100);
    out += line;
  }
  out += "\n| operation (all layers) | ms / pass | % of pass |\n|---|---:|---:|\n";
  for (const ProfileRow& r : p.operations) {
    std::snprintf(line, sizeof(line), "| %s | %.4f | %.1f |\n", r.name.c_str(), r.seconds * per,
                  r.share * 100);
    out += line;
  }
  std::snprintf(line, sizeof(line), "| **sum of operations / layers** | | **%.1f** |\n",
                p.operations_share * 100);
  out += line;
  return out;
}

}  // namespace vela::trace
