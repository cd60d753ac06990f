// `vela bench serve --url URL`: a load generator for any OpenAI-compatible server. Requests
// (synthetic lengths or lines of a prompt file) arrive as a Poisson process at a given rate, or
// at a fixed concurrency; each streams its completion, and the run reports completed/failed,
// request and token throughput, and mean/median/P90/P99 of time to first token, time per output
// token, inter-token latency and end-to-end latency, as a table and as JSON, with the ITL
// distribution's P99/median ratio and, given service-level objectives, the goodput. The
// request count and the duration are both bounded.
#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli_args.h"
#include "commands.h"
#include "serve_target.h"
#include "tools_support/bench/serve_slo.h"

namespace vela::cli {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct Sample {
  bool ok = false;
  int http_status = 0;  // 0 = no response
  std::string error;
  double ttft = 0, e2e = 0;
  std::vector<double> itl;  // gaps between streamed chunks after the first
  int64_t output_tokens = 0, prompt_tokens = 0;
};

// One streaming completion request; measures as the chunks arrive.
// `extra`: more body fields (e.g. a response_format), merged in.
Sample run_request(const Target& target, const std::string& model, const std::string& prompt,
                   int max_tokens, const std::string& api_key, double timeout_s,
                   const nlohmann::json& extra) {
  Sample s;
  const auto start = Clock::now();
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s)));
    stream.connect(resolver.resolve(target.host, target.port));
    nlohmann::json body = {{"model", model},
                           {"prompt", prompt},
                           {"max_tokens", max_tokens},
                           {"stream", true},
                           {"temperature", 0},
                           {"ignore_eos", true},
                           {"stream_options", {{"include_usage", true}}}};
    body.update(extra);
    http::request<http::string_body> req{http::verb::post, target.path_prefix + "/v1/completions",
                                         11};
    req.set(http::field::host, target.host);
    req.set(http::field::content_type, "application/json");
    if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
    req.body() = body.dump();
    req.prepare_payload();
    http::write(stream, req);

    beast::flat_buffer buffer;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<uint64_t>::max());
    http::read_header(stream, buffer, parser);
    s.http_status = parser.get().result_int();
    if (parser.get().result() != http::status::ok) {
      s.error = "HTTP " + std::to_string(parser.get().result_int());
      return s;
    }
    std::string pending;
    char chunk[8192];
    bool first = true, done = false;
    Clock::time_point last{};
    while (!parser.is_done() && !done) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof chunk;
      beast::error_code ec;
      http::read_some(stream, buffer, parser, ec);  // returns as soon as some body arrived
      if (ec && ec != http::error::need_buffer) throw beast::system_error(ec);
      pending.append(chunk, sizeof chunk - parser.get().body().size);
      // Server-sent events are separated by blank lines.
      for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
        const std::string event = pending.substr(0, end);
        pending.erase(0, end + 2);
        if (event.rfind("data: ", 0) != 0) continue;
        const std::string data = event.substr(6);
        if (data == "[DONE]") {
          done = true;
          break;
        }
        const auto j = nlohmann::json::parse(data, nullptr, false);
        if (j.is_discarded()) continue;
        if (j.contains("usage") && j["usage"].is_object()) {
          s.output_tokens = j["usage"].value("completion_tokens", int64_t(0));
          s.prompt_tokens = j["usage"].value("prompt_tokens", int64_t(0));
        }
        const bool has_text = j.contains("choices") && !j["choices"].empty() &&
                              !j["choices"][0].value("text", std::string()).empty();
        if (!has_text) continue;
        const auto now = Clock::now();
        if (first)
          s.ttft = std::chrono::duration<double>(now - start).count();
        else
          s.itl.push_back(std::chrono::duration<double>(now - last).count());
        first = false;
        last = now;
      }
    }
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    s.ok = done;
    if (!done) s.error = "stream ended without [DONE]";
  } catch (const std::exception& e) {
    s.error = e.what();
  }
  s.e2e = std::chrono::duration<double>(Clock::now() - start).count();
  return s;
}

// The first model id the server lists (GET /v1/models).
Result<std::string> first_model_id(const Target& target, const std::string& api_key) {
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(30));
    stream.connect(resolver.resolve(target.host, target.port));
    http::request<http::empty_body> req{http::verb::get, target.path_prefix + "/v1/models", 11};
    req.set(http::field::host, target.host);
    if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    const auto j = nlohmann::json::parse(res.body(), nullptr, false);
    if (res.result() != http::status::ok || j.is_discarded() || !j.contains("data") ||
        j["data"].empty())
      return make_error("GET /v1/models answered HTTP " + std::to_string(res.result_int()));
    return j["data"][0].value("id", std::string());
  } catch (const std::exception& e) {
    return make_error(std::string("cannot reach the server: ") + e.what());
  }
}

struct Stats {
  double mean = 0, median = 0, p90 = 0, p99 = 0;
};

Stats summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / double(v.size());
  const auto pct = [&](double p) {
    return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
  };
  s.median = pct(0.5);
  s.p90 = pct(0.9);
  s.p99 = pct(0.99);
  return s;
}

}  // namespace

int run_bench_serve(int argc, char** argv) {
  // --duration: the soak mode (mixed traffic for a bounded time, memory sampled).
  for (int i = 0; i < argc; ++i)
    if (std::string_view(argv[i]) == "--duration") return run_bench_soak(argc, argv);
  Args args(
      "bench serve", "--url http://HOST:PORT [options]",
      {{"url", 0, "URL", "server base URL (the /v1 endpoints are under it)"},
       {"model", 'm', "NAME",
        "model name sent in requests (default: the first id of GET /v1/models)"},
       {"num-requests", 'n', "N", "requests in all (default 100)"},
       {"rate", 0, "R",
        "Poisson arrivals per second; 0 = all at once under --concurrency (default 0)"},
       {"concurrency", 'c', "N", "requests in flight at most (default 16)"},
       {"input-len", 0, "N", "synthetic prompt length in words (default 128)"},
       {"output-len", 0, "N", "max_tokens per request (default 128)"},
       {"prompt-file", 0, "FILE", "prompts, one per line (cycled), instead of synthetic ones"},
       {"max-duration", 0, "S", "stop issuing requests after S seconds (default 600)"},
       {"timeout", 0, "S", "per-request timeout in seconds (default 300)"},
       {"api-key", 0, "KEY", "sent as Authorization: Bearer KEY"},
       {"seed", 's', "N", "arrival and prompt seed (default 0)"},
       {"slo-ttft-ms", 0, "MS", "goodput objective: time to first token at most MS"},
       {"slo-itl-ms", 0, "MS", "goodput objective: every inter-token gap at most MS"},
       {"goodput", 0, "KEY:MS",
        "goodput objectives as vLLM's bench names them: ttft, tpot, e2el, and itl (every gap); "
        "repeatable or comma-separated"},
       {"json-schema", 0, "FILE",
        "constrain every output to this JSON Schema (response_format json_schema, strict)"},
       {"output", 'o', "md|json", "output format (default md)"}});
  if (const auto exit_code = args.parse_or_exit(argc, argv)) return *exit_code;
  const auto n = args.get_int("num-requests", 100, 1, 1000000);
  const auto rate = args.get_float("rate", 0, 0, 1e6);
  const auto conc = args.get_int("concurrency", 16, 1, 4096);
  const auto in_len = args.get_int("input-len", 128, 1, 1 << 20);
  const auto out_len = args.get_int("output-len", 128, 1, 1 << 20);
  const auto max_dur = args.get_float("max-duration", 600, 0.001, 86400);
  const auto timeout = args.get_float("timeout", 300, 0.001, 86400);
  const auto seed = args.get_int("seed", 0, 0, INT64_MAX);
  for (const Error* e : {n ? nullptr : &n.error(), rate ? nullptr : &rate.error(),
                         conc ? nullptr : &conc.error(), in_len ? nullptr : &in_len.error(),
                         out_len ? nullptr : &out_len.error(), max_dur ? nullptr : &max_dur.error(),
                         timeout ? nullptr : &timeout.error(), seed ? nullptr : &seed.error()}) {
    if (e) {
      std::fprintf(stderr, "%s\n", e->message.c_str());
      return 2;
    }
  }
  ServeSlo slo;
  {
    std::vector<std::string> specs = args.get_all("goodput");
    for (const auto& [flag, key] : {std::pair{"slo-ttft-ms", "ttft:"}, {"slo-itl-ms", "itl:"}})
      if (args.has(flag)) specs.push_back(key + args.get(flag));
    if (auto st = add_goodput_objectives(specs, slo); !st) {
      std::fprintf(stderr, "vela bench serve: %s\n", st.message().c_str());
      return 2;
    }
  }
  const std::string format = args.get("output", "md");
  if (!args.has("url") || (format != "md" && format != "json") || !args.positional().empty()) {
    std::fprintf(stderr, "vela bench serve: expected --url URL and -o md|json (see --help)\n");
    return 2;
  }
  auto target = parse_url(args.get("url"));
  if (!target) {
    std::fprintf(stderr, "vela bench serve: %s\n", target.message().c_str());
    return 2;
  }
  std::vector<std::string> prompts;
  std::mt19937_64 rng(static_cast<uint64_t>(*seed));
  if (args.has("prompt-file")) {
    std::ifstream in(args.get("prompt-file"));
    if (!in) {
      std::fprintf(stderr, "vela bench serve: cannot read '%s'\n", args.get("prompt-file").c_str());
      return 2;
    }
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) prompts.push_back(line);
    if (prompts.empty()) {
      std::fprintf(stderr, "vela bench serve: the prompt file has no prompts\n");
      return 2;
    }
  } else {
    static const char* kWords[] = {"the", "model",   "serves",  "many", "users",      "with",
                                   "low", "latency", "and",     "high", "throughput", "on",
                                   "a",   "small",   "machine", "today"};
    for (int64_t i = 0; i < std::min<int64_t>(*n, 1000); ++i) {
      std::string p;
      for (int64_t w = 0; w < *in_len; ++w) p += std::string(w ? " " : "") + kWords[rng() % 16];
      prompts.push_back(p);
    }
  }
  nlohmann::json extra = nlohmann::json::object();
  if (args.has("json-schema")) {
    std::ifstream in(args.get("json-schema"));
    const nlohmann::json schema = nlohmann::json::parse(in, nullptr, false);
    if (schema.is_discarded()) {
      std::fprintf(stderr, "vela bench serve: '%s' is not a readable JSON file\n",
                   args.get("json-schema").c_str());
      return 2;
    }
    extra["response_format"] = {
        {"type", "json_schema"},
        {"json_schema", {{"name", "bench"}, {"schema", schema}, {"strict", true}}}};
  }
  const std::string api_key = args.get("api-key");
  std::string model = args.get("model");
  if (model.empty()) {
    auto id = first_model_id(*target, api_key);
    if (!id) {
      std::fprintf(stderr, "vela bench serve: %s\n", id.message().c_str());
      return 1;
    }
    model = *id;
  }

  // Arrival schedule: Poisson at `rate`, or everything at t=0 (concurrency bounds it).
  std::vector<double> arrivals(static_cast<size_t>(*n), 0.0);
  if (*rate > 0) {
    std::exponential_distribution<double> gap(*rate);
    double t = 0;
    for (auto& a : arrivals) a = (t += gap(rng));
  }
  std::vector<Sample> samples(arrivals.size());
  std::atomic<size_t> next{0};
  std::atomic<int> in_flight{0};
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  std::vector<std::thread> workers;
  // Each worker takes the next request when its arrival time has come; `concurrency` workers
  // bound the requests in flight.
  for (int64_t w = 0; w < *conc; ++w) {
    workers.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < arrivals.size();) {
        const double wait = arrivals[i] - elapsed();
        if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
        if (elapsed() > *max_dur) {
          samples[i].error = "not sent: --max-duration reached";
          continue;
        }
        ++in_flight;
        samples[i] = run_request(*target, model, prompts[i % prompts.size()], int(*out_len),
                                 api_key, *timeout, extra);
        --in_flight;
      }
    });
  }
  for (auto& t : workers) t.join();
  const double wall = elapsed();

  std::vector<double> ttft, tpot, itl, e2e;
  int64_t completed = 0, failed = 0, rejected = 0, out_tokens = 0, in_tokens = 0, good = 0;
  std::string first_error;
  for (const Sample& s : samples) {
    const ServedRequest served{s.ok, s.ttft, s.e2e, s.itl, (long long)s.output_tokens};
    good += meets_slo(slo, served);
    if (!s.ok) {
      ++failed;
      rejected += s.http_status == 429;
      if (first_error.empty()) first_error = s.error;
      continue;
    }
    ++completed;
    out_tokens += s.output_tokens;
    in_tokens += s.prompt_tokens;
    ttft.push_back(s.ttft);
    e2e.push_back(s.e2e);
    if (auto t = served.tpot()) tpot.push_back(*t);
    itl.insert(itl.end(), s.itl.begin(), s.itl.end());
  }
  const Stats st_ttft = summarize(ttft), st_tpot = summarize(tpot), st_itl = summarize(itl),
              st_e2e = summarize(e2e);
  const auto stats_json = [](const Stats& s) {
    return nlohmann::json{{"mean_ms", s.mean * 1e3},
                          {"median_ms", s.median * 1e3},
                          {"p90_ms", s.p90 * 1e3},
                          {"p99_ms", s.p99 * 1e3}};
  };
  nlohmann::json out = {{"url", args.get("url")},
                        {"num_requests", *n},
                        {"rate", *rate},
                        {"concurrency", *conc},
                        {"completed", completed},
                        {"failed", failed},
                        {"rejected_429", rejected},
                        {"duration_s", wall},
                        {"request_throughput", double(completed) / wall},
                        {"output_tokens", out_tokens},
                        {"prompt_tokens", in_tokens},
                        {"output_tokens_per_s", double(out_tokens) / wall},
                        {"total_tokens_per_s", double(out_tokens + in_tokens) / wall},
                        {"ttft", stats_json(st_ttft)},
                        {"tpot", stats_json(st_tpot)},
                        {"itl", stats_json(st_itl)},
                        {"e2e_latency", stats_json(st_e2e)}};
  // How far the slowest gaps stand above the typical one: stalls behind prefill show here.
  const double itl_tail_ratio = st_itl.median > 0 ? st_itl.p99 / st_itl.median : 0;
  out["itl_p99_over_median"] = itl_tail_ratio;
  if (slo.any())
    out["goodput"] = {{"objectives", slo.describe()},
                      {"good_requests", good},
                      {"share", double(good) / double(samples.size())},
                      {"requests_per_s", double(good) / wall}};
  if (!first_error.empty()) out["first_error"] = first_error;
  if (format == "json") {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("completed %lld, failed %lld in %.2f s%s%s\n", (long long)completed,
                (long long)failed, wall,
                first_error.empty() ? "" : "; first error: ", first_error.c_str());
    std::printf("request throughput %.3f req/s, output %.1f tok/s, total %.1f tok/s\n\n",
                double(completed) / wall, double(out_tokens) / wall,
                double(out_tokens + in_tokens) / wall);
    std::printf(
        "| metric | mean ms | median ms | P90 ms | P99 ms |\n| --- | ---: | ---: | ---: | ---: "
        "|\n");
    const auto row = [](const char* name, const Stats& s) {
      std::printf("| %s | %.2f | %.2f | %.2f | %.2f |\n", name, s.mean * 1e3, s.median * 1e3,
                  s.p90 * 1e3, s.p99 * 1e3);
    };
    row("time to first token", st_ttft);
    row("time per output token", st_tpot);
    row("inter-token latency", st_itl);
    row("end-to-end latency", st_e2e);
    std::printf("\ninter-token latency P99 / median: %.2f\n", itl_tail_ratio);
    if (slo.any())
      std::printf("goodput (%s): %lld of %zu requests (%.1f%%), %.3f req/s\n",
                  slo.describe().c_str(), (long long)good, samples.size(),
                  100.0 * double(good) / double(samples.size()), double(good) / wall);
  }
  return failed > 0 && completed == 0 ? 1 : 0;
}

}  // namespace vela::cli
