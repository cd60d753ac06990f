"""SamplingParams: how to generate, with vLLM's names and defaults."""

from __future__ import annotations

from typing import Any, List, Optional, Union

from . import _vela

_INT32_MAX = 2**31 - 1

# vLLM options vela does not implement: accepted at their neutral value only, so a script that
# sets one gets a clear error instead of silently different output.
_NEUTRAL = {
    "best_of": None,
    "prompt_logprobs": None,
    "include_stop_str_in_output": False,
    "spaces_between_special_tokens": True,
    "detokenize": True,
    "logits_processors": None,
    "bad_words": None,
    "allowed_token_ids": None,
    "logit_bias": None,
    "truncate_prompt_tokens": None,
    "guided_decoding": None,
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class SamplingParams:
    """Parameters of text generation for one prompt, shaped like ``vllm.SamplingParams``.

    Every argument is keyword-only except ``n``. An unknown keyword raises ``TypeError``, a
    value of the wrong type ``TypeError``, and a value out of range ``ValueError`` with the
    message ``vela serve`` gives for the same value (one C++ check backs both).

    Args:
        n: completions per prompt; completion ``j > 0`` of a seeded prompt uses ``seed + j``.
        temperature: 0 means greedy (argmax); the truncation filters are then ignored.
        top_p: nucleus sampling mass in (0, 1]; 1 disables it.
        top_k: keep the k most likely tokens; 0 or -1 disables it.
        min_p: drop tokens below ``min_p`` times the top probability; 0 disables it.
        presence_penalty, frequency_penalty: in [-2, 2], over the generated tokens.
        repetition_penalty: > 0; over the prompt and the generated tokens; 1 disables it.
        seed: the same seed gives the same output; ``None`` follows ``LLM(seed=...)``.
        stop: a string or strings that end generation; the match is not in the text.
        stop_token_ids: token ids that end generation (besides the model's end tokens).
        ignore_eos: keep generating past the model's end-of-generation tokens.
        max_tokens: generated tokens at most; ``None`` means up to the context length.
        min_tokens: end-of-generation and ``stop_token_ids`` tokens cannot be drawn before this
            many tokens were generated (stop strings still apply).
        logprobs: report each generated token's logprob and this many most likely
            alternatives (0: only the chosen token's).
        skip_special_tokens: ``False`` shows control tokens' text in the final text (not in
            streamed pieces).

    ``best_of``, ``prompt_logprobs``, ``include_stop_str_in_output``,
    ``spaces_between_special_tokens``, ``detokenize``, ``logits_processors``, ``bad_words``,
    ``allowed_token_ids``, ``logit_bias``, ``truncate_prompt_tokens`` and ``guided_decoding``
    are accepted only at their default value (``ValueError`` otherwise): vela does not
    implement them.
    """

    __slots__ = (
        "n", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
        "frequency_penalty", "repetition_penalty", "seed", "stop", "stop_token_ids",
        "ignore_eos", "max_tokens", "min_tokens", "logprobs", "skip_special_tokens",
    ) + tuple(_NEUTRAL)

    def __init__(
        self,
        n: int = 1,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        min_p: float = 0.0,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repetition_penalty: float = 1.0,
        seed: Optional[int] = None,
        stop: Optional[Union[str, List[str]]] = None,
        stop_token_ids: Optional[List[int]] = None,
        ignore_eos: bool = False,
        max_tokens: Optional[int] = 16,
        min_tokens: int = 0,
        logprobs: Optional[int] = None,
        skip_special_tokens: bool = True,
        best_of: Optional[int] = None,
        prompt_logprobs: Optional[int] = None,
        include_stop_str_in_output: bool = False,
        spaces_between_special_tokens: bool = True,
        detokenize: bool = True,
        logits_processors: Any = None,
        bad_words: Optional[List[str]] = None,
        allowed_token_ids: Optional[List[int]] = None,
        logit_bias: Any = None,
        truncate_prompt_tokens: Optional[int] = None,
        guided_decoding: Any = None,
    ) -> None:
        self.n = n
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.min_p = min_p
        self.presence_penalty = presence_penalty
        self.frequency_penalty = frequency_penalty
        self.repetition_penalty = repetition_penalty
        self.seed = seed
        self.stop = [stop] if isinstance(stop, str) else (list(stop) if stop is not None else [])
        self.stop_token_ids = list(stop_token_ids) if stop_token_ids is not None else []
        self.ignore_eos = ignore_eos
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self.logprobs = logprobs
        self.skip_special_tokens = skip_special_tokens
        self.best_of = best_of
        self.prompt_logprobs = prompt_logprobs
        self.include_stop_str_in_output = include_stop_str_in_output
        self.spaces_between_special_tokens = spaces_between_special_tokens
        self.detokenize = detokenize
        self.logits_processors = logits_processors
        self.bad_words = bad_words
        self.allowed_token_ids = allowed_token_ids
        self.logit_bias = logit_bias
        self.truncate_prompt_tokens = truncate_prompt_tokens
        self.guided_decoding = guided_decoding
        self.verify()

    def verify(self) -> None:
        """Checks every field (types here, ranges in C++); generate() calls it again, so
        fields changed after construction are checked too."""
        for name in ("temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty",
                     "repetition_penalty"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"SamplingParams: {name} must be a number, "
                                f"got {type(value).__name__}")
        for name, optional in (("n", False), ("top_k", False), ("max_tokens", True),
                               ("min_tokens", False), ("logprobs", True)):
            value = getattr(self, name)
            if value is None and optional:
                continue
            if not _is_int(value):
                raise TypeError(f"SamplingParams: {name} must be an int"
                                f"{' or None' if optional else ''}, got {type(value).__name__}")
            if not -_INT32_MAX - 1 <= value <= _INT32_MAX:
                raise ValueError(f"invalid sampling parameter {name}: out of range (got {value})")
        if self.seed is not None and not _is_int(self.seed):
            raise TypeError(f"SamplingParams: seed must be an int or None, "
                            f"got {type(self.seed).__name__}")
        if not isinstance(self.stop, list) or not all(isinstance(s, str) for s in self.stop):
            raise TypeError("SamplingParams: stop must be a string or a list of strings")
        if not isinstance(self.stop_token_ids, list) or not all(
                _is_int(t) and t <= _INT32_MAX for t in self.stop_token_ids):
            raise TypeError("SamplingParams: stop_token_ids must be a list of token ids (int)")
        for name in ("ignore_eos", "skip_special_tokens"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"SamplingParams: {name} must be a bool")
        for name, neutral in _NEUTRAL.items():
            value = getattr(self, name)
            if name == "best_of" and value == self.n:
                continue  # best_of equal to n is the same as not asking (as the server says)
            if value != neutral:
                raise ValueError(f"SamplingParams: {name}={value!r} is not supported by vela")
        _vela.check_sampling_params(self)

    def clone(self) -> "SamplingParams":
        """A copy (as vLLM's ``clone``)."""
        return SamplingParams(**{name: getattr(self, name) for name in self.__slots__})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SamplingParams):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __repr__(self) -> str:
        fields = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__[:16])
        return f"SamplingParams({fields})"
