#pragma once
// One structured (JSON) line per HTTP request on stderr:
//   {"ts":"2026-01-02T03:04:05.678Z","id":"cmpl-…","remote":"127.0.0.1:5000","method":"POST",
//    "path":"/v1/completions","status":200,"prompt_tokens":5,"completion_tokens":16,
//    "ttft_ms":1.9,"e2e_ms":12.4,"stream":true}
// Token and latency fields appear only for generation requests.
// The server hands records to an AccessLogWriter, whose own thread formats and writes them, so
// a slow stderr (a pipe nobody drains fast enough) never blocks the I/O thread: at most
// `max_pending` records wait, and records beyond that are dropped and counted.
// Thread-safety: write_access_log() may be called from any thread; each line is written with
// one fwrite, so lines never interleave. AccessLogWriter::write() may be called from any thread.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace vela::server {

struct AccessRecord {
  std::string id;  // the response id ("cmpl-…"); empty for other endpoints
  std::string remote;
  std::string method;
  std::string path;
  int status = 0;
  std::optional<int64_t> prompt_tokens;
  std::optional<int64_t> completion_tokens;
  std::optional<double> ttft_ms;
  std::optional<double> e2e_ms;
  std::optional<bool> stream;
  std::string note;                            // e.g. "client_disconnected"
  std::chrono::system_clock::time_point at{};  // when the exchange ended (default: formatting)
};

std::string format_access_log(const AccessRecord& record);  // one line, '\n'-terminated
void write_access_log(const AccessRecord& record);

class AccessLogWriter {
 public:
  // on_drop is called (on the caller's thread) for each record dropped.
  AccessLogWriter(std::FILE* out, size_t max_pending, std::function<void()> on_drop);
  ~AccessLogWriter();  // writes what is pending, then joins
  AccessLogWriter(const AccessLogWriter&) = delete;
  AccessLogWriter& operator=(const AccessLogWriter&) = delete;

  // Never blocks on the output; false when the record was dropped (the queue was full).
  bool write(AccessRecord record);

 private:
  void run();

  std::FILE* out_;
  size_t max_pending_;
  std::function<void()> on_drop_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<AccessRecord> pending_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace vela::server
