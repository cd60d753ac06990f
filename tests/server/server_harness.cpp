#include "server_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "support/shared_data.h"

extern char** environ;

namespace vela::test {

uint16_t free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

namespace {

using Clock = std::chrono::steady_clock;

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

bool deadline_passed(Clock::time_point start, double seconds) {
  return std::chrono::duration<double>(Clock::now() - start).count() > seconds;
}

// Spawns argv with stdout and stderr to `out`; returns the pid or -1.
pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& out) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// Reaps pid within timeout; returns the wait status or -1.
int reap(pid_t pid, double timeout_seconds) {
  const auto start = Clock::now();
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return -1;
    if (deadline_passed(start, timeout_seconds)) return -1;
    sleep_ms(10);
  }
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

HttpResult curl(const std::string& args) {
  const auto body = temp_file("curl_body");
  const auto headers = temp_file("curl_headers");
  const std::string cmd = "curl -sS -m 60 -o " + shell_quote(body.string()) + " -D " +
                          shell_quote(headers.string()) + " -w '%{http_code}' " + args +
                          " 2>/dev/null; echo \" $?\"";
  const std::string out = run_capture(cmd);
  HttpResult r;
  std::istringstream in(out);
  in >> r.status >> r.curl_exit;
  r.body = read_file(body);
  r.headers = read_file(headers);
  std::filesystem::remove(body);
  std::filesystem::remove(headers);
  return r;
}

}  // namespace

bool HttpResult::has_header(const std::string& text) const {
  auto lower = [](std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  return lower(headers).find(lower(text)) != std::string::npos;
}

std::filesystem::path temp_file(const std::string& stem) {
  std::string templ = test::process_temp_dir() + "/server_" + stem + "_XXXXXX";
  const int fd = mkstemp(templ.data());
  if (fd >= 0) close(fd);
  return templ;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::unique_ptr<ServerProcess> ServerProcess::start(const std::vector<std::string>& args,
                                                    bool wait_ready,
                                                    const std::vector<std::string>& launcher) {
  auto s = std::unique_ptr<ServerProcess>(new ServerProcess());
  s->log_path_ = temp_file("log");
  std::vector<std::string> argv = launcher;
  for (const char* a : {VELA_BINARY, "serve", "--host", "127.0.0.1", "--port", "0"})
    argv.emplace_back(a);
  argv.insert(argv.end(), args.begin(), args.end());
  s->pid_ = spawn(argv, s->log_path_);
  if (s->pid_ < 0) {
    ADD_FAILURE() << "cannot start " << VELA_BINARY;
    return s;
  }
  // The port: "listening on http://127.0.0.1:PORT".
  const auto start = Clock::now();
  const std::string marker = "listening on http://127.0.0.1:";
  while (s->port_ == 0) {
    const std::string log = s->log();
    if (auto at = log.find(marker); at != std::string::npos)
      s->port_ = uint16_t(std::atoi(log.c_str() + at + marker.size()));
    if (s->port_ != 0) break;
    int status = 0;
    if (waitpid(s->pid_, &status, WNOHANG) == s->pid_) {
      s->exited_ = true;
      ADD_FAILURE() << "vela serve exited at start:\n" << log;
      return s;
    }
    if (deadline_passed(start, 30)) {
      ADD_FAILURE() << "vela serve did not listen within 30 s:\n" << log;
      return s;
    }
    sleep_ms(10);
  }
  while (wait_ready) {
    if (s->get("/health").status == 200) break;
    if (deadline_passed(start, 60)) {
      ADD_FAILURE() << "vela serve not ready within 60 s:\n" << s->log();
      break;
    }
    sleep_ms(20);
  }
  return s;
}

ServerProcess::~ServerProcess() {
  // A failed test shows the end of what the server printed (a sanitizer report, an abort
  // message), not a whole access log.
  if (::testing::Test::HasFailure() && !log_path_.empty()) {
    constexpr size_t kShownBytes = 32 * 1024;
    const std::string text = log();
    std::cerr << "--- vela serve log, last " << std::min(text.size(), kShownBytes) << " of "
              << text.size() << " bytes ---\n"
              << text.substr(text.size() - std::min(text.size(), kShownBytes)) << "\n---\n";
  }
  if (pid_ > 0 && !exited_) {
    ::kill(pid_, SIGKILL);
    reap(pid_, 10);
  }
  std::filesystem::remove(log_path_);
}

std::string ServerProcess::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

HttpResult ServerProcess::get(const std::string& path, const std::string& extra) const {
  return curl(extra + " " + shell_quote(url(path)));
}

HttpResult ServerProcess::post(const std::string& path, const std::string& body,
                               const std::string& extra) const {
  const auto file = temp_file("request");
  write_file(file, body);
  HttpResult r = curl("-H 'Content-Type: application/json' --data-binary @" +
                      shell_quote(file.string()) + " " + extra + " " + shell_quote(url(path)));
  std::filesystem::remove(file);
  return r;
}

void ServerProcess::signal(int sig) const {
  if (pid_ > 0 && !exited_) ::kill(pid_, sig);
}

int ServerProcess::wait_exit(double timeout_seconds) {
  if (pid_ <= 0 || exited_) return -1;
  const int status = reap(pid_, timeout_seconds);
  if (status == -1) return -1;
  exited_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double ServerProcess::metric(const std::string& name, const std::string& labels) const {
  const HttpResult r = get("/metrics");
  std::string error;
  const auto values = parse_metrics(r.body, &error);
  auto it = values.find(name + "{" + labels + "}");
  return it == values.end() ? std::nan("") : it->second;
}

bool ServerProcess::wait_for_metric(const std::string& sample, double value,
                                    double timeout_seconds) const {
  const auto start = Clock::now();
  for (;;) {
    const HttpResult r = get("/metrics");
    std::string error;
    for (const auto& [key, v] : parse_metrics(r.body, &error))
      if (key.rfind(sample + "{", 0) == 0 && v == value) return true;
    if (deadline_passed(start, timeout_seconds)) return false;
    sleep_ms(25);
  }
}

BackgroundCurl::BackgroundCurl(const std::vector<std::string>& args, double max_seconds) {
  out_path_ = temp_file("bg_curl");
  std::vector<std::string> argv = {"curl", "-sS", "-N", "-m", std::to_string(max_seconds)};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_ = spawn(argv, out_path_);
  if (pid_ < 0) ADD_FAILURE() << "cannot start curl";
}

BackgroundCurl::~BackgroundCurl() {
  kill();
  std::filesystem::remove(out_path_);
}

bool BackgroundCurl::wait_for_output(const std::string& text, double timeout_seconds) const {
  const auto start = Clock::now();
  while (output().find(text) == std::string::npos) {
    if (deadline_passed(start, timeout_seconds)) return false;
    sleep_ms(10);
  }
  return true;
}

void BackgroundCurl::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  reap(pid_, 10);
  pid_ = -1;
}

int BackgroundCurl::wait(double timeout_seconds) {
  if (pid_ <= 0) return -1;
  const int status = reap(pid_, timeout_seconds);
  if (status == -1) return -1;
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::map<std::string, double> parse_metrics(const std::string& text, std::string* error) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    // name{labels} value — label values may hold spaces, so split at the closing brace.
    const size_t brace = line.rfind('}');
    const size_t space = line.find(' ', brace == std::string::npos ? 0 : brace);
    if (space == std::string::npos) {
      if (error) *error = "line " + std::to_string(n) + ": no value: " + line;
      continue;
    }
    const std::string key = line.substr(0, space);
    const std::string value = line.substr(space + 1);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0') {
      if (error) *error = "line " + std::to_string(n) + ": bad value: " + line;
      continue;
    }
    out[key] = v;
  }
  return out;
}

std::vector<std::string> sse_events(const std::string& body, bool* framing_ok) {
  std::vector<std::string> events;
  bool ok = true;
  size_t i = 0;
  while (i < body.size()) {
    const size_t end = body.find("\n\n", i);
    if (end == std::string::npos) {
      ok = false;
      break;
    }
    const std::string event = body.substr(i, end - i);
    if (event.rfind("data: ", 0) != 0 || event.find('\n') != std::string::npos) ok = false;
    events.push_back(event.size() >= 6 ? event.substr(6) : event);
    i = end + 2;
  }
  if (framing_ok) *framing_ok = ok;
  return events;
}

}  // namespace vela::test
