"""speculative_config (vLLM's dict): n-gram, draft-model and MTP speculation give the greedy
output of plain decoding; bad configs raise TypeError/ValueError (or the engine's RuntimeError at load) naming the
problem."""

import pytest

from conftest import shared_model
from vela import LLM, SamplingParams

PROMPTS = ["one two three one two three one two", "Once upon a time"]


def greedy_texts(model="tiny-llama-256-F32.gguf", **kwargs):
    with LLM(model=shared_model(model), **kwargs) as llm:
        out = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=24, ignore_eos=True),
                           use_tqdm=False)
    return [o.outputs[0].token_ids for o in out]


def test_ngram_and_draft_keep_greedy_outputs():
    plain = greedy_texts()
    assert greedy_texts(speculative_config={"method": "ngram", "num_speculative_tokens": 3,
                                            "prompt_lookup_max": 3}) == plain
    assert greedy_texts(speculative_config={
        "model": shared_model("tiny-llama-256-Q4_0.gguf"), "num_speculative_tokens": 2}) == plain


def test_the_models_own_mtp_block_keeps_greedy_outputs():
    plain = greedy_texts("tiny-qwen35-F32.gguf")
    assert greedy_texts("tiny-qwen35-F32.gguf",
                        speculative_config={"method": "mtp", "num_speculative_tokens": 2}) == plain
    # vLLM's per-family name of the method.
    assert greedy_texts("tiny-qwen35-F32.gguf",
                        speculative_config={"method": "qwen3_next_mtp"}) == plain
    # Proposing among the first 64 token ids changes what is proposed, never the output.
    assert greedy_texts("tiny-qwen35-F32.gguf",
                        speculative_config={"method": "mtp", "num_speculative_tokens": 2,
                                            "draft_vocab_size": 64}) == plain
    with pytest.raises(RuntimeError, match="no multi-token-prediction layers"):
        LLM(model=shared_model("tiny-llama-256-F32.gguf"), speculative_config={"method": "mtp"})


def test_bad_speculative_configs():
    path = shared_model("tiny-llama-256-F32.gguf")
    with pytest.raises(TypeError, match="unknown key"):
        LLM(model=path, speculative_config={"method": "ngram", "lookahead": 3})
    with pytest.raises(RuntimeError, match="number of speculative tokens must be in"):
        LLM(model=path, speculative_config={"method": "ngram", "num_speculative_tokens": 0})
    with pytest.raises(RuntimeError, match="applies to the mtp method"):
        LLM(model=path, speculative_config={"method": "ngram", "draft_vocab_size": 64})
    with pytest.raises(ValueError, match="needs 'method'"):
        LLM(model=path, speculative_config={})
    with pytest.raises(RuntimeError, match="vocabulary"):
        LLM(model=path, speculative_config={"model": shared_model("tiny-qwen2-bpe-F16.gguf")})
