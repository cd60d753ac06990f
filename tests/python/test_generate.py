"""llm.generate equals the C++ engine's output (the vela CLI over the C++ API) for greedy,
seeded sampling, stop strings and logprobs; batches come back in prompt order; the vLLM input
forms, per-prompt parameters, n, min_tokens and skip_special_tokens."""

import re

import pytest

from conftest import run_cli_generate, shared_model
from vela import LLM, RequestOutput, SamplingParams

PROMPTS = ["Once upon a time", "The little robot", "In the forest there was", "She said"]


def cli_flags(max_tokens, temperature=0.0, seed=None, stop=(), logprobs=None):
    # The CLI's defaults differ from SamplingParams' (top-k 40, top-p 0.95, min-p 0.05): pin
    # them to vLLM's.
    flags = ["-n", str(max_tokens), "--temp", str(temperature), "--top-k", "0", "--top-p", "1",
             "--min-p", "0"]
    if seed is not None:
        flags += ["--seed", str(seed)]
    for s in stop:
        flags += ["--stop", s]
    if logprobs is not None:
        flags += ["--logprobs", str(logprobs)]
    return flags


@pytest.mark.parametrize("model", ["aidreams260K.gguf", "tiny-llama-gqa.gguf",
                                   "tiny-qwen2-bpe-F16.gguf"])
def test_greedy_equals_cli(model):
    path = shared_model(model)
    with LLM(model=path) as llm:
        out = llm.generate(PROMPTS[:2], SamplingParams(temperature=0, max_tokens=24),
                           use_tqdm=False)
    for prompt, result in zip(PROMPTS[:2], out):
        text, _ = run_cli_generate(path, prompt, *cli_flags(24))
        assert result.prompt == prompt
        assert result.outputs[0].text == text
        assert len(result.outputs[0].token_ids) <= 24


def test_seeded_sampling_equals_cli(aidreams):
    path = aidreams.model
    params = SamplingParams(temperature=0.9, max_tokens=32, seed=1234)
    out = aidreams.generate(PROMPTS[0], params, use_tqdm=False)
    text, _ = run_cli_generate(path, PROMPTS[0], *cli_flags(32, 0.9, seed=1234))
    assert out[0].outputs[0].text == text
    again = aidreams.generate(PROMPTS[0], params, use_tqdm=False)
    assert again[0].outputs[0].token_ids == out[0].outputs[0].token_ids
    other = aidreams.generate(PROMPTS[0], params.clone(), use_tqdm=False)
    assert other[0].outputs[0].text == text


def test_stop_string_equals_cli(aidreams):
    full = aidreams.generate(PROMPTS[0], SamplingParams(temperature=0, max_tokens=48),
                             use_tqdm=False)[0].outputs[0].text
    assert len(full) > 20
    stop = full[10:15]
    out = aidreams.generate(PROMPTS[0], SamplingParams(temperature=0, max_tokens=48, stop=stop),
                            use_tqdm=False)[0].outputs[0]
    text, _ = run_cli_generate(aidreams.model, PROMPTS[0], *cli_flags(48, stop=[stop]))
    assert out.text == text == full[:full.index(stop)]
    assert out.finish_reason == "stop"
    assert out.stop_reason == stop


def test_logprobs_equal_cli(aidreams):
    params = SamplingParams(temperature=0, max_tokens=12, logprobs=3)
    out = aidreams.generate(PROMPTS[1], params, use_tqdm=False)[0].outputs[0]
    _, stderr = run_cli_generate(aidreams.model, PROMPTS[1], *cli_flags(12, logprobs=3))
    rows = [line for line in stderr if line.startswith("[token ")]
    assert len(rows) == len(out.token_ids) == len(out.logprobs)
    total = 0.0
    for token, step, row in zip(out.token_ids, out.logprobs, rows):
        numbers = re.findall(r"-?\d+(?:\.\d+)?", row)
        assert int(numbers[0]) == token
        assert step[token].logprob == pytest.approx(float(numbers[1]), abs=1e-4)
        alternatives = sorted(((lp.rank, t, lp.logprob) for t, lp in step.items()
                               if lp.rank is not None))
        assert len(alternatives) == 3
        for (rank, t, lp), i in zip(alternatives, range(3)):
            assert rank == i + 1
            assert t == int(numbers[2 + 2 * i])
            assert lp == pytest.approx(float(numbers[3 + 2 * i]), abs=1e-4)
        total += step[token].logprob
    assert out.cumulative_logprob == pytest.approx(total, abs=1e-6)
    plain = aidreams.generate(PROMPTS[1], SamplingParams(temperature=0, max_tokens=4),
                              use_tqdm=False)[0].outputs[0]
    assert plain.logprobs is None and plain.cumulative_logprob is None


def test_batch_in_prompt_order_equals_one_at_a_time(aidreams):
    params = SamplingParams(temperature=0, max_tokens=20)
    batch = aidreams.generate(PROMPTS, params, use_tqdm=False)
    assert [r.prompt for r in batch] == PROMPTS
    assert len({r.request_id for r in batch}) == len(PROMPTS)
    for prompt, result in zip(PROMPTS, batch):
        alone = aidreams.generate([prompt], params, use_tqdm=False)[0]
        assert isinstance(result, RequestOutput)
        assert result.outputs[0].token_ids == alone.outputs[0].token_ids
        assert result.outputs[0].text == alone.outputs[0].text
        assert result.prompt_token_ids == aidreams.get_tokenizer().encode(prompt)


def test_prompt_forms_and_per_prompt_params(aidreams):
    tok = aidreams.get_tokenizer()
    ids = tok.encode(PROMPTS[0])
    greedy = SamplingParams(temperature=0, max_tokens=10)
    by_text = aidreams.generate(PROMPTS[0], greedy, use_tqdm=False)[0]
    for form in ([ids], [{"prompt_token_ids": ids}], [{"prompt": PROMPTS[0]}]):
        r = aidreams.generate(form, greedy, use_tqdm=False)[0]
        assert r.outputs[0].token_ids == by_text.outputs[0].token_ids
    r = aidreams.generate(prompt_token_ids=[ids], sampling_params=greedy, use_tqdm=False)[0]
    assert r.prompt is None and r.prompt_token_ids == ids
    assert r.outputs[0].text == by_text.outputs[0].text

    short = SamplingParams(temperature=0, max_tokens=3)
    mixed = aidreams.generate(PROMPTS[:2], [short, greedy], use_tqdm=False)
    assert len(mixed[0].outputs[0].token_ids) == 3
    assert mixed[0].outputs[0].finish_reason == "length"
    assert mixed[0].outputs[0].token_ids == by_text.outputs[0].token_ids[:3]
    with pytest.raises(ValueError, match="lengths of prompts and sampling_params"):
        aidreams.generate(PROMPTS[:2], [short], use_tqdm=False)


def test_n_completions(aidreams):
    params = SamplingParams(n=3, temperature=1.0, max_tokens=16, seed=7)
    out = aidreams.generate(PROMPTS[:2], params, use_tqdm=False)
    for r in out:
        assert [c.index for c in r.outputs] == [0, 1, 2]
        assert len({tuple(c.token_ids) for c in r.outputs}) > 1
    # Completion j of a seeded prompt is that prompt with seed + j.
    one = aidreams.generate(PROMPTS[0], SamplingParams(temperature=1.0, max_tokens=16, seed=9),
                            use_tqdm=False)[0]
    assert out[0].outputs[2].token_ids == one.outputs[0].token_ids


def test_llm_seed_makes_unseeded_runs_repeat():
    path = shared_model("aidreams260K.gguf")
    params = SamplingParams(temperature=1.0, max_tokens=24)
    runs = []
    for _ in range(2):
        with LLM(model=path, seed=5) as llm:
            runs.append([r.outputs[0].token_ids for r in llm.generate(PROMPTS, params,
                                                                       use_tqdm=False)])
    assert runs[0] == runs[1]


def early_end(llm, limit):
    """A seed whose hot sampling ends with the model's end token before `limit` tokens."""
    for seed in range(50):
        params = SamplingParams(temperature=3.0, max_tokens=limit, seed=seed)
        out = llm.generate("hi", params, use_tqdm=False)[0].outputs[0]
        if out.finish_reason == "stop" and len(out.token_ids) < limit - 10:
            return seed, out
    pytest.fail("no seed in 50 ended early")


def test_min_tokens(synth_model):
    with LLM(model=synth_model, max_model_len=256) as llm:
        eos = llm.get_tokenizer().eos_token_id
        seed, free = early_end(llm, 120)
        assert free.token_ids[-1] == eos and free.stop_reason is None
        n = len(free.token_ids)
        held = llm.generate("hi", SamplingParams(temperature=3.0, max_tokens=120, seed=seed,
                                                 min_tokens=n + 8), use_tqdm=False)[0].outputs[0]
        # (Masking the end token changes the distribution, so the draws differ from `free`.)
        assert len(held.token_ids) >= n + 8
        assert eos not in held.token_ids[:n + 7]
        # max_tokens=None: up to the context.
        long = llm.generate("hi", SamplingParams(temperature=0, max_tokens=None,
                                                 ignore_eos=True), use_tqdm=False)[0]
        assert len(long.prompt_token_ids) + len(long.outputs[0].token_ids) == 256
        assert long.outputs[0].finish_reason == "length"


def test_stop_token_ids(aidreams):
    # A stop token id from the greedy text ends it there, and is reported as the reason.
    greedy = aidreams.generate(PROMPTS[0], SamplingParams(temperature=0, max_tokens=20),
                               use_tqdm=False)[0].outputs[0]
    stop_id = greedy.token_ids[5]
    first = greedy.token_ids.index(stop_id)
    r = aidreams.generate(PROMPTS[0], SamplingParams(temperature=0, max_tokens=20,
                                                     stop_token_ids=[stop_id]),
                          use_tqdm=False)[0].outputs[0]
    assert r.token_ids == greedy.token_ids[:first + 1]
    assert r.finish_reason == "stop" and r.stop_reason == stop_id
    held = aidreams.generate(PROMPTS[0], SamplingParams(temperature=0, max_tokens=20,
                                                        stop_token_ids=[stop_id],
                                                        min_tokens=first + 2),
                             use_tqdm=False)[0].outputs[0]
    assert stop_id not in held.token_ids[:first + 2]


def test_skip_special_tokens_false_shows_control_tokens(synth_model):
    with LLM(model=synth_model, max_model_len=256) as llm:
        tok = llm.get_tokenizer()
        eos = tok.eos_token_id
        eos_text = tok.decode([eos], skip_special_tokens=False)
        assert eos_text == "</s>" and tok.decode([eos]) == ""
        # Past the end token (ignore_eos) it sits inside the output, where only
        # skip_special_tokens=False shows it.
        seed, free = early_end(llm, 120)
        past = SamplingParams(temperature=3.0, max_tokens=len(free.token_ids) + 10, seed=seed,
                              ignore_eos=True)
        hidden = llm.generate("hi", past, use_tqdm=False)[0].outputs[0]
        past.skip_special_tokens = False
        shown = llm.generate("hi", past, use_tqdm=False)[0].outputs[0]
        assert shown.token_ids == hidden.token_ids
        assert eos in shown.token_ids and eos_text not in hidden.text
        assert hidden.text == tok.decode(hidden.token_ids)
        assert shown.text == tok.decode(shown.token_ids, skip_special_tokens=False)
        assert shown.text.replace(eos_text, "").replace("<unk>", "") == hidden.text


def test_progress_bar_reaches_the_total(aidreams):
    updates = []

    class Bar:
        def __init__(self, total, **kwargs):
            self.total, self.n = total, 0

        def update(self, k):
            self.n += k
            updates.append(self.n)

        def close(self):
            updates.append("closed")

    aidreams.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=8), use_tqdm=Bar)
    assert updates[-1] == "closed" and updates[-2] == len(PROMPTS)
    assert updates[:-1] == sorted(updates[:-1])
