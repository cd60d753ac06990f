#include "trace_option.h"

#include <cstdio>

namespace vela::cli {

TraceOption::TraceOption(std::string path, const char* command)
    : path_(std::move(path)), command_(command) {
  if (path_.empty()) return;
  recorder_ = std::make_unique<trace::Recorder>();
  trace::Recorder::install(recorder_.get());
  trace::name_this_thread("main");
}

TraceOption::~TraceOption() {
  if (recorder_) trace::Recorder::uninstall();
}

bool TraceOption::finish() {
  if (!recorder_ || path_.empty()) return true;
  trace::Recorder::uninstall();
  const size_t n = recorder_->events().size();
  if (auto st = recorder_->write_json(path_); !st) {
    std::fprintf(stderr, "vela %s: %s\n", command_, st.message().c_str());
    return false;
  }
  std::fprintf(stderr, "vela %s: trace written to %s (%zu events%s)\n", command_, path_.c_str(), n,
               recorder_->dropped() ? ", later ones dropped at the cap" : "");
  path_.clear();
  return true;
}

}  // namespace vela::cli
