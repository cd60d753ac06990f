#pragma once
// A process-wide recorder of timed spans, written as a Chrome / Perfetto trace (JSON
// trace-event format: complete "X" events plus thread-name metadata) or summed for a profile.
// Off unless a Recorder is installed; then Span and Phases cost one relaxed load and one branch
// each, allocate nothing and read no clock.
//
// Thread-safety: install()/uninstall() from one thread while no span is open (at start and at
// the end of a run); Span, Phases and name_this_thread() from any thread (events go to the
// recorder under its mutex); events() and write_json() while no other thread records.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "util/result.h"

namespace vela::trace {

struct Arg {
  const char* key = nullptr;  // static string; null = unused
  int64_t value = 0;
};

struct Event {
  const char* name = "";  // static string
  const char* category = "";
  int64_t begin_ns = 0;  // since the recorder started
  int64_t end_ns = 0;
  uint32_t tid = 0;
  std::array<Arg, 4> args{};
  std::string label;  // optional dynamic detail (e.g. an HTTP path), written as args.detail
};

class Recorder {
 public:
  // Events beyond max_events are counted, not kept (a long run stays bounded in memory).
  explicit Recorder(size_t max_events = size_t(1) << 21);

  // The recorder spans go to, or null (tracing off).
  static Recorder* active() { return active_.load(std::memory_order_relaxed); }
  static void install(Recorder* recorder) { active_.store(recorder, std::memory_order_release); }
  static void uninstall() { active_.store(nullptr, std::memory_order_release); }

  int64_t now_ns() const;
  int64_t ns_at(std::chrono::steady_clock::time_point t) const;
  void add(Event event);
  std::vector<Event> events() const;
  uint64_t dropped() const;
  // {"traceEvents": [...], "displayTimeUnit": "ms"}; timestamps in microseconds.
  Status write_json(const std::string& path) const;

  // This thread's id in the trace (small integers in order of first use).
  static uint32_t this_thread_id();
  void name_thread(uint32_t tid, std::string name);

 private:
  static std::atomic<Recorder*> active_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  size_t max_events_;
  uint64_t dropped_ = 0;
  std::vector<Event> events_;
  std::vector<std::pair<uint32_t, std::string>> thread_names_;
};

// Names the calling thread in the trace (no-op when off).
void name_this_thread(const char* name);

// A span whose times are already known (e.g. an HTTP request, from its arrival), on track
// `tid` (0 = the calling thread's); no-op when off. Spans that overlap without nesting (the
// requests of one I/O thread) belong on tracks of their own.
void record(const char* name, const char* category, std::chrono::steady_clock::time_point begin,
            std::chrono::steady_clock::time_point end, std::string label = {},
            std::array<Arg, 4> args = {}, uint32_t tid = 0);

// A span from construction to destruction (or end()).
class Span {
 public:
  Span(const char* name, const char* category) : recorder_(Recorder::active()) {
    if (recorder_) [[unlikely]]
      begin(name, category);
  }
  ~Span() { end(); }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  bool on() const { return recorder_ != nullptr; }
  // Up to four integer arguments (static keys); ignored when off.
  void arg(const char* key, int64_t value) {
    if (recorder_) [[unlikely]]
      add_arg(key, value);
  }
  void label(std::string text) {
    if (recorder_) [[unlikely]]
      event_.label = std::move(text);
  }
  void end() {
    if (recorder_) [[unlikely]]
      finish();
  }
  void cancel() { recorder_ = nullptr; }  // record nothing (e.g. a step with no work)

 private:
  void begin(const char* name, const char* category);
  void add_arg(const char* key, int64_t value);
  void finish();

  Recorder* recorder_;
  Event event_;
};

// Consecutive spans of one category: next(name) ends the current one (if any) and begins the
// next; done() (or destruction) ends the last. One branch per call when off.
class Phases {
 public:
  explicit Phases(const char* category) : recorder_(Recorder::active()), category_(category) {}
  ~Phases() { done(); }
  Phases(const Phases&) = delete;
  Phases& operator=(const Phases&) = delete;

  void next(const char* name) {
    if (recorder_) [[unlikely]]
      advance(name);
  }
  void done() {
    if (recorder_) [[unlikely]]
      advance(nullptr);
  }
  void cancel() { recorder_ = nullptr; }

 private:
  void advance(const char* name);

  Recorder* recorder_;
  const char* category_;
  const char* current_ = nullptr;
  int64_t begin_ns_ = 0;
};

}  // namespace vela::trace
