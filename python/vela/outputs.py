"""Generation results, shaped like vLLM's RequestOutput / CompletionOutput / Logprob."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union


@dataclass
class Logprob:
    """One token's log-probability (of the raw logits, as vLLM's default).

    ``rank`` is the 1-based rank among the reported alternatives; ``None`` for a chosen token
    outside them.
    """

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


@dataclass
class CompletionOutput:
    """One completion of a prompt.

    ``finish_reason`` is ``"stop"`` (an end token, a stop token or a stop string),
    ``"length"`` (max_tokens or the context) or ``"abort"`` (cancelled); ``None`` while a
    streamed completion runs. ``stop_reason`` is the stop string that matched, the stop token
    id that ended it, or ``None`` (the model's end token, or not stopped).
    ``cumulative_logprob`` and ``logprobs`` are set when ``SamplingParams.logprobs`` is.
    In a streamed piece ``text`` and ``token_ids`` hold only what is new.
    """

    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float] = None
    logprobs: Optional[List[Dict[int, Logprob]]] = None
    finish_reason: Optional[str] = None
    stop_reason: Union[int, str, None] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """A prompt's result: its text (``None`` when given as token ids; the rendered template
    for chat), its token ids and its ``n`` completions in ``outputs``."""

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput] = field(default_factory=list)
    finished: bool = True
    prompt_logprobs: None = None
