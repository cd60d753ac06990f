"""Type stubs of vela._vela, the C++ extension under the vela package."""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

# (token, text, logprob, [(token, text, logprob), ...]) per generated token.
_StepLogprobs = Tuple[int, str, float, List[Tuple[int, str, float]]]

def check_sampling_params(params: Any) -> None:
    """Raises ValueError (the server's message) if a SamplingParams value is out of range."""

def tensor_parallel_available() -> bool:
    """Whether this build has MPI (tensor_parallel_size or pipeline_parallel_size > 1)."""

def check_tensor_parallel(model: str, size: int, pipeline_size: int = 1) -> None:
    """Raises ValueError if `pipeline_size` stages of `size` ranks each cannot split the
    model's layers, heads, FFN or experts."""

def join_tensor_parallel(size: int, worker_program: str, pipeline_size: int = 1) -> int:
    """Joins (or reuses) this process's group of `pipeline_size` stages of `size` ranks;
    returns this process's world rank. Without mpirun, spawns size * pipeline_size - 1
    `worker_program tensor-parallel-worker` processes."""

def serve_tensor_parallel_worker() -> int:
    """On a world rank other than 0: serves rank 0's engines until it closes the group;
    returns the exit code."""

def leave_tensor_parallel() -> None:
    """Shuts this process's parallel group down (its workers stop)."""

class Engine:
    def __init__(
        self,
        model: str,
        n_threads: int = 0,
        max_context: int = 0,
        max_batch_tokens: int = 512,
        max_num_seqs: int = 64,
        kv_cache_type: str = "f16",
        kv_cache_bytes: int = 0,
        enable_prefix_caching: bool = True,
        seed: Optional[int] = None,
        speculative_method: str = "none",
        draft_model: str = "",
        num_speculative_tokens: int = 4,
        prompt_lookup_min: int = 1,
        prompt_lookup_max: int = 4,
        tensor_parallel_size: int = 1,
        pipeline_parallel_size: int = 1,
        moe_experts: str = "auto",
        draft_vocab_size: int = 0,
    ) -> None: ...
    def generate(
        self,
        requests: List[Tuple[Union[str, List[int]], Any]],
        on_delta: Optional[Callable[[int, int, int, str, bool, str], Optional[bool]]] = None,
        on_step: Optional[Callable[[int, int], Optional[bool]]] = None,
    ) -> List[Dict[str, Any]]: ...
    def encode(self, text: str, add_special: bool = True) -> List[int]: ...
    def decode(self, ids: Sequence[int], skip_special: bool = True) -> str: ...
    def apply_chat_template(
        self,
        messages: List[Tuple[str, str]],
        add_generation_prompt: bool = True,
        chat_template: Optional[str] = None,
    ) -> str: ...
    def info(self) -> Dict[str, Any]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
