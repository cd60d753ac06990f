// deploy/nginx/vela-replicas.conf as shipped, in front of two real `vela serve` replicas on
// loopback: requests pass through (completions, streams, /health, the Authorization header),
// requests without X-Session-Id are spread over both replicas, requests with one X-Session-Id
// all reach one replica, with a replica stopped every request still succeeds (passive
// failover), and with one killed under load every request ends, counted by how. Where each request
// went is read from each replica's /metrics (vela:request_success_total). Skips with a message when
// nginx or the shared models are absent.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server_harness.h"
#include "support/run_command.h"
#include "support/shared_data.h"

extern char** environ;

namespace vela::test {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

const char kApiKey[] = "replica-key";
const char kAuth[] = "-H 'Authorization: Bearer replica-key'";

std::string model_path() {
  return shared_path("models/aidreams260K.gguf").string();
}

bool past(Clock::time_point start, double seconds) {
  return std::chrono::duration<double>(Clock::now() - start).count() > seconds;
}

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// The nginx binary: on PATH, else Debian's /usr/sbin (not on a non-root user's PATH); or "".
std::string find_nginx() {
  const CommandResult r = run_command("command -v nginx");
  if (r.exit_code == 0 && !r.out.empty()) return r.out.substr(0, r.out.find('\n'));
  if (access("/usr/sbin/nginx", X_OK) == 0) return "/usr/sbin/nginx";
  return "";
}

// Replaces every `from` in `text`; returns how many.
int replace_all(std::string& text, const std::string& from, const std::string& to) {
  int n = 0;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
    ++n;
  }
  return n;
}

// Finished requests of a replica, all finish reasons together; -1 when /metrics does not answer.
double finished_requests(const ServerProcess& s) {
  const HttpResult r = s.get("/metrics");
  if (r.status != 200) return -1;
  std::string error;
  double sum = 0;
  for (const auto& [key, value] : parse_metrics(r.body, &error))
    if (key.rfind("vela:request_success_total{", 0) == 0) sum += value;
  return sum;
}

std::string completion_body(int max_tokens, bool stream = false) {
  return json{{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"stream", stream}}
      .dump();
}

// nginx run in the foreground (`-g 'daemon off;'`) as a child in its own process group, with a
// prefix directory of its own for the pid file, logs and temp files. Stopped at destruction.
class Nginx {
 public:
  // Writes the deploy template with the replicas' ports and a free listen port, and starts
  // nginx until it answers /health (bounded). Fails the current test on error.
  static std::unique_ptr<Nginx> start(const std::string& binary, uint16_t replica_a,
                                      uint16_t replica_b) {
    std::string conf = read_file(VELA_NGINX_TEMPLATE);
    // The template's placeholders: each replica in both upstream groups, one listen address.
    const int a = replace_all(conf, "server 127.0.0.1:8001 ",
                              "server 127.0.0.1:" + std::to_string(replica_a) + " ");
    const int b = replace_all(conf, "server 127.0.0.1:8002 ",
                              "server 127.0.0.1:" + std::to_string(replica_b) + " ");
    if (a != 2 || b != 2 || conf.find("listen 127.0.0.1:8080;") == std::string::npos) {
      ADD_FAILURE() << VELA_NGINX_TEMPLATE
                    << " no longer has the servers 127.0.0.1:8001 and 127.0.0.1:8002 in both "
                       "upstreams and `listen 127.0.0.1:8080;`";
      return nullptr;
    }
    // A free port may be taken before nginx binds it: then try another.
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto n = std::unique_ptr<Nginx>(new Nginx());
      n->port_ = free_loopback_port();
      n->prefix_ = unique_temp_path("nginx" + std::to_string(attempt));
      std::filesystem::remove_all(n->prefix_);
      std::filesystem::create_directories(n->prefix_ / "logs");
      std::filesystem::create_directories(n->prefix_ / "temp");
      std::string mine = conf;
      replace_all(mine, "listen 127.0.0.1:8080;",
                  "listen 127.0.0.1:" + std::to_string(n->port_) + ";");
      write_file(n->prefix_ / "nginx.conf", mine);
      if (n->launch(binary)) return n;
      const bool port_taken = n->output().find("Address already in use") != std::string::npos;
      if (!port_taken) {
        ADD_FAILURE() << "nginx did not start:\n" << n->output();
        return nullptr;
      }
    }
    ADD_FAILURE() << "nginx found no free listen port in 3 tries";
    return nullptr;
  }

  ~Nginx() {
    if (::testing::Test::HasFailure()) std::cerr << "--- nginx ---\n" << output() << "---\n";
    if (pid_ > 0) stop();
    std::filesystem::remove_all(prefix_);
  }

  // curl to nginx: `args` are more curl arguments (shell-quoted), then the URL.
  HttpResult request(const std::string& path, const std::string& args) const {
    const std::string body = unique_temp_path("nginx_body");
    const std::string headers = unique_temp_path("nginx_headers");
    const CommandResult r =
        run_command("curl -sS -m 30 -o " + shell_quote(body) + " -D " + shell_quote(headers) +
                    " -w '%{http_code}' " + args + " " +
                    shell_quote("http://127.0.0.1:" + std::to_string(port_) + path));
    HttpResult h;
    h.curl_exit = r.exit_code;
    h.status = std::atoi(r.out.c_str());
    h.body = read_file(body);
    h.headers = read_file(headers);
    std::filesystem::remove(body);
    std::filesystem::remove(headers);
    return h;
  }
  uint16_t port() const { return port_; }
  HttpResult get(const std::string& path, const std::string& extra = "") const {
    return request(path, extra);
  }
  HttpResult post(const std::string& path, const std::string& body,
                  const std::string& extra = "") const {
    const std::string file = unique_temp_path("nginx_request");
    write_file(file, body);
    HttpResult r = request(path, "-H 'Content-Type: application/json' --data-binary @" +
                                     shell_quote(file) + " " + extra);
    std::filesystem::remove(file);
    return r;
  }

  // What nginx printed, its error log and its access log (upstream address of each request).
  std::string output() const {
    return read_file(prefix_ / "stdout.txt") + read_file(prefix_ / "logs/error.log") +
           read_file(prefix_ / "logs/access.log");
  }

 private:
  bool launch(const std::string& binary) {
    // Started as root, nginx would run its workers as `nobody`, who cannot write the temp
    // directory; run them as the current user instead (the directive is ignored otherwise).
    std::string globals = "daemon off;";
    if (geteuid() == 0) {
      const passwd* user = getpwuid(geteuid());
      const group* grp = getgrgid(getegid());
      if (user && grp) globals += std::string(" user ") + user->pw_name + " " + grp->gr_name + ";";
    }
    const std::vector<std::string> argv = {
        binary, "-p",   prefix_.string() + "/", "-c", (prefix_ / "nginx.conf").string(),
        "-g",   globals};
    const std::string out = (prefix_ / "stdout.txt").string();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = posix_spawn(&pid_, binary.c_str(), &fa, &attr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      pid_ = -1;
      return false;
    }
    const auto start = Clock::now();
    while (!past(start, 20)) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      if (get("/health", "-m 2").status == 200) return true;
      sleep_ms(20);
    }
    write_file(prefix_ / "stdout.txt", output() + "\n(not answering /health within 20 s)\n");
    stop();
    return false;
  }

  // SIGTERM (fast shutdown) to nginx's process group, the master and its workers; SIGKILL to
  // the group if the master has not exited within 10 s.
  void stop() {
    ::kill(-pid_, SIGTERM);
    const auto start = Clock::now();
    for (;;) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_ || r < 0) break;
      if (past(start, 10)) {
        ::kill(-pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      sleep_ms(10);
    }
    pid_ = -1;
  }

  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::filesystem::path prefix_;
};

class NginxReplicas : public ::testing::Test {
 protected:
  void SetUp() override {
    VELA_REQUIRE_SHARED();
    if (!std::filesystem::exists(model_path()))
      GTEST_SKIP() << "shared model not found: " << model_path();
    const std::string nginx = find_nginx();
    if (nginx.empty()) GTEST_SKIP() << "nginx not installed (Debian package nginx)";
    for (auto* replica : {&a_, &b_}) {
      *replica = ServerProcess::start({"-m", model_path(), "--api-key", kApiKey});
      ASSERT_TRUE(*replica && (*replica)->port() != 0);
    }
    nginx_ = Nginx::start(nginx, a_->port(), b_->port());
    ASSERT_TRUE(nginx_);
  }

  void TearDown() override {
    nginx_.reset();  // before the replicas, so nginx never sees them vanish in a later test
  }

  // Finished-request counts of both replicas once they add up to `total` (bounded: a request's
  // count may land just after its response); {-1, -1} on timeout.
  std::pair<double, double> counts_when_total(double total) const {
    const auto start = Clock::now();
    for (;;) {
      const double a = a_ ? finished_requests(*a_) : 0;
      const double b = b_ ? finished_requests(*b_) : 0;
      if (a >= 0 && b >= 0 && a + b == total) return {a, b};
      if (past(start, 15)) return {-1, -1};
      sleep_ms(20);
    }
  }

  std::unique_ptr<ServerProcess> a_, b_;
  std::unique_ptr<Nginx> nginx_;
};

TEST_F(NginxReplicas, ProxiesCompletionsStreamsHealthAndAuthorization) {
  EXPECT_EQ(nginx_->get("/health").status, 200);

  // The replicas check the API key: nginx passes Authorization through, and their 401 back.
  EXPECT_EQ(nginx_->post("/v1/completions", completion_body(2)).status, 401);
  const HttpResult r = nginx_->post("/v1/completions", completion_body(2), kAuth);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.body;
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_LE(j["usage"]["completion_tokens"].get<int>(), 2);

  // A stream keeps its SSE framing through the proxy and ends with [DONE].
  const HttpResult s = nginx_->post("/v1/completions", completion_body(4, true), kAuth);
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_TRUE(s.has_header("text/event-stream")) << s.headers;
  bool framing_ok = false;
  const std::vector<std::string> events = sse_events(s.body, &framing_ok);
  EXPECT_TRUE(framing_ok) << s.body;
  ASSERT_GE(events.size(), 2u) << s.body;
  EXPECT_EQ(events.back(), "[DONE]");

  EXPECT_GE(counts_when_total(2).first, 0) << "the replicas did not count both generations";
}

TEST_F(NginxReplicas, SpreadsRequestsWithoutASessionHeader) {
  // One at a time, both replicas are always idle: least_conn breaks the tie by round robin
  // (state shared by the workers through the upstream's zone), so both get about half.
  constexpr int kRequests = 8;
  for (int i = 0; i < kRequests; ++i)
    ASSERT_EQ(nginx_->post("/v1/completions", completion_body(2), kAuth).status, 200);
  const auto [a, b] = counts_when_total(kRequests);
  ASSERT_GE(a, 0) << "the replicas' counts never added up to " << kRequests;
  EXPECT_GE(a, 3) << "replica A got " << a << " of " << kRequests;
  EXPECT_GE(b, 3) << "replica B got " << b << " of " << kRequests;
}

TEST_F(NginxReplicas, OneSessionIdStaysOnOneReplica) {
  constexpr int kRequests = 6;
  for (int i = 0; i < kRequests; ++i)
    ASSERT_EQ(nginx_
                  ->post("/v1/completions", completion_body(2),
                         std::string(kAuth) + " -H 'X-Session-Id: conversation-1'")
                  .status,
              200);
  const auto [a, b] = counts_when_total(kRequests);
  ASSERT_GE(a, 0) << "the replicas' counts never added up to " << kRequests;
  EXPECT_TRUE((a == kRequests && b == 0) || (a == 0 && b == kRequests))
      << "one session was split: " << a << " and " << b;

  // Different sessions hash to both replicas (a few ids could all land on one; 24 at a fair
  // split do so with probability 2^-23).
  constexpr int kSessions = 24;
  for (int i = 0; i < kSessions; ++i)
    ASSERT_EQ(nginx_
                  ->post("/v1/completions", completion_body(1),
                         std::string(kAuth) + " -H 'X-Session-Id: user-" + std::to_string(i) + "'")
                  .status,
              200);
  const auto [a2, b2] = counts_when_total(kRequests + kSessions);
  ASSERT_GE(a2, 0) << "the replicas' counts never added up to " << kRequests + kSessions;
  EXPECT_GT(a2 - a, 0) << "every session went to replica B";
  EXPECT_GT(b2 - b, 0) << "every session went to replica A";
}

TEST_F(NginxReplicas, RequestsSucceedWithAReplicaStopped) {
  const std::string session = std::string(kAuth) + " -H 'X-Session-Id: conversation-2'";
  ASSERT_EQ(nginx_->post("/v1/completions", completion_body(2), session).status, 200);
  const auto [a, b] = counts_when_total(1);
  ASSERT_GE(a, 0);
  // Stop the session's own replica (graceful SIGTERM; SIGKILL if it hangs).
  std::unique_ptr<ServerProcess>& home = a == 1 ? a_ : b_;
  const double survivor_before = a == 1 ? b : a;
  home->signal(SIGTERM);
  if (home->wait_exit(20) == -1) {
    home->signal(SIGKILL);
    home->wait_exit(10);
  }
  home.reset();
  // The stopped replica's idle keep-alive connections to nginx have closed; let nginx's
  // workers see that before they would reuse one (a POST on a dead reused connection is not
  // retried). The port now refuses connections, which nginx retries on the other replica.
  sleep_ms(200);

  constexpr int kRequests = 4;
  for (int i = 0; i < kRequests; ++i) {
    const HttpResult plain = nginx_->post("/v1/completions", completion_body(2), kAuth);
    EXPECT_EQ(plain.status, 200) << plain.body;
    const HttpResult sticky = nginx_->post("/v1/completions", completion_body(2), session);
    EXPECT_EQ(sticky.status, 200) << sticky.body;
    EXPECT_EQ(nginx_->get("/health").status, 200);
  }
  const auto [a2, b2] = counts_when_total(survivor_before + 2 * kRequests);
  EXPECT_GE(a2, 0) << "the surviving replica did not answer all " << 2 * kRequests << " requests";
}

// 64 requests from 16 clients, half of them streamed, and one replica killed with SIGKILL while
// they run. Every request ends, each one of three ways, all counted: 200 with the whole answer
// (those the survivor ran, and those nginx sent on after the dead replica refused the
// connection), a 502 (a request the killed replica had received: nginx does not send a POST it
// has sent to another replica, so a generation never runs twice), or a stream cut short (its
// 200 and first tokens were already on their way: the client sees the body end early, curl's
// exit 18). Nothing hangs (each curl has 30 s), and the requests sent after the kill succeed.
TEST_F(NginxReplicas, RequestsEndClearlyWhenAReplicaIsKilledUnderLoad) {
  constexpr int kClients = 16, kPerClient = 4, kTotal = kClients * kPerClient;
  struct Outcome {
    bool stream = false;
    int status = 0;
    int curl_exit = -1;
    bool whole = false;         // a complete JSON answer, or a stream ending in [DONE]
    double begin = 0, end = 0;  // seconds from the start
  };
  std::vector<Outcome> outcomes(kTotal);
  std::atomic<int> finished{0};
  const auto start = Clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const std::string url = "http://127.0.0.1:" + std::to_string(nginx_->port()) + "/v1/completions";
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&, c] {
      for (int r = 0; r < kPerClient; ++r) {
        Outcome& o = outcomes[size_t(c * kPerClient + r)];
        o.stream = (c + r) % 2 == 1;
        const std::string tag = "_c" + std::to_string(c) + "_r" + std::to_string(r);
        const std::string request = unique_temp_path("kill_request" + tag);
        const std::string answer = unique_temp_path("kill_answer" + tag);
        write_file(request, json{{"prompt", "Once upon a time"},
                                 {"max_tokens", 100},
                                 {"ignore_eos", true},
                                 {"stream", o.stream}}
                                .dump());
        o.begin = seconds();
        const CommandResult res =
            run_command("curl -sS -N -m 30 -o " + shell_quote(answer) + " -w '%{http_code}' " +
                        kAuth + " -H 'Content-Type: application/json' --data-binary @" +
                        shell_quote(request) + " " + shell_quote(url));
        o.end = seconds();
        o.curl_exit = res.exit_code;
        o.status = std::atoi(res.out.c_str());
        const std::string body = read_file(answer);
        if (o.stream) {
          bool framing_ok = false;
          const std::vector<std::string> events = sse_events(body, &framing_ok);
          o.whole = framing_ok && !events.empty() && events.back() == "[DONE]";
        } else {
          const json j = json::parse(body, nullptr, false);
          o.whole = j.is_object() && j.contains("choices");
        }
        std::filesystem::remove(request);
        std::filesystem::remove(answer);
        ++finished;
      }
    });
  // Kill replica A once a quarter of the requests are done, while it is generating.
  const auto running_on_a = [&] {
    const HttpResult r = a_->get("/metrics");
    std::string error;
    for (const auto& [key, value] : parse_metrics(r.body, &error))
      if (key.rfind("vela:num_requests_running", 0) == 0 && value > 0) return true;
    return false;
  };
  while ((finished < kTotal / 4 || !running_on_a()) && finished < kTotal && seconds() < 60)
    sleep_ms(5);
  ASSERT_LT(finished, kTotal) << "replica A never had a request running to be killed under";
  const double killed_at = seconds();
  a_->signal(SIGKILL);
  a_->wait_exit(10);
  for (std::thread& t : clients) t.join();
  a_.reset();

  int whole = 0, bad_gateway = 0, cut_streams = 0;
  std::string unexplained;
  for (const Outcome& o : outcomes) {
    if (o.status == 200 && o.curl_exit == 0 && o.whole)
      ++whole;
    else if ((o.status == 502 || o.status == 503) && o.curl_exit == 0)
      ++bad_gateway;
    else if (o.stream && o.status == 200 && o.curl_exit == 18 && !o.whole)
      ++cut_streams;
    else
      unexplained += " [stream " + std::to_string(o.stream) + " status " +
                     std::to_string(o.status) + " curl exit " + std::to_string(o.curl_exit) +
                     " whole " + std::to_string(o.whole) + "]";
    // Sent after the kill (and after nginx could see the replica's sockets close): succeeds.
    if (o.begin > killed_at + 0.2)
      EXPECT_TRUE(o.status == 200 && o.whole)
          << "a request sent " << o.begin - killed_at << " s after the kill got " << o.status;
  }
  std::cout << "killed at " << killed_at << " s: " << whole << " whole, " << bad_gateway
            << " 502/503, " << cut_streams << " streams cut, of " << kTotal << "\n";
  EXPECT_EQ(whole + bad_gateway + cut_streams, kTotal) << "unexplained:" << unexplained;
  EXPECT_GE(whole, kTotal / 2);
  // Only requests in flight on the killed replica can fail: at most one per client.
  EXPECT_LE(bad_gateway + cut_streams, kClients);
}

}  // namespace
}  // namespace vela::test
