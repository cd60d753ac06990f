"""Structured output and logit_bias through the Python API: StructuredOutputsParams (and vLLM's
older GuidedDecodingParams / guided_decoding) constrains sampled text to a choice, a regex, a
JSON Schema or a grammar; bad constraints raise ValueError naming the problem."""

import json
import re

import jsonschema
import pytest

from vela import GuidedDecodingParams, SamplingParams, StructuredOutputsParams

PROMPTS = ["Once upon a time", "The little dog", "She said"]


def sampled(**kwargs):
    return SamplingParams(temperature=1.0, seed=7, max_tokens=100, **kwargs)


def test_choice_is_one_of_the_strings(aidreams):
    choices = ["yes", "no", "maybe later"]
    outs = aidreams.generate(PROMPTS, sampled(
        structured_outputs=StructuredOutputsParams(choice=choices)), use_tqdm=False)
    for out in outs:
        assert out.outputs[0].text in choices
        assert out.outputs[0].finish_reason == "stop"


def test_regex_matches_the_whole_text(aidreams):
    pattern = r"[0-9]{3}-[a-z]{2,4}"
    outs = aidreams.generate(PROMPTS, sampled(
        structured_outputs=StructuredOutputsParams(regex=pattern)), use_tqdm=False)
    for out in outs:
        assert re.fullmatch(pattern, out.outputs[0].text), out.outputs[0].text


def test_json_schema_output_validates(aidreams):
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 6}, "ok": {"type": "boolean"}},
        "required": ["name", "ok"],
        "additionalProperties": False,
    }
    for given in (schema, json.dumps(schema)):  # a dict or its JSON text
        outs = aidreams.generate(PROMPTS, sampled(
            structured_outputs=StructuredOutputsParams(json=given)), use_tqdm=False)
        for out in outs:
            text = out.outputs[0].text
            assert out.outputs[0].finish_reason == "stop", text
            jsonschema.validate(json.loads(text), schema)
            outside_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
            # compact by default: single spaces at most, no newlines or tabs
            assert not re.search(r"[\t\n\r]|  ", outside_strings), text


def test_json_object_and_grammar(aidreams):
    out = aidreams.generate("A", SamplingParams(
        temperature=1.0, seed=3, max_tokens=200,
        structured_outputs=StructuredOutputsParams(json_object=True)), use_tqdm=False)[0].outputs[0]
    assert out.text.startswith("{"), out.text
    if out.finish_reason == "stop":
        assert isinstance(json.loads(out.text), dict)
    grammar = 'root ::= "(" [ab]+ ")"'
    out = aidreams.generate("A", sampled(structured_outputs=StructuredOutputsParams(
        grammar=grammar)), use_tqdm=False)[0].outputs[0]
    complete = re.fullmatch(r"\([ab]+\)", out.text)
    assert complete or (out.finish_reason == "length" and re.fullmatch(r"\([ab]+", out.text)), \
        out.text


def test_guided_decoding_is_the_same_constraint(aidreams):
    choices = ["red", "green", "blue"]
    a = aidreams.generate(PROMPTS, sampled(
        structured_outputs=StructuredOutputsParams(choice=choices)), use_tqdm=False)
    b = aidreams.generate(PROMPTS, sampled(
        guided_decoding=GuidedDecodingParams(choice=choices)), use_tqdm=False)
    assert [o.outputs[0].text for o in a] == [o.outputs[0].text for o in b]


def test_logit_bias_moves_the_choice(aidreams):
    greedy = SamplingParams(temperature=0, max_tokens=4)
    plain = aidreams.generate("Once upon a time", greedy, use_tqdm=False)[0].outputs[0]
    forced_token = 300 if plain.token_ids[0] != 300 else 301
    forced = aidreams.generate("Once upon a time", SamplingParams(
        temperature=0, max_tokens=4, logit_bias={forced_token: 100}), use_tqdm=False)[0]
    assert forced.outputs[0].token_ids == [forced_token] * 4
    banned = aidreams.generate("Once upon a time", SamplingParams(
        temperature=0, max_tokens=4, logit_bias={plain.token_ids[0]: -100}),
        use_tqdm=False)[0].outputs[0]
    assert banned.token_ids[0] != plain.token_ids[0]


def test_bad_constraints_raise(aidreams):
    with pytest.raises(ValueError, match="exactly one"):
        StructuredOutputsParams(regex="a", choice=["a"])
    with pytest.raises(ValueError, match="exactly one"):
        StructuredOutputsParams()
    with pytest.raises(TypeError, match="choice"):
        StructuredOutputsParams(choice=[1, 2])
    with pytest.raises(ValueError, match="backend='xgrammar' is not supported"):
        StructuredOutputsParams(regex="a", backend="xgrammar")
    with pytest.raises(TypeError, match="structured_outputs"):
        SamplingParams(structured_outputs={"regex": "a"})
    with pytest.raises(ValueError, match="not both"):
        SamplingParams(structured_outputs=StructuredOutputsParams(regex="a"),
                       guided_decoding=GuidedDecodingParams(regex="b"))
    with pytest.raises(TypeError, match="logit_bias"):
        SamplingParams(logit_bias={"x": 1})
    with pytest.raises(ValueError, match="logit_bias"):
        SamplingParams(logit_bias={5: 1000})
    # The engine compiles the constraint: a broken regex, schema or grammar is a ValueError
    # naming the prompt, and the LLM keeps working.
    for bad in (StructuredOutputsParams(regex="(unclosed"),
                StructuredOutputsParams(json={"type": "no-such-type"}),
                StructuredOutputsParams(grammar="root ::= undefined_rule")):
        with pytest.raises(ValueError, match="prompt 0"):
            aidreams.generate("A", SamplingParams(structured_outputs=bad), use_tqdm=False)
    ok = aidreams.generate("A", SamplingParams(
        temperature=0, max_tokens=2, structured_outputs=StructuredOutputsParams(choice=["x"])),
        use_tqdm=False)
    assert ok[0].outputs[0].text == "x"
