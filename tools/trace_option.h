#pragma once
// `--trace FILE` of the CLI commands: a trace recorder installed for the command's lifetime and
// written (Chrome / Perfetto JSON) when it ends.
// Thread-safety: construct and finish on the command's main thread, before and after the work.
#include <memory>
#include <string>

#include "util/trace.h"

namespace vela::cli {

class TraceOption {
 public:
  // An empty path: tracing stays off.
  explicit TraceOption(std::string path, const char* command);
  ~TraceOption();
  bool on() const { return recorder_ != nullptr; }
  trace::Recorder* recorder() const { return recorder_.get(); }
  // Uninstalls and writes the file; prints where (or why not) on stderr. False on failure.
  bool finish();

 private:
  std::string path_;
  const char* command_;
  std::unique_ptr<trace::Recorder> recorder_;
};

}  // namespace vela::cli
