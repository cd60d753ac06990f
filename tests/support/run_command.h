#pragma once
// Runs a shell command as a user would and captures what it printed, for tests that drive the
// real `vela` binary.
#include <string>

namespace vela::test {

struct CommandResult {
  int exit_code = -1;  // -1 when the command did not exit normally
  std::string out;     // stdout
  std::string err;     // stderr
};

CommandResult run_command(const std::string& command);

}  // namespace vela::test
