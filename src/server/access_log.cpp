#include "server/access_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

namespace vela::server {

namespace {

std::string utc_time(std::chrono::system_clock::time_point now) {
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, int(ms));
  return buf;
}

double round3(double x) {
  return double(int64_t(x * 1000.0 + (x >= 0 ? 0.5 : -0.5))) / 1000.0;
}

}  // namespace

std::string format_access_log(const AccessRecord& r) {
  nlohmann::ordered_json j;
  j["ts"] = utc_time(
      r.at == std::chrono::system_clock::time_point{} ? std::chrono::system_clock::now() : r.at);
  j["id"] = r.id.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.id);
  j["remote"] = r.remote;
  j["method"] = r.method;
  j["path"] = r.path;
  j["status"] = r.status;
  if (r.prompt_tokens) j["prompt_tokens"] = *r.prompt_tokens;
  if (r.completion_tokens) j["completion_tokens"] = *r.completion_tokens;
  if (r.ttft_ms) j["ttft_ms"] = round3(*r.ttft_ms);
  if (r.e2e_ms) j["e2e_ms"] = round3(*r.e2e_ms);
  if (r.stream) j["stream"] = *r.stream;
  if (!r.note.empty()) j["note"] = r.note;
  // The path comes from the client: replace invalid UTF-8 rather than throw.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

void write_access_log(const AccessRecord& record) {
  const std::string line = format_access_log(record);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

AccessLogWriter::AccessLogWriter(std::FILE* out, size_t max_pending, std::function<void()> on_drop)
    : out_(out), max_pending_(max_pending), on_drop_(std::move(on_drop)) {
  thread_ = std::thread([this] { run(); });
}

AccessLogWriter::~AccessLogWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

bool AccessLogWriter::write(AccessRecord record) {
  if (record.at == std::chrono::system_clock::time_point{})
    record.at = std::chrono::system_clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_.size() >= max_pending_) {
      if (on_drop_) on_drop_();
      return false;
    }
    pending_.push_back(std::move(record));
  }
  wake_.notify_one();
  return true;
}

void AccessLogWriter::run() {
  std::vector<AccessRecord> batch;
  std::string text;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (pending_.empty() && stopping_) return;
    batch.swap(pending_);
    lock.unlock();
    text.clear();
    for (const AccessRecord& r : batch) text += format_access_log(r);
    std::fwrite(text.data(), 1, text.size(), out_);
    std::fflush(out_);
    batch.clear();
    lock.lock();
  }
}

}  // namespace vela::server
