// `vela serve --help` as a user reads it: every flag the parser accepts is listed exactly once,
// under one of the topic headings docs/serving.md follows, with its table's help text; the
// parser flags name every parser the server knows.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_args.h"
#include "serve_flags.h"
#include "server/reasoning/reasoning_parser.h"
#include "server/tool_calls.h"
#include "support/run_command.h"

namespace {

struct Listed {
  std::string heading;  // the section the flag's line is in ("options" before any topic)
  std::string line;
};

// Each option line's long flag ("  -m, --model FILE  ..." or "      --port N  ..."), with the
// heading above it. Flags named inside help texts are not option lines and are not counted.
std::multimap<std::string, Listed> listed_flags(const std::string& help) {
  std::multimap<std::string, Listed> out;
  std::istringstream in(help);
  std::string line, heading;
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("usage:", 0) == 0) continue;
    if (line[0] != ' ' && line.back() == ':') {
      heading = line.substr(0, line.size() - 1);
      continue;
    }
    size_t at = line.find_first_not_of(' ');
    if (at == std::string::npos) continue;
    if (line.compare(at, 1, "-") == 0 && line.compare(at, 2, "--") != 0) at += 4;  // "-m, "
    if (line.compare(at, 2, "--") != 0) continue;
    const size_t end = line.find(' ', at);
    out.insert({line.substr(at + 2, end == std::string::npos ? end : end - at - 2),
                Listed{heading, line}});
  }
  return out;
}

std::vector<std::string> split_list(const std::string& list) {  // "a, b, c"
  std::vector<std::string> out;
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item.substr(item.find_first_not_of(' ')));
  return out;
}

std::string serve_help() {
  const auto r = vela::test::run_command(std::string(VELA_BINARY) + " serve --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

TEST(ServeHelp, ListsEveryAcceptedFlagOnceUnderATopic) {
  const std::string help = serve_help();
  const auto listed = listed_flags(help);
  const vela::cli::Args args = vela::cli::serve_args();
  // docs/serving.md describes the flags under these headings: change both together.
  const std::set<std::string> topics = {
      "Model and memory",    "Scheduling",    "HTTP server", "API behaviour",        "Security",
      "Limits and timeouts", "Observability", "Parallelism", "Speculative decoding", "Testing"};

  std::set<std::string> accepted;
  std::set<std::string> headings;
  for (const vela::cli::Flag& flag : args.flags()) {
    accepted.insert(flag.long_name);
    ASSERT_EQ(listed.count(flag.long_name), 1u) << "--" << flag.long_name << "\n" << help;
    const Listed& l = listed.find(flag.long_name)->second;
    EXPECT_NE(l.line.find(flag.help), std::string::npos) << l.line;
    if (flag.long_name == "help") {
      EXPECT_EQ(l.heading, "options");
      continue;
    }
    EXPECT_TRUE(topics.count(l.heading))
        << "--" << flag.long_name << " is under '" << l.heading << "', not a topic heading";
    headings.insert(l.heading);
  }
  for (const auto& [name, l] : listed)
    EXPECT_TRUE(accepted.count(name)) << "--" << name << " is listed but not accepted";
  EXPECT_EQ(headings, topics);
}

TEST(ServeHelp, ParserFlagsNameEveryParser) {
  const auto listed = listed_flags(serve_help());
  ASSERT_EQ(listed.count("reasoning-parser"), 1u);
  ASSERT_EQ(listed.count("tool-call-parser"), 1u);
  const std::string reasoning = listed.find("reasoning-parser")->second.line;
  const std::string tools = listed.find("tool-call-parser")->second.line;
  for (const std::string& name : split_list(vela::server::reasoning_format_list()))
    EXPECT_NE(reasoning.find(" " + name), std::string::npos) << name << "\n" << reasoning;
  for (const std::string& name : split_list(vela::server::tool_call_format_list()))
    EXPECT_NE(tools.find(" " + name), std::string::npos) << name << "\n" << tools;
  for (const std::string* line : {&reasoning, &tools}) {
    EXPECT_NE(line->find("auto"), std::string::npos) << *line;
    EXPECT_NE(line->find("gpt_oss"), std::string::npos) << *line;
  }
}

TEST(ArgsHelp, GroupsListEachFlagOnceAfterTheUngroupedOnes) {
  vela::cli::Args args("demo", "[options]", {{"alpha", 'a', "N", "ungrouped"}});
  args.add_group("Second", {{"beta", 0, "", "in the second group"}});
  args.add_group("First", {{"gamma", 0, "X", "in the first group"}});
  args.add_group("Second", {{"delta", 0, "", "added to the second group"}});
  const auto listed = listed_flags(args.help());
  ASSERT_EQ(listed.size(), 5u) << args.help();
  EXPECT_EQ(listed.find("alpha")->second.heading, "options");
  EXPECT_EQ(listed.find("help")->second.heading, "options");
  EXPECT_EQ(listed.find("beta")->second.heading, "Second");
  EXPECT_EQ(listed.find("delta")->second.heading, "Second");
  EXPECT_EQ(listed.find("gamma")->second.heading, "First");
  // Groups print in the order they were first declared, each once.
  const std::string help = args.help();
  EXPECT_LT(help.find("\nSecond:\n"), help.find("\nFirst:\n")) << help;
  EXPECT_EQ(help.find("\nSecond:\n"), help.rfind("\nSecond:\n")) << help;
  char arg0[] = "--delta";
  char* argv[] = {arg0};
  EXPECT_TRUE(args.parse(1, argv));
  EXPECT_TRUE(args.has("delta"));
}

}  // namespace
