#pragma once
// The open connections of one server and the policy that keeps it answering when clients hold
// connections without using them (slowloris, leaked keep-alives): at most `max_open` sockets
// are open, and a new connection beyond that closes the connection that has been idle (waiting
// for a request, or for the rest of one) the longest. When every open connection is busy with
// a request, the new one is refused instead. The cap sits below the open-file limit so the
// server never reaches EMFILE, where it could accept no one.
// Thread-safety: none; the io_context thread owns it.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace vela::server {

class HttpSession;

// Descriptors kept back from the connection cap for everything else the process opens (the
// model file, the listening socket, the io_context's epoll and eventfd, log files).
inline constexpr uint64_t kReservedDescriptors = 64;

// Raises RLIMIT_NOFILE's soft limit to its hard limit; returns the soft limit in force.
uint64_t raise_open_file_limit();

// The connection cap for a requested maximum (0 = as many as the descriptors allow) under an
// open-file limit.
size_t effective_max_connections(size_t requested, uint64_t open_file_limit);

class ConnectionTable {
 public:
  explicit ConnectionTable(size_t max_open) : max_open_(max_open) {}

  size_t max_open() const { return max_open_; }
  void set_max_open(size_t max_open) { max_open_ = max_open; }
  bool contains(HttpSession* session) const { return where_.count(session) != 0; }
  size_t open() const { return where_.size(); }
  bool full() const { return where_.size() >= max_open_; }

  // A connection opens (idle: it owes us a request) / closes (idempotent).
  void add(HttpSession* session);
  void remove(HttpSession* session);
  // Idle: waiting for a request's bytes. Busy: a request is being answered (not sheddable).
  void mark_idle(HttpSession* session);
  void mark_busy(HttpSession* session);

  // The connection idle the longest, or null when every one is busy.
  HttpSession* oldest_idle() const { return idle_.empty() ? nullptr : idle_.front(); }
  std::vector<HttpSession*> all() const;

  // Bookkeeping of what the cap did, for the log: returns a line to print at most once per
  // `interval` (the first event at once), summing what happened since the previous line.
  std::optional<std::string> note_shed(std::chrono::steady_clock::time_point now);
  std::optional<std::string> note_refused(std::chrono::steady_clock::time_point now);

 private:
  std::optional<std::string> maybe_log(std::chrono::steady_clock::time_point now);

  size_t max_open_;
  std::list<HttpSession*> idle_;  // longest idle first
  // Every open connection -> its place in idle_ (idle_.end() while busy).
  std::unordered_map<HttpSession*, std::list<HttpSession*>::iterator> where_;
  uint64_t shed_since_log_ = 0;
  uint64_t refused_since_log_ = 0;
  std::optional<std::chrono::steady_clock::time_point> last_log_;
};

}  // namespace vela::server
