#include "server/connection_limits.h"

#include <sys/resource.h>

#include <algorithm>

namespace vela::server {

namespace {

constexpr std::chrono::seconds kLogInterval{10};

}  // namespace

uint64_t raise_open_file_limit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) return 1024;
  if (files.rlim_cur < files.rlim_max) {
    rlimit raised = files;
    raised.rlim_cur = files.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) files = raised;
  }
  return files.rlim_cur == RLIM_INFINITY ? uint64_t(1) << 20 : uint64_t(files.rlim_cur);
}

size_t effective_max_connections(size_t requested, uint64_t open_file_limit) {
  // At least a handful, so a tiny limit still serves /health next to a few clients.
  const uint64_t by_files = std::max<uint64_t>(8, open_file_limit > 2 * kReservedDescriptors
                                                      ? open_file_limit - kReservedDescriptors
                                                      : open_file_limit / 2);
  if (requested == 0) return size_t(by_files);
  return size_t(std::min<uint64_t>(requested, by_files));
}

void ConnectionTable::add(HttpSession* session) {
  if (where_.count(session)) return;
  idle_.push_back(session);
  where_.emplace(session, std::prev(idle_.end()));
}

void ConnectionTable::remove(HttpSession* session) {
  auto it = where_.find(session);
  if (it == where_.end()) return;
  if (it->second != idle_.end()) idle_.erase(it->second);
  where_.erase(it);
}

void ConnectionTable::mark_idle(HttpSession* session) {
  auto it = where_.find(session);
  if (it == where_.end()) return;
  if (it->second != idle_.end()) idle_.erase(it->second);  // idle again: now the youngest
  idle_.push_back(session);
  it->second = std::prev(idle_.end());
}

void ConnectionTable::mark_busy(HttpSession* session) {
  auto it = where_.find(session);
  if (it == where_.end() || it->second == idle_.end()) return;
  idle_.erase(it->second);
  it->second = idle_.end();
}

std::vector<HttpSession*> ConnectionTable::all() const {
  std::vector<HttpSession*> out;
  out.reserve(where_.size());
  for (const auto& [session, place] : where_) out.push_back(session);
  return out;
}

std::optional<std::string> ConnectionTable::note_shed(std::chrono::steady_clock::time_point now) {
  ++shed_since_log_;
  return maybe_log(now);
}

std::optional<std::string> ConnectionTable::note_refused(
    std::chrono::steady_clock::time_point now) {
  ++refused_since_log_;
  return maybe_log(now);
}

std::optional<std::string> ConnectionTable::maybe_log(std::chrono::steady_clock::time_point now) {
  if (last_log_ && now - *last_log_ < kLogInterval) return std::nullopt;
  last_log_ = now;
  std::string line = "vela serve: connection limit reached (" + std::to_string(open()) + " of " +
                     std::to_string(max_open_) + " open, --max-connections): ";
  line += "closed " + std::to_string(shed_since_log_) + " idle connection(s), refused " +
          std::to_string(refused_since_log_) + " new one(s) while all were busy";
  if (shed_since_log_ + refused_since_log_ > 1) line += " (since the last such line)";
  shed_since_log_ = refused_since_log_ = 0;
  return line;
}

}  // namespace vela::server
