// `vela bench serve --url URL --duration S`: a soak of mixed traffic for a bounded time —
// streamed and whole completions, streams the client cancels after the first token, malformed
// requests, and whatever the server refuses as busy (429) — with the server's resident memory
// sampled once a second (--server-pid). At the end every request must be accounted for: each
// one ended as an expected outcome, the server's own counters (from /metrics, as deltas over
// the run) agree with the client's, and the server is idle again with its KV cache empty.
// Memory must be flat after the warm-up: growth of the resident set after the first
// --warmup-fraction of the run stays under --max-rss-growth-mib. Exit status 1 when either
// check fails.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli_args.h"
#include "commands.h"
#include "serve_target.h"

namespace vela::cli {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

enum class Kind { kStream, kWhole, kCancel, kBad, kCount };
const char* kKindNames[] = {"stream", "whole", "cancel", "bad_request"};

enum class Outcome { kCompleted, kCancelled, kBadRequest, kBusy, kFailed, kCount };
const char* kOutcomeNames[] = {"completed", "cancelled", "bad_request_400", "busy_429", "failed"};

struct Exchange {
  Outcome outcome = Outcome::kFailed;
  std::string error;
};

// A plain HTTP exchange on a fresh connection; for streams, reads until `stop_after_first`
// (then closes) or the end.
Exchange exchange(const Target& t, const std::string& api_key, Kind kind, const std::string& model,
                  int max_tokens, std::mt19937_64& rng) {
  Exchange r;
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(120));
    stream.connect(resolver.resolve(t.host, t.port));
    std::string body;
    if (kind == Kind::kBad) {
      // Malformed in a few ways: broken JSON, a wrong type, a value out of range.
      static const char* kBad[] = {
          R"({"prompt": "x", "max_tokens": )", R"({"prompt": 5, "max_tokens": 4})",
          R"({"prompt": "x", "temperature": -3})", R"({"prompt": "x", "logprobs": 99})"};
      body = kBad[rng() % 4];
    } else {
      body = json{{"model", model},
                  {"prompt", "Once upon a time, in a land far away"},
                  {"max_tokens", max_tokens},
                  {"ignore_eos", true},
                  {"stream", kind != Kind::kWhole}}
                 .dump();
    }
    http::request<http::string_body> req{http::verb::post, t.path_prefix + "/v1/completions", 11};
    req.set(http::field::host, t.host);
    req.set(http::field::content_type, "application/json");
    if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
    req.body() = std::move(body);
    req.prepare_payload();
    http::write(stream, req);

    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    http::read_header(stream, buffer, parser);
    const int status = parser.get().result_int();
    if (status == 429) {
      r.outcome = Outcome::kBusy;
      return r;
    }
    if (status == 400 && kind == Kind::kBad) {
      r.outcome = Outcome::kBadRequest;
      return r;
    }
    if (status != 200 || kind == Kind::kBad) {
      r.error = "unexpected HTTP " + std::to_string(status) + " for a " + kKindNames[int(kind)] +
                " request";
      return r;
    }
    if (kind == Kind::kCancel) {
      // Read until the first event with text, then hang up.
      while (!parser.is_done()) {
        beast::error_code ec;
        http::read_some(stream, buffer, parser, ec);
        if (ec) throw beast::system_error(ec);
        if (parser.get().body().find("\"text\":\"") != std::string::npos) break;
      }
      beast::error_code ignored;
      stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
      stream.socket().close(ignored);
      r.outcome = Outcome::kCancelled;
      return r;
    }
    http::read(stream, buffer, parser);
    const std::string& text = parser.get().body();
    const bool ok = kind == Kind::kWhole ? json::parse(text, nullptr, false).contains("choices")
                                         : text.find("data: [DONE]") != std::string::npos;
    if (!ok) {
      r.error = std::string("incomplete ") + kKindNames[int(kind)] + " response";
      return r;
    }
    r.outcome = Outcome::kCompleted;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

Result<std::string> get(const Target& t, const std::string& path, const std::string& api_key) {
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(30));
    stream.connect(resolver.resolve(t.host, t.port));
    http::request<http::empty_body> req{http::verb::get, t.path_prefix + path, 11};
    req.set(http::field::host, t.host);
    if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    if (res.result() != http::status::ok)
      return make_error("GET " + path + " answered HTTP " + std::to_string(res.result_int()));
    return res.body();
  } catch (const std::exception& e) {
    return make_error("GET " + path + ": " + e.what());
  }
}

// Sums of the /metrics samples whose name starts with `name` and whose labels contain
// `label` (empty: any).
double metric_sum(const std::string& text, const std::string& name, const std::string& label) {
  double sum = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#' || line.rfind(name, 0) != 0) continue;
    const size_t brace = line.find('{');
    if (brace != name.size() && line[name.size()] != ' ') continue;  // a longer name
    if (!label.empty() && line.find(label) == std::string::npos) continue;
    sum += std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return sum;
}

std::optional<double> rss_mib(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      double kb = 0;
      in >> kb;
      return kb / 1024.0;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return std::nullopt;
}

}  // namespace

int run_bench_soak(int argc, char** argv) {
  Args args(
      "bench serve", "--url http://HOST:PORT --duration S [options]",
      {{"url", 0, "URL", "server base URL"},
       {"duration", 0, "S", "seconds of traffic"},
       {"concurrency", 'c', "N", "clients in flight (default 8)"},
       {"model", 'm', "NAME", "model name sent (default: the first of GET /v1/models)"},
       {"server-pid", 0, "PID", "sample this process's resident memory once a second"},
       {"warmup-fraction", 0, "F", "share of the run before memory growth counts (default 0.3)"},
       {"max-rss-growth-mib", 0, "MIB",
        "fail when resident memory grows more than this after the warm-up (default 32)"},
       {"max-tokens", 0, "N", "max_tokens of the generation requests, at most (default 48)"},
       {"api-key", 0, "KEY", "sent as Authorization: Bearer KEY"},
       {"seed", 's', "N", "traffic seed (default 0)"},
       {"output", 'o', "md|json", "output format (default md)"}});
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  const auto duration = args.get_float("duration", 60, 0.5, 7 * 86400.0);
  const auto conc = args.get_int("concurrency", 8, 1, 1024);
  const auto pid = args.get_int("server-pid", 0, 0, INT32_MAX);
  const auto warmup = args.get_float("warmup-fraction", 0.3, 0, 0.9);
  const auto max_growth = args.get_float("max-rss-growth-mib", 32, 0, 1e6);
  const auto max_tokens = args.get_int("max-tokens", 48, 2, 1 << 20);
  const auto seed = args.get_int("seed", 0, 0, INT64_MAX);
  for (const Error* e :
       {duration ? nullptr : &duration.error(), conc ? nullptr : &conc.error(),
        pid ? nullptr : &pid.error(), warmup ? nullptr : &warmup.error(),
        max_growth ? nullptr : &max_growth.error(), max_tokens ? nullptr : &max_tokens.error(),
        seed ? nullptr : &seed.error()}) {
    if (e) {
      std::fprintf(stderr, "%s\n", e->message.c_str());
      return 2;
    }
  }
  const std::string format = args.get("output", "md");
  if (!args.has("url") || (format != "md" && format != "json")) {
    std::fprintf(stderr, "vela bench serve: expected --url URL and -o md|json (see --help)\n");
    return 2;
  }
  auto target = parse_url(args.get("url"));
  if (!target) {
    std::fprintf(stderr, "vela bench serve: %s\n", target.message().c_str());
    return 2;
  }
  const std::string api_key = args.get("api-key");
  std::string model = args.get("model");
  if (model.empty()) {
    auto list = get(*target, "/v1/models", api_key);
    const json j = list ? json::parse(*list, nullptr, false) : json();
    if (!list || j.is_discarded() || !j.contains("data") || j["data"].empty()) {
      std::fprintf(stderr, "vela bench serve: cannot list the models: %s\n",
                   list ? "bad answer" : list.message().c_str());
      return 1;
    }
    model = j["data"][0].value("id", std::string());
  }
  auto metrics_before = get(*target, "/metrics", api_key);
  if (!metrics_before) {
    std::fprintf(stderr, "vela bench serve: %s\n", metrics_before.message().c_str());
    return 1;
  }

  // Clients: each draws a kind per request (stream 40%, whole 25%, cancel 20%, bad 15%).
  std::mutex mutex;
  std::array<std::array<int64_t, size_t(Outcome::kCount)>, size_t(Kind::kCount)> counts{};
  std::vector<std::string> errors;
  std::atomic<int64_t> issued{0};
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  std::vector<std::thread> clients;
  for (int64_t c = 0; c < *conc; ++c)
    clients.emplace_back([&, c] {
      std::mt19937_64 rng(uint64_t(*seed) * 1000003u + uint64_t(c));
      while (elapsed() < *duration) {
        const uint64_t draw = rng() % 100;
        const Kind kind = draw < 40   ? Kind::kStream
                          : draw < 65 ? Kind::kWhole
                          : draw < 85 ? Kind::kCancel
                                      : Kind::kBad;
        const int tokens = 2 + int(rng() % uint64_t(*max_tokens - 1));
        ++issued;
        const Exchange r = exchange(*target, api_key, kind, model, tokens, rng);
        {
          std::lock_guard<std::mutex> lock(mutex);
          ++counts[size_t(kind)][size_t(r.outcome)];
          if (r.outcome == Outcome::kFailed && errors.size() < 5) errors.push_back(r.error);
        }
        // Busy: back off a little, as a client honouring Retry-After would (less eagerly).
        if (r.outcome == Outcome::kBusy)
          std::this_thread::sleep_for(std::chrono::milliseconds(20 + int(rng() % 80)));
      }
    });

  // Memory, once a second.
  std::vector<std::pair<double, double>> rss;  // (seconds, MiB)
  while (elapsed() < *duration) {
    if (*pid > 0)
      if (auto m = rss_mib(*pid)) rss.emplace_back(elapsed(), *m);
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  }
  for (std::thread& t : clients) t.join();
  const double wall = elapsed();
  if (*pid > 0)
    if (auto m = rss_mib(*pid)) rss.emplace_back(wall, *m);

  // The server settles: nothing running or waiting, every KV block back.
  std::string metrics_after;
  bool idle = false;
  for (int i = 0; i < 100 && !idle; ++i) {
    auto m = get(*target, "/metrics", api_key);
    if (m) {
      metrics_after = *m;
      idle = metric_sum(metrics_after, "vela:num_requests_running", "") == 0 &&
             metric_sum(metrics_after, "vela:num_requests_waiting", "") == 0 &&
             metric_sum(metrics_after, "vela:kv_cache_usage_perc", "") == 0;
    }
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  int64_t by_outcome[size_t(Outcome::kCount)] = {};
  for (const auto& row : counts)
    for (size_t o = 0; o < row.size(); ++o) by_outcome[o] += row[o];
  int64_t total = 0;
  for (int64_t n : by_outcome) total += n;
  const auto delta = [&](const char* name, const std::string& label) {
    return metric_sum(metrics_after, name, label) - metric_sum(*metrics_before, name, label);
  };
  // Server side: every generation that reached the engine finished (stop, length or abort);
  // refusals are counted by reason.
  const double server_finished = delta("vela:request_success_total", "");
  const double server_invalid = delta("vela:request_rejected_total", "reason=\"invalid\"");
  const double server_busy = delta("vela:request_rejected_total", "reason=\"queue_full\"");
  const int64_t client_finished =
      by_outcome[size_t(Outcome::kCompleted)] + by_outcome[size_t(Outcome::kCancelled)];
  const bool accounted = total == issued.load() && by_outcome[size_t(Outcome::kFailed)] == 0 &&
                         idle && int64_t(server_finished) == client_finished &&
                         int64_t(server_invalid) == by_outcome[size_t(Outcome::kBadRequest)] &&
                         int64_t(server_busy) == by_outcome[size_t(Outcome::kBusy)];

  // Memory growth after the warm-up: the largest sample after it, over the first one after it.
  double rss_warm = 0, rss_max = 0, rss_end = rss.empty() ? 0 : rss.back().second;
  bool have_warm = false;
  for (const auto& [t, m] : rss) {
    if (t < *warmup * wall) continue;
    if (!have_warm) rss_warm = m;
    have_warm = true;
    rss_max = std::max(rss_max, m);
  }
  const double growth = have_warm ? rss_max - rss_warm : 0;
  const bool flat = *pid == 0 || (have_warm && growth <= *max_growth);

  json out;
  out["duration_s"] = wall;
  out["concurrency"] = *conc;
  out["issued"] = issued.load();
  json kinds = json::object();
  for (size_t k = 0; k < size_t(Kind::kCount); ++k) {
    json row = json::object();
    for (size_t o = 0; o < size_t(Outcome::kCount); ++o) row[kOutcomeNames[o]] = counts[k][o];
    kinds[kKindNames[k]] = row;
  }
  out["by_kind"] = kinds;
  json outcomes = json::object();
  for (size_t o = 0; o < size_t(Outcome::kCount); ++o) outcomes[kOutcomeNames[o]] = by_outcome[o];
  out["outcomes"] = outcomes;
  out["server"] = {{"finished", server_finished},
                   {"rejected_invalid", server_invalid},
                   {"rejected_queue_full", server_busy},
                   {"idle_at_end", idle}};
  out["accounted"] = accounted;
  if (!errors.empty()) out["errors"] = errors;
  if (*pid > 0) {
    json samples = json::array();
    for (const auto& [t, m] : rss) samples.push_back({std::round(t * 10) / 10, m});
    out["rss_mib"] = {{"after_warmup", rss_warm}, {"max_after_warmup", rss_max},
                      {"end", rss_end},           {"growth", growth},
                      {"bound", *max_growth},     {"samples", samples}};
  }
  out["memory_flat"] = flat;
  if (format == "json") {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("soak: %lld requests in %.1f s with %lld clients\n", (long long)issued.load(), wall,
                (long long)*conc);
    for (size_t o = 0; o < size_t(Outcome::kCount); ++o)
      std::printf("  %-16s %lld\n", kOutcomeNames[o], (long long)by_outcome[o]);
    std::printf("server: %.0f finished, %.0f refused as invalid, %.0f as busy; idle at end: %s\n",
                server_finished, server_invalid, server_busy, idle ? "yes" : "no");
    std::printf("every request accounted for: %s\n", accounted ? "yes" : "NO");
    if (*pid > 0)
      std::printf(
          "resident memory: %.1f MiB after warm-up, %.1f MiB max, %.1f MiB at the end: "
          "growth %.1f MiB (bound %.1f): %s\n",
          rss_warm, rss_max, rss_end, growth, *max_growth, flat ? "flat" : "GROWING");
    for (const std::string& e : errors) std::printf("  error: %s\n", e.c_str());
  }
  return accounted && flat ? 0 : 1;
}

}  // namespace vela::cli
