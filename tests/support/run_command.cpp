#include "support/run_command.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "support/shared_data.h"

namespace vela::test {

CommandResult run_command(const std::string& command) {
  const std::string err_file = unique_temp_path("stderr.txt");
  CommandResult r;
  FILE* p = popen((command + " 2>" + err_file).c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (FILE* e = fopen(err_file.c_str(), "r")) {
    while ((n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
    fclose(e);
  }
  std::remove(err_file.c_str());
  return r;
}

}  // namespace vela::test
