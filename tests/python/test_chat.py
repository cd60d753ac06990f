"""llm.chat renders conversations with the model's chat template (or one given), tokenizes the
text without adding a BOS, and generates exactly what generate() does for that text."""

import pytest

from conftest import shared_model
from vela import LLM, SamplingParams

CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
CONVERSATION = [{"role": "system", "content": "You tell stories."},
                {"role": "user", "content": "Once upon a time"}]


def test_chat_uses_the_models_template(synth_model):
    with LLM(model=synth_model, max_model_len=256) as llm:
        tok = llm.get_tokenizer()
        text = tok.apply_chat_template(CONVERSATION, add_generation_prompt=True, tokenize=False)
        assert text == ("<|im_start|>system\nYou tell stories.<|im_end|>\n"
                        "<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n")
        params = SamplingParams(temperature=0, max_tokens=12)
        chat = llm.chat(CONVERSATION, params, use_tqdm=False)[0]
        assert chat.prompt == text
        assert chat.prompt_token_ids == tok.encode(text, add_special_tokens=False)
        assert chat.prompt_token_ids == tok.apply_chat_template(CONVERSATION,
                                                                add_generation_prompt=True)
        direct = llm.generate([chat.prompt_token_ids], params, use_tqdm=False)[0]
        assert chat.outputs[0].token_ids == direct.outputs[0].token_ids
        assert chat.outputs[0].text == direct.outputs[0].text
        no_prompt = tok.apply_chat_template(CONVERSATION, tokenize=False)
        assert no_prompt == text[:-len("<|im_start|>assistant\n")]


def test_chat_batch_and_template_argument(aidreams):
    params = SamplingParams(temperature=0, max_tokens=10)
    second = [{"role": "user", "content": [{"type": "text", "text": "The little"},
                                           {"type": "text", "text": "robot"}]}]
    out = aidreams.chat([CONVERSATION, second], params, use_tqdm=False, chat_template=CHATML)
    assert len(out) == 2
    assert out[1].prompt == "<|im_start|>user\nThe little\nrobot<|im_end|>\n<|im_start|>assistant\n"
    for r in out:
        direct = aidreams.generate([aidreams.get_tokenizer().encode(r.prompt, False)], params,
                                   use_tqdm=False)[0]
        assert r.outputs[0].token_ids == direct.outputs[0].token_ids
    # The shared model has no template of its own: a clear error, not a guess.
    with pytest.raises(ValueError, match="no tokenizer.chat_template"):
        aidreams.chat(CONVERSATION, params, use_tqdm=False)
    with pytest.raises(ValueError, match="chat_template"):
        aidreams.chat(CONVERSATION, params, use_tqdm=False, chat_template="{% if %}")
    with pytest.raises(TypeError, match="role"):
        aidreams.chat([{"content": "hi"}], params, use_tqdm=False, chat_template=CHATML)


def test_tokenizer_round_trip(aidreams):
    tok = aidreams.get_tokenizer()
    ids = tok.encode("Once upon a time")
    assert ids[0] == tok.bos_token_id
    assert tok.encode("Once upon a time", add_special_tokens=False) == ids[1:]
    # SentencePiece: the first piece's leading space goes, unless a BOS came first.
    assert tok.decode(ids[1:]) == "Once upon a time"
    assert tok.decode(ids) == " Once upon a time"
    assert len(tok) == tok.vocab_size == 512
    assert shared_model("aidreams260K.gguf") == aidreams.model
