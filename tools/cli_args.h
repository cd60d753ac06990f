#pragma once
// A small command-line parser for the `vela` subcommands: declared flags with help text,
// values checked and converted, a one-line error for anything unknown or malformed.
// Thread-safety: not synchronised (used on the main thread).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vela/result.h"

namespace vela::cli {

struct Flag {
  std::string long_name;   // without "--"
  char short_name = 0;     // 0 = none
  std::string value_name;  // empty for boolean switches
  std::string help;
};

class Args {
 public:
  Args(std::string command, std::string usage, std::vector<Flag> flags);
  // Declares more flags (before parse()), listed after the constructor's.
  void add_flags(const std::vector<Flag>& flags);
  // Declares flags that help() lists under a heading of their own ("Scheduling"), after the
  // ungrouped ones; a heading given again adds to its group.
  void add_group(const std::string& heading, const std::vector<Flag>& flags);

  // Parses argv after the subcommand name. Positional arguments are collected in order.
  Status parse(int argc, char** argv);
  // parse() as every command starts: on an error, prints it to stderr and gives exit code 2; on
  // --help, prints the help to stdout and gives 0; otherwise nullopt (go on).
  std::optional<int> parse_or_exit(int argc, char** argv);
  std::string help() const;

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;  // last value
  std::vector<std::string> get_all(
      const std::string& name) const;  // every value of a repeated flag
  Result<int64_t> get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;
  Result<double> get_float(const std::string& name, double fallback, double lo, double hi) const;
  // Values of a flag given as a comma-separated list and/or repeated ("-t 1,2 -t 4"), each in
  // [lo, hi]; {fallback} when the flag is absent.
  Result<std::vector<int32_t>> get_int_list(const std::string& name, int32_t fallback, int64_t lo,
                                            int64_t hi) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Every flag parse() accepts, --help included, in declaration order.
  const std::vector<Flag>& flags() const { return flags_; }

 private:
  const Flag* find_long(const std::string& name) const;
  const Flag* find_short(char c) const;

  std::string command_;
  std::string usage_;
  std::vector<Flag> flags_;
  std::map<std::string, std::string> heading_of_;  // long name -> group heading; absent: ungrouped
  std::vector<std::string> headings_;              // in the order groups were declared
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

}  // namespace vela::cli
