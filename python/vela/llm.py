"""LLM: vLLM's offline entry point, over vela's C++ engine."""

from __future__ import annotations

import atexit
import itertools
import os
import queue
import subprocess
import sys
import threading
import weakref
from typing import (Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union)

from . import _vela
from .outputs import CompletionOutput, Logprob, RequestOutput
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer, conversation_pairs

PromptType = Union[str, List[int], Dict[str, Any]]
Conversation = List[Dict[str, Any]]

_KV_TYPES = {"auto": "f16", "f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16",
             "bf16": "bf16", "bfloat16": "bf16", "q8_0": "q8_0", "f32": "f32",
             "fp32": "f32", "float32": "f32"}


_SPECULATIVE_KEYS = ("method", "model", "num_speculative_tokens", "prompt_lookup_min",
                     "prompt_lookup_max", "draft_vocab_size")


def _speculative_arguments(config: Optional[dict]) -> dict:
    """vLLM's speculative_config dict as the engine's keyword arguments (ranges are checked
    by the engine when it loads)."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise TypeError("LLM: speculative_config must be a dict or None")
    unknown = sorted(set(config) - set(_SPECULATIVE_KEYS))
    if unknown:
        raise TypeError(f"LLM: speculative_config: unknown key(s) {', '.join(unknown)} "
                        f"(known: {', '.join(_SPECULATIVE_KEYS)})")
    args: dict = {}
    if config.get("model") is not None:
        args["draft_model"] = os.fspath(config["model"])
    method = config.get("method")
    if method is not None:
        if not isinstance(method, str):
            raise TypeError("LLM: speculative_config['method'] must be a string")
        args["speculative_method"] = method
    elif "draft_model" not in args:
        raise ValueError("LLM: speculative_config needs 'method' (\"ngram\", \"mtp\") or "
                         "'model' (a draft model file)")
    for key in ("num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max",
                "draft_vocab_size"):
        if key in config:
            value = config[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"LLM: speculative_config['{key}'] must be an int")
            args[key] = value
    return args


def _positive_int(name: str, value: Any, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"LLM: {name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"LLM: {name} must be at least 1 (got {value})")


# Open MPI's, MPICH's and PMIx's per-rank variables: this process is a rank that mpirun
# started (the ones vela's C++ group looks for).
_MPIRUN_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK")

# The tensor- and pipeline-parallel LLMs of this process, closed at interpreter exit before the
# group is shut down (its workers then stop).
_parallel_llms: "weakref.WeakSet[LLM]" = weakref.WeakSet()
_exit_hook_registered = False


def _leave_tensor_parallel() -> None:
    for llm in list(_parallel_llms):
        llm.close()
    _vela.leave_tensor_parallel()


def _worker_binary() -> Optional[str]:
    """The vela CLI that spawned tensor-parallel workers run: $VELA_BINARY, else what
    ``python -m vela`` runs ($VELA_CLI, the one installed with the package, the build tree's,
    the first on PATH). Its real path: the MPI daemon that starts the workers resolves it
    itself."""
    explicit = os.environ.get("VELA_BINARY")
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise RuntimeError(f"LLM: VELA_BINARY={explicit!r} is not an executable file (it "
                               "names the vela binary that tensor-parallel workers run)")
        return os.path.realpath(explicit)
    from .__main__ import find_cli
    found = find_cli()
    return os.path.realpath(found) if found else None


_checked_binaries: set = set()


def _check_worker_binary(program: str) -> None:
    """Raises RuntimeError unless ``program tensor-parallel-worker`` is vela's worker command
    (started outside a group, it says so and exits): MPI would wait for ever for workers of
    another program to join."""
    if program in _checked_binaries:
        return
    try:
        r = subprocess.run([program, "tensor-parallel-worker"], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=60)
        said = (r.stdout + r.stderr).decode(errors="replace")
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"LLM: could not run the vela binary {program!r} for the "
                           f"tensor-parallel workers: {e}") from None
    if r.returncode == 0 or "vela: " not in said or "unknown command" in said:
        raise RuntimeError(f"LLM: {program!r} is not a vela binary with the tensor-parallel "
                           "worker command (set VELA_BINARY to the vela CLI built with this "
                           "module)")
    _checked_binaries.add(program)


def _parallel_options(size: int, pipeline: int) -> str:
    """The options as error messages name them: the pipeline size only when it is > 1."""
    text = f"tensor_parallel_size={size}"
    if pipeline > 1:
        text += f", pipeline_parallel_size={pipeline}"
    return text


def _join_tensor_parallel(model: str, size: int, pipeline: int) -> int:
    """Joins this process's group of ``pipeline`` stages of ``size`` ranks each (spawning the
    workers, or as one of mpirun's ranks); returns this process's world rank (0 runs the
    engine)."""
    global _exit_hook_registered
    options = _parallel_options(size, pipeline)
    if not _vela.tensor_parallel_available():
        raise RuntimeError(
            f"LLM: {options} needs MPI, and this vela module was built without it (install "
            "Open MPI's development files, e.g. Debian's libopenmpi-dev, and rebuild)")
    for name, value in (("tensor_parallel_size", size), ("pipeline_parallel_size", pipeline)):
        if value > 256:
            raise ValueError(f"LLM: {name} must be at most 256 (got {value})")
    ranks = size * pipeline
    if ranks > 256:
        raise ValueError("LLM: tensor_parallel_size * pipeline_parallel_size must be at most "
                         f"256 ranks (got {size} * {pipeline})")
    _vela.check_tensor_parallel(model, size, pipeline)  # before any process starts
    program = ""
    if not any(os.environ.get(name) for name in _MPIRUN_VARIABLES):
        program = _worker_binary() or ""
        if not program:
            raise RuntimeError(
                f"LLM: {options} spawns {ranks - 1} worker process(es) of the vela binary, "
                "which was not found: set VELA_BINARY to its path, or put vela on PATH")
        _check_worker_binary(program)
    rank = _vela.join_tensor_parallel(size, program, pipeline)
    if not _exit_hook_registered:
        atexit.register(_leave_tensor_parallel)
        _exit_hook_registered = True
    return rank


class LLM:
    """A GGUF model loaded into vela's continuous-batching engine, with vLLM's ``LLM`` API.

    Args:
        model: path of a GGUF file.
        tokenizer: must be ``None`` or the model path: the tokenizer is read from the file.
        tensor_parallel_size: T, the ranks each pipeline stage's layers are split over
            (tensor parallelism over MPI; with ``pipeline_parallel_size`` P the group is
            N = T * P ranks; N > 1 needs a build with MPI, else ``RuntimeError``). With
            N > 1 and no launcher, this process is rank 0 and spawns N - 1 worker processes
            of the vela binary on this host (``$VELA_BINARY``, else the one installed with the
            package or built beside it, else ``vela`` on ``PATH``); each rank holds its slice
            of its stage's heads, FFN or experts and runs ``num_threads`` threads (``None``:
            the physical cores over the N ranks). The output is one process's within the
            documented bounds: greedy tokens are the same on the shared test models, and
            logits agree to float rounding of the reordered sums (on a random-weight model's
            flat distributions a near-tie can flip a token after a few dozen). T must split
            the attention heads, the FFN width or the experts, and the KV heads (or be a
            multiple of them), else ``ValueError`` before any process starts. The group lasts
            until the interpreter exits: later LLMs with the same T and P reuse its
            processes, one at a time (a second open one is a ``RuntimeError``), and other
            sizes in the same process are a ``RuntimeError``. Under ``mpirun -np N python3
            script.py`` mpirun's N ranks are the group: on rank 0 ``LLM`` runs the engine; on
            every other rank it serves rank 0's passes until rank 0 exits, then ends the
            process (``SystemExit`` with the worker's exit code), so the code after
            ``LLM(...)`` runs on rank 0 only.
        pipeline_parallel_size: P, the pipeline stages (pipeline parallelism over MPI, in
            the group ``tensor_parallel_size`` describes): contiguous ranges of layers, the
            first stage also holding the embeddings, each stage's layers split over
            ``tensor_parallel_size`` ranks; a stage sends its hidden states to the next and
            the last the logits to rank 0, and large batches run as micro-batches in flight
            across the stages. Pipeline parallelism alone gives output identical to one
            process's (whole layers compute the same values); with T > 1 it is as
            ``tensor_parallel_size`` says. More stages than the model has layers is a
            ``ValueError`` before any process starts.
        max_model_len: longest prompt + output; ``None``: the model's, at most 4096.
        max_num_seqs: sequences decoded together at most.
        max_num_batched_tokens: tokens computed per engine step.
        kv_cache_dtype: ``"auto"`` (f16), ``"f16"``, ``"bf16"``, ``"q8_0"`` or ``"f32"``.
        enable_prefix_caching: reuse the KV cache of shared prompt prefixes.
        seed: seeds of the requests without ``SamplingParams.seed`` are drawn from it, so a
            script reruns the same; ``None``: random.
        num_threads: forward-pass threads; ``None``: the physical cores.
        kv_cache_memory_bytes: KV cache budget; ``None``: enough for ``max_num_seqs`` full
            contexts, at most a quarter of the available memory.
        speculative_config: speculative decoding, as vLLM's dict: ``{"method": "ngram",
            "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 4}`` or
            ``{"model": "draft.gguf", "num_speculative_tokens": 4}`` (a draft model with the
            same vocabulary) or ``{"method": "mtp", "num_speculative_tokens": 2,
            "draft_vocab_size": 32768}`` (the model's MTP block, proposing among the first
            32768 token ids); outputs are unchanged (greedy) or keep their distribution
            (sampled). ``None``: off.
        moe_experts: a mixture of experts' routed experts: ``"mapped"`` (left in the file
            mapping and paged in on use, so a model larger than memory runs), ``"repacked"``
            (into memory, faster) or ``"auto"``: mapped only when the model plus the KV cache
            would not fit in the available memory (cgroup limit, MemAvailable).
        dtype, trust_remote_code, enforce_eager, gpu_memory_utilization, disable_log_stats:
            vLLM options with no effect here (GGUF sets the weights' types; there is no
            remote code, graph capture or GPU); ``dtype`` must be ``"auto"``.

    Unknown keywords raise ``TypeError``. An ``LLM`` frees the model on ``close()``, on
    ``del`` and at the end of a ``with`` block.

    Thread-safety: methods may be called from several threads; generation calls run one at a
    time. The GIL is released while the engine runs, and Ctrl-C (``KeyboardInterrupt``) stops
    a running ``generate``/``chat`` within about 50 ms, leaving the ``LLM`` usable.
    """

    def __init__(
        self,
        model: str,
        tokenizer: Optional[str] = None,
        tensor_parallel_size: int = 1,
        max_model_len: Optional[int] = None,
        max_num_seqs: int = 64,
        max_num_batched_tokens: int = 512,
        kv_cache_dtype: str = "auto",
        enable_prefix_caching: bool = True,
        seed: Optional[int] = 0,
        *,
        num_threads: Optional[int] = None,
        kv_cache_memory_bytes: Optional[int] = None,
        speculative_config: Optional[dict] = None,
        dtype: str = "auto",
        trust_remote_code: bool = False,
        enforce_eager: bool = False,
        gpu_memory_utilization: Optional[float] = None,
        disable_log_stats: bool = True,
        pipeline_parallel_size: int = 1,
        moe_experts: str = "auto",
    ) -> None:
        self._engine: Optional[_vela.Engine] = None
        if not isinstance(model, (str, os.PathLike)):
            raise TypeError(f"LLM: model must be a path, got {type(model).__name__}")
        model = os.fspath(model)
        _positive_int("tensor_parallel_size", tensor_parallel_size)
        _positive_int("pipeline_parallel_size", pipeline_parallel_size)
        if tokenizer is not None and os.fspath(tokenizer) != model:
            raise ValueError("LLM: vela reads the tokenizer from the GGUF file; "
                             "a separate tokenizer is not supported")
        _positive_int("max_model_len", max_model_len, allow_none=True)
        _positive_int("max_num_seqs", max_num_seqs)
        _positive_int("max_num_batched_tokens", max_num_batched_tokens)
        _positive_int("num_threads", num_threads, allow_none=True)
        _positive_int("kv_cache_memory_bytes", kv_cache_memory_bytes, allow_none=True)
        if not isinstance(kv_cache_dtype, str):
            raise TypeError("LLM: kv_cache_dtype must be a string")
        if kv_cache_dtype.lower() not in _KV_TYPES:
            raise ValueError(f"LLM: kv_cache_dtype {kv_cache_dtype!r} is not one of "
                             "auto, f16, bf16, q8_0, f32")
        if moe_experts not in ("auto", "mapped", "repacked"):
            raise ValueError(f"LLM: moe_experts {moe_experts!r} is not one of "
                             "auto, mapped, repacked")
        if dtype != "auto":
            raise ValueError(f"LLM: dtype={dtype!r}: the GGUF file sets the weights' types; "
                             "use dtype='auto'")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError("LLM: seed must be an int or None")
        if not os.path.isfile(model):
            raise FileNotFoundError(f"LLM: model file not found: {model!r}")
        self.model = model
        spec = _speculative_arguments(speculative_config)
        parallel = tensor_parallel_size > 1 or pipeline_parallel_size > 1
        if parallel:
            if _join_tensor_parallel(model, tensor_parallel_size, pipeline_parallel_size) != 0:
                sys.stdout.flush()
                sys.stderr.flush()
                raise SystemExit(_vela.serve_tensor_parallel_worker())
        self._engine = _vela.Engine(
            model,
            n_threads=num_threads or 0,
            max_context=max_model_len or 0,
            max_batch_tokens=max_num_batched_tokens,
            max_num_seqs=max_num_seqs,
            kv_cache_type=_KV_TYPES[kv_cache_dtype.lower()],
            kv_cache_bytes=kv_cache_memory_bytes or 0,
            enable_prefix_caching=bool(enable_prefix_caching),
            seed=None if seed is None else seed % 2**64,
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
            moe_experts=moe_experts,
            **spec)
        if parallel:
            _parallel_llms.add(self)
        self._request_ids = itertools.count()

    # -- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        """Frees the model and its KV cache; a running generation finishes first."""
        engine = getattr(self, "_engine", None)  # absent when __init__ raised early
        if engine is not None:
            engine.close()

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def _live_engine(self) -> _vela.Engine:
        if self._engine is None or self._engine.closed:
            raise ValueError("this LLM is closed")
        return self._engine

    # -- generation -----------------------------------------------------------------------

    def get_tokenizer(self) -> Tokenizer:
        """The model's tokenizer (``encode``, ``decode``, ``apply_chat_template``)."""
        return Tokenizer(self._live_engine())

    def generate(
        self,
        prompts: Union[PromptType, Sequence[PromptType], None] = None,
        sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
        use_tqdm: Union[bool, Callable[..., Any]] = True,
        *,
        prompt_token_ids: Optional[List[List[int]]] = None,
    ) -> List[RequestOutput]:
        """Generates completions for every prompt, batched continuously; results come back in
        prompt order.

        ``prompts``: a string, a list of strings, a list of token-id lists, or vLLM's prompt
        dicts (``{"prompt": str}`` / ``{"prompt_token_ids": [int, ...]}``); or
        ``prompt_token_ids=`` (vLLM's older form). ``sampling_params``: one for all, or one per
        prompt; ``None`` means ``SamplingParams()``. ``use_tqdm``: a progress bar on stderr
        (when tqdm is installed), or a tqdm-like class to use instead.
        """
        items = self._prompts(prompts, prompt_token_ids)
        params = self._params(sampling_params, len(items))
        return self._run(items, params, use_tqdm)

    def chat(
        self,
        messages: Union[Conversation, Sequence[Conversation]],
        sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
        use_tqdm: Union[bool, Callable[..., Any]] = True,
        chat_template: Optional[str] = None,
        add_generation_prompt: bool = True,
    ) -> List[RequestOutput]:
        """Generates replies to one conversation (a list of ``{"role", "content"}`` dicts) or
        to a list of them, rendered by the model's chat template or by ``chat_template``
        (Jinja source). Each ``RequestOutput.prompt`` is the rendered text."""
        items = self._conversations(messages, chat_template, add_generation_prompt)
        params = self._params(sampling_params, len(items))
        return self._run(items, params, use_tqdm)

    def generate_stream(
        self,
        prompts: Union[PromptType, Sequence[PromptType]],
        sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
    ) -> Iterator[RequestOutput]:
        """Yields the generation as it happens: each item is a ``RequestOutput`` for one prompt
        holding one ``CompletionOutput`` with only the new text and token (vLLM's "delta"
        outputs); the pieces of a completion concatenate to its final text. The last piece of
        a completion has its ``finish_reason``; ``finished`` is true on the last piece of a
        prompt. Leaving the loop early (``break``, an exception, Ctrl-C) cancels the rest.
        """
        items = self._prompts(prompts, None)
        params = self._params(sampling_params, len(items))
        return self._stream(items, params)

    def chat_stream(
        self,
        messages: Union[Conversation, Sequence[Conversation]],
        sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
        chat_template: Optional[str] = None,
        add_generation_prompt: bool = True,
    ) -> Iterator[RequestOutput]:
        """``chat`` streamed the way ``generate_stream`` streams."""
        items = self._conversations(messages, chat_template, add_generation_prompt)
        params = self._params(sampling_params, len(items))
        return self._stream(items, params)

    # -- internals ------------------------------------------------------------------------

    @staticmethod
    def _prompts(prompts: Any, prompt_token_ids: Any) -> List[Tuple[Optional[str], Any]]:
        """(text shown in the output, what the engine gets) per prompt."""
        if prompts is None and prompt_token_ids is None:
            raise TypeError("generate: give prompts (or prompt_token_ids)")
        if prompts is not None and prompt_token_ids is not None:
            raise TypeError("generate: give prompts or prompt_token_ids, not both")
        if prompt_token_ids is not None:
            prompts = [{"prompt_token_ids": ids} for ids in prompt_token_ids]
        if isinstance(prompts, (str, dict)):
            prompts = [prompts]
        if not isinstance(prompts, (list, tuple)):
            raise TypeError("generate: prompts must be a string, a list of strings, a list of "
                            f"token-id lists or prompt dicts, got {type(prompts).__name__}")
        items: List[Tuple[Optional[str], Any]] = []
        for i, p in enumerate(prompts):
            if isinstance(p, dict):
                if "prompt_token_ids" in p:
                    p = list(p["prompt_token_ids"])
                elif "prompt" in p:
                    p = p["prompt"]
                else:
                    raise TypeError(f"generate: prompt {i}: a prompt dict needs 'prompt' or "
                                    "'prompt_token_ids'")
            if isinstance(p, str):
                items.append((p, p))
            elif isinstance(p, (list, tuple)) and all(
                    isinstance(t, int) and not isinstance(t, bool) for t in p):
                ids = list(p)
                if any(t < 0 or t > 2**31 - 1 for t in ids):
                    raise ValueError(f"prompt {i}: token ids must be non-negative")
                items.append((None, ids))
            else:
                raise TypeError(f"generate: prompt {i} must be a string or a list of token ids, "
                                f"got {type(p).__name__}")
        return items

    @staticmethod
    def _params(sampling_params: Any, n_prompts: int) -> List[SamplingParams]:
        if sampling_params is None:
            sampling_params = SamplingParams()
        if isinstance(sampling_params, SamplingParams):
            sampling_params.verify()
            return [sampling_params] * n_prompts
        if not isinstance(sampling_params, (list, tuple)) or not all(
                isinstance(p, SamplingParams) for p in sampling_params):
            raise TypeError("sampling_params must be a SamplingParams or a list of them")
        if len(sampling_params) != n_prompts:
            raise ValueError("The lengths of prompts and sampling_params must be the same "
                             f"({n_prompts} prompts, {len(sampling_params)} sampling_params)")
        for p in sampling_params:
            p.verify()
        return list(sampling_params)

    def _conversations(self, messages: Any, chat_template: Optional[str],
                       add_generation_prompt: bool) -> List[Tuple[Optional[str], Any]]:
        if not isinstance(messages, (list, tuple)) or not messages:
            raise TypeError("chat: messages must be a conversation (a list of message dicts) "
                            "or a list of conversations")
        conversations = [messages] if isinstance(messages[0], dict) else list(messages)
        engine = self._live_engine()
        items: List[Tuple[Optional[str], Any]] = []
        for conversation in conversations:
            text = engine.apply_chat_template(conversation_pairs(conversation),
                                              add_generation_prompt, chat_template)
            # The template writes any BOS itself (as vLLM and the server tokenize chat).
            items.append((text, engine.encode(text, False)))
        return items

    def _next_request_id(self) -> str:
        return str(next(self._request_ids))

    def _run(self, items: List[Tuple[Optional[str], Any]], params: List[SamplingParams],
             use_tqdm: Union[bool, Callable[..., Any]]) -> List[RequestOutput]:
        engine = self._live_engine()
        bar = _progress_bar(use_tqdm, len(items))
        on_step = None
        if bar is not None:
            def on_step(finished: int, total: int) -> bool:
                bar.update(finished - bar.n)
                return True
        try:
            raw = engine.generate([(prompt, p) for (_, prompt), p in zip(items, params)],
                                  None, on_step)
        finally:
            if bar is not None:
                bar.close()
        return [_request_output(self._next_request_id(), text, r, p)
                for (text, _), r, p in zip(items, raw, params)]

    def _stream(self, items: List[Tuple[Optional[str], Any]],
                params: List[SamplingParams]) -> Iterator[RequestOutput]:
        for p in params:
            if not p.skip_special_tokens:
                raise ValueError("streaming: skip_special_tokens=False is not supported "
                                 "(streamed pieces never show control tokens)")
        engine = self._live_engine()
        ids = [self._next_request_id() for _ in items]
        pieces: "queue.Queue[Tuple[str, Any]]" = queue.Queue()
        cancel = threading.Event()

        def on_delta(i: int, j: int, token: int, text: str, finished: bool,
                     reason: str) -> bool:
            pieces.put(("piece", (i, j, token, text, finished, reason)))
            return not cancel.is_set()

        def run() -> None:
            try:
                raw = engine.generate([(prompt, p) for (_, prompt), p in zip(items, params)],
                                      on_delta, lambda done, total: not cancel.is_set())
                pieces.put(("done", raw))
            except BaseException as e:  # re-raised in the consumer's thread
                pieces.put(("error", e))

        worker = threading.Thread(target=run, name="vela-generate", daemon=True)
        prompt_ids = [engine.encode(prompt, True) if isinstance(prompt, str) else prompt
                      for _, prompt in items]
        return _stream_pieces(pieces, cancel, worker, items, prompt_ids, ids, params)


def _stream_pieces(pieces: "queue.Queue[Tuple[str, Any]]", cancel: threading.Event,
                   worker: threading.Thread, items: List[Tuple[Optional[str], Any]],
                   prompt_ids: List[List[int]], ids: List[str],
                   params: List[SamplingParams]) -> Iterator[RequestOutput]:
    worker.start()
    left = [p.n for p in params]
    try:
        while True:
            kind, value = pieces.get()
            if kind == "error":
                raise value
            if kind == "done":
                return
            i, j, token, text, finished, reason = value
            if finished:
                left[i] -= 1
            out = CompletionOutput(index=j, text=text, token_ids=[token] if token >= 0 else [],
                                   finish_reason=reason if finished else None)
            yield RequestOutput(request_id=ids[i], prompt=items[i][0],
                                prompt_token_ids=prompt_ids[i], outputs=[out],
                                finished=left[i] == 0)
    finally:
        cancel.set()
        worker.join()


def _progress_bar(use_tqdm: Union[bool, Callable[..., Any]], total: int) -> Any:
    if use_tqdm is False or use_tqdm is None:
        return None
    if callable(use_tqdm) and use_tqdm is not True:
        return use_tqdm(total=total, desc="Processed prompts", dynamic_ncols=True)
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="Processed prompts", dynamic_ncols=True)


def _request_output(request_id: str, prompt: Optional[str], raw: Dict[str, Any],
                    params: SamplingParams) -> RequestOutput:
    outputs = []
    for o in raw["outputs"]:
        stop_reason: Union[int, str, None] = o["stop_reason"]
        token_ids = o["token_ids"]
        if (stop_reason is None and o["finish_reason"] == "stop" and token_ids
                and token_ids[-1] in params.stop_token_ids):
            stop_reason = token_ids[-1]
        logprobs = None
        if o["logprobs"] is not None:
            logprobs = [_step_logprobs(step) for step in o["logprobs"]]
        outputs.append(CompletionOutput(
            index=o["index"], text=o["text"], token_ids=token_ids,
            cumulative_logprob=o["cumulative_logprob"], logprobs=logprobs,
            finish_reason=o["finish_reason"], stop_reason=stop_reason))
    return RequestOutput(request_id=request_id, prompt=prompt,
                         prompt_token_ids=raw["prompt_token_ids"], outputs=outputs,
                         finished=True)


def _step_logprobs(step: Tuple[int, str, float, List[Tuple[int, str, float]]]
                   ) -> Dict[int, Logprob]:
    """vLLM's per-token dict: the chosen token and the alternatives, most likely first."""
    token, text, logprob, top = step
    ranks = {t: rank for rank, (t, _, _) in enumerate(top, start=1)}
    entry = {token: Logprob(logprob=logprob, rank=ranks.get(token), decoded_token=text)}
    for rank, (t, t_text, t_logprob) in enumerate(top, start=1):
        if t not in entry:
            entry[t] = Logprob(logprob=t_logprob, rank=rank, decoded_token=t_text)
    return entry
