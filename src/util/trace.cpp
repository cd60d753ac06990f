#include "util/trace.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace vela::trace {

std::atomic<Recorder*> Recorder::active_{nullptr};

namespace {

std::atomic<uint32_t> next_thread_id{1};

// JSON string escaping for names and labels.
void append_quoted(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  out += '"';
}

void append_us(std::string& out, int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", double(ns) / 1000.0);
  out += buf;
}

}  // namespace

Recorder::Recorder(size_t max_events)
    : start_(std::chrono::steady_clock::now()), max_events_(max_events) {
  events_.reserve(std::min<size_t>(max_events, 1 << 16));
}

uint64_t Recorder::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

int64_t Recorder::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              start_)
      .count();
}

int64_t Recorder::ns_at(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - start_).count();
}

uint32_t Recorder::this_thread_id() {
  thread_local const uint32_t id = next_thread_id.fetch_add(1);
  return id;
}

void Recorder::add(Event event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(event));
}

std::vector<Event> Recorder::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

void Recorder::name_thread(uint32_t tid, std::string name) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [id, n] : thread_names_)
    if (id == tid) {
      n = std::move(name);
      return;
    }
  thread_names_.emplace_back(tid, std::move(name));
}

Status Recorder::write_json(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto comma = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (const auto& [tid, name] : thread_names_) {
    comma();
    out += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":" + std::to_string(tid) +
           ",\"args\":{\"name\":";
    append_quoted(out, name);
    out += "}}";
  }
  for (const Event& e : events_) {
    comma();
    out += "{\"ph\":\"X\",\"name\":";
    append_quoted(out, e.name);
    out += ",\"cat\":";
    append_quoted(out, e.category);
    out += ",\"pid\":1,\"tid\":" + std::to_string(e.tid) + ",\"ts\":";
    append_us(out, e.begin_ns);
    out += ",\"dur\":";
    append_us(out, e.end_ns - e.begin_ns);
    out += ",\"args\":{";
    bool first_arg = true;
    for (const Arg& a : e.args) {
      if (!a.key) continue;
      if (!first_arg) out += ',';
      first_arg = false;
      append_quoted(out, a.key);
      out += ':' + std::to_string(a.value);
    }
    if (!e.label.empty()) {
      if (!first_arg) out += ',';
      out += "\"detail\":";
      append_quoted(out, e.label);
    }
    out += "}}";
  }
  out += "\n]}\n";
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return make_error("cannot write the trace file '" + path + "'");
  f << out;
  if (!f) return make_error("cannot write the trace file '" + path + "'");
  return {};
}

void name_this_thread(const char* name) {
  if (Recorder* r = Recorder::active()) r->name_thread(Recorder::this_thread_id(), name);
}

void record(const char* name, const char* category, std::chrono::steady_clock::time_point begin,
            std::chrono::steady_clock::time_point end, std::string label, std::array<Arg, 4> args,
            uint32_t tid) {
  Recorder* r = Recorder::active();
  if (!r) return;
  Event e;
  e.name = name;
  e.category = category;
  e.tid = tid ? tid : Recorder::this_thread_id();
  e.begin_ns = r->ns_at(begin);
  e.end_ns = r->ns_at(end);
  e.args = args;
  e.label = std::move(label);
  r->add(std::move(e));
}

void Span::begin(const char* name, const char* category) {
  event_.name = name;
  event_.category = category;
  event_.tid = Recorder::this_thread_id();
  event_.begin_ns = recorder_->now_ns();
}

void Span::add_arg(const char* key, int64_t value) {
  for (Arg& a : event_.args)
    if (!a.key) {
      a = Arg{key, value};
      return;
    }
}

void Span::finish() {
  event_.end_ns = recorder_->now_ns();
  recorder_->add(std::move(event_));
  recorder_ = nullptr;
}

void Phases::advance(const char* name) {
  const int64_t now = recorder_->now_ns();
  if (current_) {
    Event e;
    e.name = current_;
    e.category = category_;
    e.tid = Recorder::this_thread_id();
    e.begin_ns = begin_ns_;
    e.end_ns = now;
    recorder_->add(std::move(e));
  }
  current_ = name;
  begin_ns_ = now;
}

}  // namespace vela::trace
