#include "cli_args.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace vela::cli {

Args::Args(std::string command, std::string usage, std::vector<Flag> flags)
    : command_(std::move(command)), usage_(std::move(usage)), flags_(std::move(flags)) {
  flags_.push_back({"help", 'h', "", "show this help and exit"});
}

void Args::add_flags(const std::vector<Flag>& flags) {
  flags_.insert(flags_.end() - 1, flags.begin(), flags.end());  // --help stays last
}

void Args::add_group(const std::string& heading, const std::vector<Flag>& flags) {
  add_flags(flags);
  if (std::find(headings_.begin(), headings_.end(), heading) == headings_.end())
    headings_.push_back(heading);
  for (const Flag& f : flags) heading_of_[f.long_name] = heading;
}

const Flag* Args::find_long(const std::string& name) const {
  for (const Flag& f : flags_)
    if (f.long_name == name) return &f;
  return nullptr;
}

const Flag* Args::find_short(char c) const {
  for (const Flag& f : flags_)
    if (f.short_name == c) return &f;
  return nullptr;
}

Status Args::parse(int argc, char** argv) {
  bool only_positional = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (only_positional || arg.size() < 2 || arg[0] != '-') {
      positional_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    const Flag* flag = nullptr;
    std::optional<std::string> inline_value;
    if (arg.rfind("--", 0) == 0) {
      std::string name = arg.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      flag = find_long(name);
    } else if (arg.size() == 2) {
      flag = find_short(arg[1]);
    }
    if (!flag)
      return make_error("vela " + command_ + ": unknown option '" + arg + "' (see --help)");
    if (flag->value_name.empty()) {
      if (inline_value)
        return make_error("vela " + command_ + ": option --" + flag->long_name + " takes no value");
      values_[flag->long_name].push_back("1");
      continue;
    }
    if (inline_value) {
      values_[flag->long_name].push_back(*inline_value);
    } else {
      if (i + 1 >= argc)
        return make_error("vela " + command_ + ": option --" + flag->long_name + " needs a value");
      values_[flag->long_name].push_back(argv[++i]);
    }
  }
  return {};
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

Result<int64_t> Args::get_int(const std::string& name, int64_t fallback, int64_t lo,
                              int64_t hi) const {
  if (!has(name)) return fallback;
  const std::string value = get(name);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    return make_error("vela " + command_ + ": --" + name + " must be an integer in [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + value + "'");
  return static_cast<int64_t>(v);
}

Result<double> Args::get_float(const std::string& name, double fallback, double lo,
                               double hi) const {
  if (!has(name)) return fallback;
  const std::string value = get(name);
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi)
    return make_error("vela " + command_ + ": --" + name + " must be a number in [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + value + "'");
  return v;
}

std::string Args::help() const {
  auto line = [](const Flag& f) {
    std::string left = "  ";
    left += f.short_name ? std::string("-") + f.short_name + ", " : "    ";
    left += "--" + f.long_name;
    if (!f.value_name.empty()) left += " " + f.value_name;
    if (left.size() <= 28)  // help texts start in column 31, two spaces after the flag at least
      left.resize(30, ' ');
    else
      left += "  ";
    return left + f.help + "\n";
  };
  std::string out = "usage: vela " + command_ + " " + usage_ + "\n\noptions:\n";
  for (const Flag& f : flags_)
    if (!heading_of_.count(f.long_name)) out += line(f);
  for (const std::string& heading : headings_) {
    out += "\n" + heading + ":\n";
    for (const Flag& f : flags_) {
      auto it = heading_of_.find(f.long_name);
      if (it != heading_of_.end() && it->second == heading) out += line(f);
    }
  }
  return out;
}

Result<std::vector<int32_t>> Args::get_int_list(const std::string& name, int32_t fallback,
                                                int64_t lo, int64_t hi) const {
  std::vector<int32_t> out;
  for (const std::string& value : get_all(name)) {
    size_t start = 0;
    for (;;) {
      const size_t comma = value.find(',', start);
      const std::string item =
          value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      char* end = nullptr;
      const long long v = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || v < lo || v > hi)
        return make_error("vela " + command_ + ": --" + name + " takes integers in [" +
                          std::to_string(lo) + ", " + std::to_string(hi) +
                          "] separated by commas, got '" + value + "'");
      out.push_back(int32_t(v));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (out.empty()) out.push_back(fallback);
  return out;
}

std::optional<int> Args::parse_or_exit(int argc, char** argv) {
  if (auto st = parse(argc, argv); !st) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 2;
  }
  if (has("help")) {
    std::fputs(help().c_str(), stdout);
    return 0;
  }
  return std::nullopt;
}

}  // namespace vela::cli
