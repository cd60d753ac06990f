"""Tokenizer: the model's tokenizer and chat template, in the shape of a Hugging Face
tokenizer (what vLLM's ``LLM.get_tokenizer()`` returns)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _vela


def conversation_pairs(conversation: Sequence[Dict[str, Any]]) -> List[Tuple[str, str]]:
    """(role, content) per message. Content is a string, ``None`` (an assistant message with
    no text), or a list of ``{"type": "text", "text": ...}`` parts joined with newlines (as
    vLLM and the server do)."""
    pairs = []
    for i, message in enumerate(conversation):
        if not isinstance(message, dict):
            raise TypeError(f"chat: message {i} must be a dict with 'role' and 'content'")
        role = message.get("role")
        if not isinstance(role, str):
            raise TypeError(f"chat: message {i}: 'role' must be a string")
        content = message.get("content")
        if content is None:
            content = ""
        elif isinstance(content, list):
            texts = []
            for part in content:
                if not (isinstance(part, dict) and part.get("type") == "text"
                        and isinstance(part.get("text"), str)):
                    raise ValueError(f"chat: message {i}: only text parts "
                                     "({'type': 'text', 'text': ...}) are supported")
                texts.append(part["text"])
            content = "\n".join(texts)
        elif not isinstance(content, str):
            raise TypeError(f"chat: message {i}: 'content' must be a string or a list of "
                            "text parts")
        pairs.append((role, content))
    return pairs


class Tokenizer:
    """The tokenizer of an ``LLM``'s GGUF file. Safe to use from several threads."""

    def __init__(self, engine: "_vela.Engine") -> None:
        self._engine = engine
        info = engine.info()
        self.vocab_size: int = info["n_vocab"]
        self.bos_token_id: Optional[int] = info["bos_token_id"]
        self.eos_token_id: Optional[int] = info["eos_token_id"]

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Token ids of ``text``; ``add_special_tokens`` adds BOS per the model's rule.
        Special-token texts in ``text`` (e.g. ``<|im_start|>``) become those tokens."""
        if not isinstance(text, str):
            raise TypeError("encode: text must be a string")
        return self._engine.encode(text, bool(add_special_tokens))

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The text of ``token_ids``; control tokens are left out unless
        ``skip_special_tokens`` is false."""
        ids = list(token_ids)
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
            raise TypeError("decode: token_ids must be ints")
        return self._engine.decode(ids, bool(skip_special_tokens))

    def apply_chat_template(
        self,
        conversation: Sequence[Dict[str, Any]],
        chat_template: Optional[str] = None,
        add_generation_prompt: bool = False,
        tokenize: bool = True,
        **kwargs: Any,
    ) -> Union[str, List[int]]:
        """Renders a conversation with the model's chat template (or ``chat_template``), as
        Hugging Face's method does: token ids by default, the text with ``tokenize=False``.
        The text holds any BOS the template writes, so its tokens add none."""
        if kwargs:
            raise TypeError(f"apply_chat_template: unsupported arguments {sorted(kwargs)}")
        text = self._engine.apply_chat_template(conversation_pairs(conversation),
                                                bool(add_generation_prompt), chat_template)
        return self._engine.encode(text, False) if tokenize else text
