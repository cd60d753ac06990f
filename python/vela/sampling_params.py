"""SamplingParams: how to generate, with vLLM's names and defaults; StructuredOutputsParams:
constrained output, as vLLM's."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

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
    "truncate_prompt_tokens": None,
}

# StructuredOutputsParams fields of vLLM's that pick a backend or tune one; vela has one
# constraint engine, so only their neutral values are accepted.
_STRUCTURED_NEUTRAL = {
    "backend": None,
    "disable_fallback": False,
    "disable_additional_properties": False,
    "whitespace_pattern": None,
    "structural_tag": None,
}
_CONSTRAINTS = ("json", "regex", "choice", "grammar", "json_object")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _same_fields(a: Any, b: Any) -> bool:
    return all(getattr(a, s) == getattr(b, s) for s in a.__slots__)


class StructuredOutputsParams:
    """One constraint on the generated text, shaped like ``vllm.sampling_params.
    StructuredOutputsParams`` (also importable as ``GuidedDecodingParams``).

    Give exactly one of:
        json: a JSON Schema (a dict, or its JSON text); the output is JSON valid against it.
        regex: the whole output matches this regular expression.
        choice: the output is exactly one of these strings.
        grammar: a context-free grammar in GBNF (llama.cpp's syntax).
        json_object: ``True``: any JSON object.

    ``disable_any_whitespace``: JSON output is compact unless this is ``False``, which allows a
    few spaces, tabs and newlines between tokens (the server reads the same field). A schema,
    regex or grammar vela cannot compile makes ``generate`` raise ``ValueError`` naming the
    problem. ``backend``, ``disable_fallback``, ``disable_additional_properties``,
    ``whitespace_pattern`` and ``structural_tag`` are accepted only at their default value.
    """

    __slots__ = _CONSTRAINTS + ("disable_any_whitespace",) + tuple(_STRUCTURED_NEUTRAL)

    def __init__(
        self,
        *,
        json: Optional[Union[str, Dict[str, Any]]] = None,
        regex: Optional[str] = None,
        choice: Optional[List[str]] = None,
        grammar: Optional[str] = None,
        json_object: Optional[bool] = None,
        disable_any_whitespace: Optional[bool] = None,
        backend: Optional[str] = None,
        disable_fallback: bool = False,
        disable_additional_properties: bool = False,
        whitespace_pattern: Optional[str] = None,
        structural_tag: Optional[str] = None,
    ) -> None:
        self.json = json
        self.regex = regex
        self.choice = list(choice) if choice is not None else None
        self.grammar = grammar
        self.json_object = json_object
        self.disable_any_whitespace = disable_any_whitespace
        self.backend = backend
        self.disable_fallback = disable_fallback
        self.disable_additional_properties = disable_additional_properties
        self.whitespace_pattern = whitespace_pattern
        self.structural_tag = structural_tag
        self.verify()

    def verify(self) -> None:
        """Checks the fields' types and that exactly one constraint is given."""
        given = [name for name in _CONSTRAINTS
                 if getattr(self, name) is not None and getattr(self, name) is not False]
        if len(given) != 1:
            raise ValueError("StructuredOutputsParams: give exactly one of json, regex, choice, "
                             f"grammar, json_object (got {', '.join(given) or 'none'})")
        if self.json is not None and not isinstance(self.json, (str, dict, bool)):
            raise TypeError("StructuredOutputsParams: json must be a schema (dict) or its JSON text")
        for name in ("regex", "grammar"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"StructuredOutputsParams: {name} must be a string")
        if self.choice is not None and (not self.choice or not all(
                isinstance(c, str) for c in self.choice)):
            raise TypeError("StructuredOutputsParams: choice must be a non-empty list of strings")
        for name in ("json_object", "disable_any_whitespace"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise TypeError(f"StructuredOutputsParams: {name} must be a bool")
        for name, neutral in _STRUCTURED_NEUTRAL.items():
            value = getattr(self, name)
            if value != neutral:
                raise ValueError(f"StructuredOutputsParams: {name}={value!r} is not supported by vela")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StructuredOutputsParams):
            return NotImplemented
        return _same_fields(self, other)

    def __repr__(self) -> str:
        fields = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__
                           if getattr(self, s) is not None)
        return f"StructuredOutputsParams({fields})"


GuidedDecodingParams = StructuredOutputsParams


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
        logit_bias: ``{token_id: bias}``, biases in [-100, 100] added to the logits after the
            penalties (the reported logprobs stay those of the raw logits).
        structured_outputs: a ``StructuredOutputsParams``: the output matches its JSON Schema,
            regex, choice or grammar. ``guided_decoding`` (vLLM's older name) is the same.

    ``best_of``, ``prompt_logprobs``, ``include_stop_str_in_output``,
    ``spaces_between_special_tokens``, ``detokenize``, ``logits_processors``, ``bad_words``,
    ``allowed_token_ids`` and ``truncate_prompt_tokens`` are accepted only at their default
    value (``ValueError`` otherwise): vela does not implement them.
    """

    __slots__ = (
        "n", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
        "frequency_penalty", "repetition_penalty", "seed", "stop", "stop_token_ids",
        "ignore_eos", "max_tokens", "min_tokens", "logprobs", "skip_special_tokens",
        "logit_bias", "structured_outputs", "guided_decoding",
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
        logit_bias: Optional[Dict[int, float]] = None,
        truncate_prompt_tokens: Optional[int] = None,
        structured_outputs: Optional[StructuredOutputsParams] = None,
        guided_decoding: Optional[StructuredOutputsParams] = None,
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
        self.structured_outputs = structured_outputs
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
        if self.logit_bias is not None and (not isinstance(self.logit_bias, dict) or not all(
                _is_int(t) and not isinstance(b, bool) and isinstance(b, (int, float))
                for t, b in self.logit_bias.items())):
            raise TypeError("SamplingParams: logit_bias must be a dict of token id (int) to bias")
        for name in ("structured_outputs", "guided_decoding"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, StructuredOutputsParams):
                raise TypeError(f"SamplingParams: {name} must be a StructuredOutputsParams or None")
            if value is not None:
                value.verify()
        if self.structured_outputs is not None and self.guided_decoding is not None:
            raise ValueError("SamplingParams: give structured_outputs or guided_decoding, not both")
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
        return _same_fields(self, other)

    def __repr__(self) -> str:
        fields = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__[:18])
        return f"SamplingParams({fields})"
