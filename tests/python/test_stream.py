"""generate_stream yields pieces that concatenate to generate()'s text; leaving the loop
cancels the rest."""

import pytest

from vela import SamplingParams

PROMPTS = ["Once upon a time", "The little robot", "She said"]


def test_pieces_concatenate_to_the_final_text(aidreams):
    params = SamplingParams(n=2, temperature=0.8, max_tokens=30, seed=3, stop=["."])
    final = aidreams.generate(PROMPTS, params, use_tqdm=False)
    texts = {}
    tokens = {}
    reasons = {}
    finished_prompts = []
    for piece in aidreams.generate_stream(PROMPTS, params):
        (c,) = piece.outputs
        key = (int(piece.request_id), c.index)
        texts[key] = texts.get(key, "") + c.text
        tokens.setdefault(key, []).extend(c.token_ids)
        if c.finish_reason is not None:
            reasons[key] = c.finish_reason
        if piece.finished:
            finished_prompts.append(piece.prompt)
            assert piece.prompt_token_ids == aidreams.get_tokenizer().encode(piece.prompt)
    first_id = min(k[0] for k in texts)
    assert sorted(finished_prompts) == sorted(PROMPTS)
    for i, r in enumerate(final):
        for c in r.outputs:
            key = (first_id + i, c.index)
            assert texts[key] == c.text
            assert reasons[key] == c.finish_reason
            # A stop token ends a completion without a piece of its own.
            assert tokens[key] == c.token_ids[:len(tokens[key])]
            assert len(c.token_ids) - len(tokens[key]) <= 1


def test_breaking_out_cancels_and_the_llm_stays_usable(aidreams):
    long = SamplingParams(temperature=0, max_tokens=100, ignore_eos=True)
    pieces = 0
    for piece in aidreams.generate_stream(PROMPTS, long):
        pieces += 1
        if pieces == 5:
            break
    assert pieces == 5
    out = aidreams.generate(PROMPTS[0], SamplingParams(temperature=0, max_tokens=5),
                            use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 5


def test_chat_stream(aidreams):
    template = ("{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\\n' }}{% endfor %}"
                "{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}")
    conversation = [{"role": "user", "content": "Tell me a story"}]
    params = SamplingParams(temperature=0, max_tokens=15)
    final = aidreams.chat(conversation, params, use_tqdm=False, chat_template=template)[0]
    text = "".join(p.outputs[0].text
                   for p in aidreams.chat_stream(conversation, params, chat_template=template))
    assert text == final.outputs[0].text


def test_streaming_refuses_skip_special_tokens_false(aidreams):
    params = SamplingParams(max_tokens=4, skip_special_tokens=False)
    with pytest.raises(ValueError, match="skip_special_tokens=False"):
        aidreams.generate_stream("hi", params)
