"""Bad arguments raise TypeError (unknown keyword, wrong type) or ValueError (bad value, with
the message the server gives); closing; tensor_parallel_size and pipeline_parallel_size below 1,
or above 1 in a build without MPI (test_tensor_parallel.py has the rest)."""

import pytest

from conftest import shared_model
from vela import LLM, SamplingParams, _vela

# The server's messages for the same values (Sampler::validate, shared by both).
SERVER_MESSAGES = [
    (dict(temperature=-1), "invalid sampling parameter temperature: must be finite and >= 0 (got -1)"),
    (dict(top_p=1.5), "invalid sampling parameter top_p: must be in (0, 1] (got 1.5)"),
    (dict(top_p=0), "invalid sampling parameter top_p: must be in (0, 1] (got 0)"),
    (dict(min_p=2), "invalid sampling parameter min_p: must be in [0, 1] (got 2)"),
    (dict(repetition_penalty=0), "invalid sampling parameter repetition_penalty: must be finite and > 0 (got 0)"),
    (dict(presence_penalty=3), "invalid sampling parameter presence_penalty: must be in [-2, 2] (got 3)"),
    (dict(frequency_penalty=-2.5), "invalid sampling parameter frequency_penalty: must be in [-2, 2] (got -2.5)"),
    (dict(max_tokens=-1), "invalid sampling parameter max_tokens: must be >= 0 (got -1)"),
    (dict(logprobs=21), "invalid sampling parameter logprobs: must be in [0, 20] (got 21)"),
    (dict(stop=[""]), "invalid sampling parameter stop: empty stop string"),
    (dict(stop_token_ids=[-3]), "invalid sampling parameter stop_token_ids: must be non-negative token ids (got -3)"),
    (dict(n=0), "invalid sampling parameter n: must be >= 1 (got 0)"),
    (dict(min_tokens=20, max_tokens=10), "invalid sampling parameter min_tokens: must be in [0, max_tokens = 10] (got 20)"),
]


@pytest.mark.parametrize("kwargs,message", SERVER_MESSAGES)
def test_bad_values_raise_value_error_with_the_servers_message(kwargs, message):
    with pytest.raises(ValueError) as e:
        SamplingParams(**kwargs)
    assert str(e.value) == message


def test_bad_keywords_and_types_raise_type_error():
    with pytest.raises(TypeError, match="temprature"):
        SamplingParams(temprature=0.5)
    with pytest.raises(TypeError, match="temperature must be a number"):
        SamplingParams(temperature="hot")
    with pytest.raises(TypeError, match="max_tokens must be an int"):
        SamplingParams(max_tokens=1.5)
    with pytest.raises(TypeError, match="stop must be"):
        SamplingParams(stop=[1])
    with pytest.raises(TypeError, match="ignore_eos must be a bool"):
        SamplingParams(ignore_eos=1)
    with pytest.raises(ValueError, match="prompt_logprobs=1 is not supported"):
        SamplingParams(prompt_logprobs=1)
    assert SamplingParams(best_of=2, n=2).n == 2
    assert SamplingParams(stop="x").stop == ["x"]


def test_generate_checks_its_arguments(aidreams):
    with pytest.raises(TypeError):
        aidreams.generate(42)
    with pytest.raises(TypeError):
        aidreams.generate([["not", "ids"]])
    with pytest.raises(TypeError, match="sampling_params"):
        aidreams.generate("hi", {"temperature": 0})
    with pytest.raises(TypeError):
        aidreams.generate("hi", SamplingParams(), use_tqdm=False, unknown=1)
    changed = SamplingParams(temperature=0)
    changed.top_p = 7.0  # changed after construction: checked again
    with pytest.raises(ValueError, match="top_p: must be in"):
        aidreams.generate("hi", changed, use_tqdm=False)
    with pytest.raises(ValueError, match="prompt 1: .*does not fit"):
        aidreams.generate(["hi", "once upon a time " * 100], SamplingParams(), use_tqdm=False)
    with pytest.raises(ValueError, match="prompt 0: prompt token id 9999 is out of range"):
        aidreams.generate([[1, 9999]], SamplingParams(), use_tqdm=False)
    # Nothing was queued: the engine still works.
    assert aidreams.generate("hi", SamplingParams(max_tokens=2), use_tqdm=False)


def test_llm_arguments():
    path = shared_model("aidreams260K.gguf")
    with pytest.raises(ValueError, match="tensor_parallel_size must be at least 1"):
        LLM(model=path, tensor_parallel_size=0)
    with pytest.raises(ValueError, match="pipeline_parallel_size must be at least 1"):
        LLM(model=path, pipeline_parallel_size=0)
    if not _vela.tensor_parallel_available():
        with pytest.raises(RuntimeError, match="tensor_parallel_size=2 needs MPI"):
            LLM(model=path, tensor_parallel_size=2)
        with pytest.raises(RuntimeError,
                           match="tensor_parallel_size=1, pipeline_parallel_size=2 needs MPI"):
            LLM(model=path, pipeline_parallel_size=2)
    with pytest.raises(TypeError):
        LLM(model=path, no_such_option=True)
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        LLM(model=path, kv_cache_dtype="fp8")
    with pytest.raises(ValueError, match="moe_experts 'mmap' is not one of"):
        LLM(model=path, moe_experts="mmap")
    with pytest.raises(ValueError, match="max_num_seqs"):
        LLM(model=path, max_num_seqs=0)
    with pytest.raises(FileNotFoundError):
        LLM(model=path + ".missing")
    with pytest.raises(ValueError, match="tokenizer"):
        LLM(model=path, tokenizer="gpt2")


def test_close_and_context_manager():
    path = shared_model("aidreams260K.gguf")
    with LLM(model=path, kv_cache_dtype="q8_0", max_num_seqs=4, max_model_len=128) as llm:
        assert llm.generate("hi", SamplingParams(max_tokens=2), use_tqdm=False)
    with pytest.raises(ValueError, match="closed"):
        llm.generate("hi", use_tqdm=False)
    llm.close()  # twice is fine
    other = LLM(model=path)
    del other  # frees the engine without error
