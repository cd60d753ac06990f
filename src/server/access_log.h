#pragma once
// One structured (JSON) line per HTTP request on stderr:
//   {"ts":"2026-01-02T03:04:05.678Z","id":"cmpl-…","remote":"127.0.0.1:5000","method":"POST",
//    "path":"/v1/completions","status":200,"prompt_tokens":5,"completion_tokens":16,
//    "ttft_ms":1.9,"e2e_ms":12.4,"stream":true}
// Token and latency fields appear only for generation requests.
// Thread-safety: write_access_log() may be called from any thread; each line is written with
// one fwrite, so lines never interleave.
#include <cstdint>
#include <optional>
#include <string>

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
  std::string note;  // e.g. "client_disconnected"
};

std::string format_access_log(const AccessRecord& record);  // one line, '\n'-terminated
void write_access_log(const AccessRecord& record);

}  // namespace vela::server
