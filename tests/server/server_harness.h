#pragma once
// Test harness for the real `vela serve` binary: start it on a free loopback port (--port 0,
// the port read from its log), talk to it with curl, stop it with signals. Every wait is
// bounded; a server still running at destruction is killed.
// Thread-safety: none; one test thread.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vela::test {

struct HttpResult {
  int status = 0;  // 0 = no HTTP response (connection refused, timeout)
  std::string body;
  std::string headers;  // raw header block(s), lower-cased names not guaranteed
  int curl_exit = -1;
  bool has_header(const std::string& name_colon_value) const;  // case-insensitive substring
};

// A loopback TCP port that was free a moment ago (for a program that cannot take port 0).
uint16_t free_loopback_port();

// A fresh empty file in the test process's temporary folder (process_temp_dir()).
std::filesystem::path temp_file(const std::string& stem);
void write_file(const std::filesystem::path& path, const std::string& text);
std::string read_file(const std::filesystem::path& path);

class ServerProcess {
 public:
  // Starts `vela serve --host 127.0.0.1 --port 0 <args>` and waits until /health says 200
  // (or, with wait_ready false, until it listens). Fails the current test on error.
  // `launcher` runs the server (e.g. {"prlimit", "--nofile=256:256", "--"}); it must exec it.
  static std::unique_ptr<ServerProcess> start(const std::vector<std::string>& args,
                                              bool wait_ready = true,
                                              const std::vector<std::string>& launcher = {});
  ~ServerProcess();

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url(const std::string& path) const;
  std::string log() const { return read_file(log_path_); }

  // GET / POST with curl. `extra` are more curl arguments (already shell-quoted).
  HttpResult get(const std::string& path, const std::string& extra = "") const;
  HttpResult post(const std::string& path, const std::string& body,
                  const std::string& extra = "") const;

  // Sends a signal; wait_exit() returns the exit status (or -1 on timeout / killed by signal).
  void signal(int sig) const;
  int wait_exit(double timeout_seconds);

  // Polls /metrics (bounded) until `sample` (e.g. "vela:num_requests_running") reads `value`.
  bool wait_for_metric(const std::string& sample, double value, double timeout_seconds) const;
  // The value of a sample with exactly these labels (name{labels}), or NaN.
  double metric(const std::string& name, const std::string& labels = "") const;

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::filesystem::path log_path_;
  bool exited_ = false;
};

// curl running in the background (e.g. a stream we will cut off), output to a file.
class BackgroundCurl {
 public:
  // `args` are curl arguments after the fixed "-sS -N -m max_seconds".
  BackgroundCurl(const std::vector<std::string>& args, double max_seconds);
  ~BackgroundCurl();  // kills it if still running

  // Waits (bounded) until the output contains `text`.
  bool wait_for_output(const std::string& text, double timeout_seconds) const;
  std::string output() const { return read_file(out_path_); }
  // Kills curl (the connection closes) and reaps it.
  void kill();
  // Waits for curl to exit by itself; returns its exit code or -1 on timeout.
  int wait(double timeout_seconds);

 private:
  pid_t pid_ = -1;
  std::filesystem::path out_path_;
};

// Parsed Prometheus text exposition: "name{labels}" -> value (labels as printed).
std::map<std::string, double> parse_metrics(const std::string& text, std::string* error);

// The `data: ...` payloads of an SSE body, in order; sets *framing_ok when every event is a
// "data: " line followed by a blank line.
std::vector<std::string> sse_events(const std::string& body, bool* framing_ok);

// Shell single-quoting.
std::string shell_quote(const std::string& s);

}  // namespace vela::test
