// vela._vela: the C++ engine for the `vela` Python package. The package's Python code
// (python/vela/) gives the vLLM-shaped API; this module is the thin layer below it: an Engine
// that owns one vela::LLM, generate() with the GIL released, tokenizer access, and the sampling
// parameter checks (the same function the server uses, so the messages match).
//
// Thread-safety: an Engine may be used from several Python threads; generate() calls are
// serialised by vela::LLM. close() while another thread generates is safe: the running call
// keeps the model alive until it returns.
//
// Tensor and pipeline parallelism: the process's group (dist/tensor_group.h: pipeline stages
// of tensor-parallel ranks) is joined once, by join_tensor_parallel, and held here until
// leave_tensor_parallel (the package calls it at interpreter exit), so LLMs made one after
// another with the same sizes reuse its ranks. World rank 0 runs the engines; every other rank
// serves them. The group serves one engine at a time: a second parallel Engine while the first
// still exists is an error. MPI cannot be initialised again once the group is gone.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#include "convert.h"
#include "dist/tensor_group.h"
#include "io/gguf.h"
#include "model/model_config.h"
#include "model/tensor_shard.h"
#include "vela/llm.h"

namespace vela::python {
namespace {

// How often a running generate() looks at Python: pending signals (Ctrl-C) and the progress
// callback. Each look takes the GIL, which another busy Python thread may hold for its switch
// interval, so it is not done at every engine step.
constexpr auto kPollInterval = std::chrono::milliseconds(50);

// The process's parallel group (null before join_tensor_parallel and after
// leave_tensor_parallel), the LLM of the parallel Engine that uses it (expired once that LLM
// is freed, including by a generate() still running when its Engine was closed), whether a
// join or a parallel Engine's load is under way (each releases the GIL), and whether the group
// was shut down (MPI is finalised then and cannot start again). Read and written with the GIL
// held, which orders them.
struct TensorParallelState {
  std::shared_ptr<TensorParallel> group;
  std::weak_ptr<LLM> engine;
  bool joining = false;
  bool loading = false;
  bool left = false;
};
TensorParallelState& tp_state() {
  static TensorParallelState* state = new TensorParallelState();  // lives until exit
  return *state;
}

// The Python options that make a group of these sizes: "tensor_parallel_size=T", with
// ", pipeline_parallel_size=P" when P > 1 (as error messages name them).
std::string parallel_options(int32_t tensor, int32_t pipeline) {
  std::string text = "tensor_parallel_size=" + std::to_string(tensor);
  if (pipeline > 1) text += ", pipeline_parallel_size=" + std::to_string(pipeline);
  return text;
}

// Drops the held group: world rank 0 tells the other ranks to stop, and MPI is finalised once no
// engine holds the group any more (an engine still alive keeps it until it is freed).
void leave_tensor_parallel() {
  std::shared_ptr<TensorParallel> group = std::move(tp_state().group);
  if (!group) return;
  tp_state().left = true;
  const bool engine_alive = !tp_state().engine.expired();
  py::gil_scoped_release release;
  if (group->world_rank() == 0 && engine_alive) group->close();
  group.reset();
}

// Raises ValueError when `pipeline` stages of `size` ranks each cannot split the model at
// `path` (the checks every rank's load makes, made before any process is started: each
// stage's layers, heads, FFN and experts); RuntimeError when the file does not load.
void check_tensor_parallel(const std::string& path, int32_t size, int32_t pipeline) {
  auto gguf = GgufFile::open(path);
  if (!gguf) throw std::runtime_error(gguf.message());
  auto config = ModelConfig::from_gguf(*gguf);
  if (!config) throw std::runtime_error("'" + path + "': " + config.message());
  for (int32_t stage = 0; stage < pipeline; ++stage) {
    for (int32_t rank = 0; rank < size; ++rank) {
      const TensorShard shard{.rank = rank, .size = size, .stage = stage, .n_stages = pipeline};
      auto ranges = shard_ranges(*config, shard, 1, 1, 1);
      if (!ranges)
        throw py::value_error(parallel_options(size, pipeline) + ": '" + path +
                              "': " + ranges.message());
    }
  }
}

// Joins (or reuses) the process's group of `pipeline` stages of `size` ranks and returns this
// process's world rank (0 runs the engine). worker_program: the vela binary that spawned
// workers run (unused under mpirun).
int32_t join_tensor_parallel(int32_t size, const std::string& worker_program, int32_t pipeline) {
  if (!dist::available())
    throw std::runtime_error(
        "tensor_parallel_size or pipeline_parallel_size > 1 needs MPI, and this vela module was "
        "built without it (install Open MPI's development files, e.g. Debian's "
        "libopenmpi-dev, and rebuild)");
  TensorParallelState& st = tp_state();
  if (st.joining)
    throw std::runtime_error("another thread is joining this process's parallel group");
  if (st.group) {
    if (st.group->size() != size || st.group->n_stages() != pipeline)
      throw std::runtime_error(
          parallel_options(size, pipeline) + ": this process's parallel group has " +
          std::to_string(st.group->size() * st.group->n_stages()) +
          " ranks, and a process has one group; use " +
          parallel_options(st.group->size(), st.group->n_stages()) + " or a new process");
    return st.group->world_rank();
  }
  if (st.left)
    throw std::runtime_error(
        "this process's parallel group was shut down or failed to start, and MPI cannot "
        "start twice in a process; use a new process for another tensor- or "
        "pipeline-parallel LLM");
  st.joining = true;
  Result<std::shared_ptr<TensorParallel>> joined = [&] {
    py::gil_scoped_release release;
    return dist::join(dist::ParallelSizes{.tensor = size, .pipeline = pipeline}, worker_program);
  }();
  st.joining = false;
  if (!joined) {
    // MPI was finalised (or had been already) and cannot start again in this process.
    st.left = true;
    throw std::runtime_error(parallel_options(size, pipeline) + ": " + joined.message());
  }
  st.group = std::move(*joined);
  return st.group->world_rank();
}

// A world rank other than 0: serves world rank 0's engines until it closes the group, then
// finalises MPI. Returns the process exit code (0: rank 0 closed the group).
int serve_tensor_parallel_worker() {
  if (!tp_state().group) throw std::runtime_error("this process has not joined a parallel group");
  if (tp_state().group->world_rank() == 0)
    throw std::runtime_error("rank 0 runs the engine; it does not serve as a worker");
  std::shared_ptr<TensorParallel> group = std::move(tp_state().group);
  tp_state().left = true;
  py::gil_scoped_release release;
  // mpirun forwards SIGTERM and SIGINT to every rank: rank 0 drains its requests and then
  // closes the group, which is what ends this rank (as the CLI's workers do).
  auto old_term = std::signal(SIGTERM, SIG_IGN);
  auto old_int = std::signal(SIGINT, SIG_IGN);
  const int code = dist::serve_as_worker(group);
  group.reset();
  std::signal(SIGTERM, old_term);
  std::signal(SIGINT, old_int);
  return code;
}

class Engine {
 public:
  explicit Engine(const LLMConfig& config) {
    const bool parallel = config.tensor_parallel_size > 1 || config.pipeline_parallel_size > 1;
    if (parallel) {
      if (!tp_state().group || tp_state().group->world_rank() != 0)
        throw std::runtime_error(
            parallel_options(config.tensor_parallel_size, config.pipeline_parallel_size) +
            ": this process is not rank 0 of a parallel group (vela.LLM joins it first)");
      if (tp_state().loading || !tp_state().engine.expired())
        throw std::runtime_error(
            "another tensor-parallel LLM is open in this process, and its ranks serve one "
            "engine at a time: close() it first");
      tp_state().loading = true;
    }
    Result<std::unique_ptr<LLM>> loaded = [&] {
      py::gil_scoped_release release;
      return LLM::load(config);
    }();
    if (parallel) tp_state().loading = false;
    if (!loaded) {
      // A rank that could not load its slice waits for the group to close: close it (those
      // ranks take no other setup).
      if (parallel && loaded.message().find("tensor-parallel rank ") != std::string::npos)
        leave_tensor_parallel();
      throw std::runtime_error(loaded.message());
    }
    llm_ = std::shared_ptr<LLM>(std::move(*loaded));
    if (parallel) tp_state().engine = llm_;
  }

  void close() { llm_.reset(); }
  bool closed() const { return !llm_; }

  // requests: [(prompt: str | list[int], params: SamplingParams)].
  // on_delta(prompt_index, completion_index, token, text, finished, finish_reason) -> bool:
  //   called for every streamed step; False cancels that completion.
  // on_step(finished_prompts, total) -> bool: called every kPollInterval; False cancels all.
  // Exceptions from either callback, and KeyboardInterrupt, cancel the call and are re-raised
  // once the engine has stopped.
  py::list generate(const py::list& requests, const py::object& on_delta,
                    const py::object& on_step) {
    std::shared_ptr<LLM> llm = get();
    std::vector<GenerateRequest> reqs;
    reqs.reserve(requests.size());
    for (const py::handle item : requests) {
      py::tuple t = item.cast<py::tuple>();
      py::object prompt = t[0];
      SamplingParams params = sampling_params_from(t[1]);
      if (py::isinstance<py::str>(prompt))
        reqs.push_back(GenerateRequest{Prompt(prompt.cast<std::string>()), std::move(params)});
      else
        reqs.push_back(
            GenerateRequest{Prompt(prompt.cast<std::vector<int32_t>>()), std::move(params)});
    }

    std::exception_ptr pending;
    std::atomic<bool> cancel_all{false};
    auto last_poll = std::chrono::steady_clock::now();
    GenerateHooks hooks;
    if (!on_delta.is_none()) {
      hooks.on_delta = [&](const StreamDelta& d) {
        if (cancel_all) return false;
        py::gil_scoped_acquire gil;
        try {
          py::object keep =
              on_delta(d.request_index, d.completion_index, d.token, text_to_py(d.text), d.finished,
                       finish_reason_name(d.finish_reason));
          return keep.is_none() || keep.cast<bool>();
        } catch (...) {
          if (!pending) pending = std::current_exception();
          cancel_all = true;
          return false;
        }
      };
    }
    hooks.on_step = [&](size_t finished, size_t total) {
      if (cancel_all) return false;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_poll < kPollInterval && finished < total) return true;
      last_poll = now;
      py::gil_scoped_acquire gil;
      try {
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        if (!on_step.is_none()) {
          py::object keep = on_step(finished, total);
          if (!keep.is_none() && !keep.cast<bool>()) cancel_all = true;
        }
      } catch (...) {
        if (!pending) pending = std::current_exception();
        cancel_all = true;
      }
      return !cancel_all;
    };

    Result<std::vector<RequestOutput>> result = [&] {
      py::gil_scoped_release release;
      return llm->generate(reqs, hooks);
    }();
    if (pending) std::rethrow_exception(pending);
    // Request errors (a prompt too long, a token id out of range) name the prompt; anything
    // else is the engine failing.
    if (!result) {
      if (result.message().rfind("prompt ", 0) == 0) throw py::value_error(result.message());
      throw std::runtime_error(result.message());
    }
    py::list out(result->size());
    for (size_t i = 0; i < result->size(); ++i) out[i] = request_output_to_py((*result)[i]);
    return out;
  }

  py::list encode(const std::string& text, bool add_special) const {
    return py::cast(get()->tokenize(text, add_special));
  }

  py::str decode(const std::vector<int32_t>& ids, bool skip_special) const {
    return text_to_py(get()->detokenize(ids, skip_special));
  }

  std::string apply_chat_template(const std::vector<std::pair<std::string, std::string>>& messages,
                                  bool add_generation_prompt,
                                  const std::optional<std::string>& chat_template) const {
    std::vector<ChatMessage> chat;
    for (const auto& [role, content] : messages) chat.push_back(ChatMessage{role, content});
    auto text = get()->apply_chat_template(chat, add_generation_prompt, chat_template);
    if (!text) throw py::value_error(text.message());
    return *text;
  }

  py::dict info() const {
    const LLM::Info i = get()->info();
    py::dict d;
    d["architecture"] = i.architecture;
    d["name"] = i.name;
    d["n_vocab"] = i.n_vocab;
    d["n_ctx"] = i.n_ctx;
    d["n_embd"] = i.n_embd;
    d["n_layer"] = i.n_layer;
    d["n_head"] = i.n_head;
    d["n_head_kv"] = i.n_head_kv;
    d["bos_token_id"] = i.bos_token_id >= 0 ? py::object(py::int_(i.bos_token_id)) : py::none();
    d["eos_token_id"] = i.eos_token_id >= 0 ? py::object(py::int_(i.eos_token_id)) : py::none();
    return d;
  }

 private:
  std::shared_ptr<LLM> get() const {
    std::shared_ptr<LLM> llm = llm_;
    if (!llm) throw py::value_error("this LLM is closed");
    return llm;
  }

  std::shared_ptr<LLM> llm_;
};

void check_sampling_params(const py::handle& params) {
  if (Status st = validate_sampling_params(sampling_params_from(params)); !st)
    throw py::value_error(st.message());
}

}  // namespace
}  // namespace vela::python

PYBIND11_MODULE(_vela, m) {
  namespace py = pybind11;
  using vela::python::Engine;
  m.doc() = "vela's C++ engine; use the `vela` package (vela.LLM, vela.SamplingParams).";
  m.def("check_sampling_params", &vela::python::check_sampling_params, py::arg("params"),
        "Raises ValueError (the server's message) if a SamplingParams value is out of range.");
  m.def("tensor_parallel_available", &vela::dist::available,
        "Whether this build has MPI (tensor_parallel_size or pipeline_parallel_size > 1).");
  m.def("check_tensor_parallel", &vela::python::check_tensor_parallel, py::arg("model"),
        py::arg("size"), py::arg("pipeline_size") = 1,
        "Raises ValueError if `pipeline_size` stages of `size` ranks each cannot split the "
        "model's layers, heads, FFN or experts.");
  m.def("join_tensor_parallel", &vela::python::join_tensor_parallel, py::arg("size"),
        py::arg("worker_program"), py::arg("pipeline_size") = 1,
        "Joins (or reuses) this process's group of `pipeline_size` stages of `size` ranks; "
        "returns this process's world rank. Without mpirun, spawns size * pipeline_size - 1 "
        "`worker_program tensor-parallel-worker` processes.");
  m.def("serve_tensor_parallel_worker", &vela::python::serve_tensor_parallel_worker,
        "On a world rank other than 0: serves rank 0's engines until it closes the group; "
        "returns the exit code.");
  m.def("leave_tensor_parallel", &vela::python::leave_tensor_parallel,
        "Shuts this process's parallel group down (its workers stop).");
  py::class_<Engine>(m, "Engine")
      .def(py::init([](const std::string& model, int32_t n_threads, int32_t max_context,
                       int32_t max_batch_tokens, int32_t max_num_seqs,
                       const std::string& kv_cache_type, int64_t kv_cache_bytes,
                       bool enable_prefix_caching, std::optional<uint64_t> seed,
                       const std::string& speculative_method, const std::string& draft_model,
                       int32_t num_speculative_tokens, int32_t prompt_lookup_min,
                       int32_t prompt_lookup_max, int32_t tensor_parallel_size,
                       int32_t pipeline_parallel_size, const std::string& moe_experts,
                       int64_t draft_vocab_size) {
             vela::LLMConfig c;
             c.model_path = model;
             c.n_threads = n_threads;
             c.max_context = max_context;
             c.max_batch_tokens = max_batch_tokens;
             c.max_num_seqs = max_num_seqs;
             c.kv_cache_type = kv_cache_type;
             c.kv_cache_bytes = kv_cache_bytes;
             c.enable_prefix_caching = enable_prefix_caching;
             c.seed = seed;
             c.speculative_method = speculative_method;
             c.draft_model_path = draft_model;
             c.num_speculative_tokens = num_speculative_tokens;
             c.prompt_lookup_min = prompt_lookup_min;
             c.prompt_lookup_max = prompt_lookup_max;
             c.tensor_parallel_size = tensor_parallel_size;
             c.pipeline_parallel_size = pipeline_parallel_size;
             c.moe_experts = moe_experts;
             c.speculative_draft_vocab = draft_vocab_size;
             return std::make_unique<Engine>(c);
           }),
           py::arg("model"), py::arg("n_threads") = 0, py::arg("max_context") = 0,
           py::arg("max_batch_tokens") = 512, py::arg("max_num_seqs") = 64,
           py::arg("kv_cache_type") = "f16", py::arg("kv_cache_bytes") = 0,
           py::arg("enable_prefix_caching") = true, py::arg("seed") = py::none(),
           py::arg("speculative_method") = "none", py::arg("draft_model") = "",
           py::arg("num_speculative_tokens") = 4, py::arg("prompt_lookup_min") = 1,
           py::arg("prompt_lookup_max") = 4, py::arg("tensor_parallel_size") = 1,
           py::arg("pipeline_parallel_size") = 1, py::arg("moe_experts") = "auto",
           py::arg("draft_vocab_size") = 0)
      .def("generate", &Engine::generate, py::arg("requests"), py::arg("on_delta") = py::none(),
           py::arg("on_step") = py::none())
      .def("encode", &Engine::encode, py::arg("text"), py::arg("add_special") = true)
      .def("decode", &Engine::decode, py::arg("ids"), py::arg("skip_special") = true)
      .def("apply_chat_template", &Engine::apply_chat_template, py::arg("messages"),
           py::arg("add_generation_prompt") = true, py::arg("chat_template") = py::none())
      .def("info", &Engine::info)
      .def("close", &Engine::close)
      .def_property_readonly("closed", &Engine::closed);
}
