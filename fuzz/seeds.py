#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora into OUT/<fuzzer>/: small valid inputs of the shapes the
tests use (a complete tiny GGUF model, OpenAI request bodies, chat templates, tokenizer text),
plus the chat templates of the shared test cases when ../shared is present."""
import json
import os
import struct
import sys

GGUF_INT32, GGUF_UINT32, GGUF_FLOAT32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY = 5, 4, 6, 7, 8, 9


def gguf_string(text):
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def gguf_value(kind, value):
    if kind == GGUF_STRING:
        return gguf_string(value)
    if kind == GGUF_UINT32:
        return struct.pack("<I", value)
    if kind == GGUF_INT32:
        return struct.pack("<i", value)
    if kind == GGUF_FLOAT32:
        return struct.pack("<f", value)
    if kind == GGUF_BOOL:
        return struct.pack("<B", 1 if value else 0)
    elem_kind, items = value
    return struct.pack("<IQ", elem_kind, len(items)) + b"".join(gguf_value(elem_kind, v) for v in items)


def tiny_gguf(arch, n_vocab=8, dim=8, layers=1, ff=16, extra=()):
    """A complete F32 Llama-shaped GGUF: metadata, a SentencePiece vocabulary, all tensors.
    extra: (key suffix, kind, value) entries of <arch>.* metadata that replace or join the rest,
    for the config readers of other families (their tensors stay Llama's)."""
    tokens = ["<unk>", "<s>", "</s>"] + ["\u2581" + chr(ord("a") + i) for i in range(n_vocab - 3)]
    metadata = [
        ("general.architecture", GGUF_STRING, arch),
        (f"{arch}.context_length", GGUF_UINT32, 64),
        (f"{arch}.embedding_length", GGUF_UINT32, dim),
        (f"{arch}.block_count", GGUF_UINT32, layers),
        (f"{arch}.feed_forward_length", GGUF_UINT32, ff),
        (f"{arch}.attention.head_count", GGUF_UINT32, 2),
        (f"{arch}.attention.head_count_kv", GGUF_UINT32, 1),
        (f"{arch}.attention.layer_norm_rms_epsilon", GGUF_FLOAT32, 1e-5),
        ("tokenizer.ggml.model", GGUF_STRING, "llama"),
        ("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, tokens)),
        ("tokenizer.ggml.scores", GGUF_ARRAY, (GGUF_FLOAT32, [-float(i) for i in range(n_vocab)])),
        ("tokenizer.ggml.token_type", GGUF_ARRAY, (GGUF_INT32, [2, 3, 3] + [1] * (n_vocab - 3))),
        ("tokenizer.ggml.bos_token_id", GGUF_UINT32, 1),
        ("tokenizer.ggml.eos_token_id", GGUF_UINT32, 2),
        ("tokenizer.ggml.add_bos_token", GGUF_BOOL, True),
    ]
    replaced = {f"{arch}.{suffix}" for suffix, _, _ in extra}
    metadata = [m for m in metadata if m[0] not in replaced]
    metadata += [(f"{arch}.{suffix}", kind, value) for suffix, kind, value in extra]
    kv_dim = dim // 2
    shapes = [("token_embd.weight", [dim, n_vocab]), ("output_norm.weight", [dim])]
    for layer in range(layers):
        p = f"blk.{layer}."
        shapes += [(p + "attn_norm.weight", [dim]), (p + "attn_q.weight", [dim, dim]),
                   (p + "attn_k.weight", [dim, kv_dim]), (p + "attn_v.weight", [dim, kv_dim]),
                   (p + "attn_output.weight", [dim, dim]), (p + "ffn_norm.weight", [dim]),
                   (p + "ffn_gate.weight", [dim, ff]), (p + "ffn_up.weight", [dim, ff]),
                   (p + "ffn_down.weight", [ff, dim])]
    header = b"GGUF" + struct.pack("<IQQ", 3, len(shapes), len(metadata))
    for key, kind, value in metadata:
        header += gguf_string(key) + struct.pack("<I", kind) + gguf_value(kind, value)
    offset, infos, data = 0, b"", b""
    for name, dims in shapes:
        count = 1
        for d in dims:
            count *= d
        infos += gguf_string(name) + struct.pack("<I", len(dims))
        infos += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", 0, offset)
        tensor = struct.pack(f"<{count}f", *[((i * 7) % 11 - 5) / 10 for i in range(count)])
        tensor += b"\0" * (-len(tensor) % 32)
        data += tensor
        offset += len(tensor)
    blob = header + infos
    blob += b"\0" * (-len(blob) % 32)
    return blob + data


REQUESTS = [
    {"prompt": "Hello", "max_tokens": 4},
    {"prompt": ["a", "b"], "n": 2, "temperature": 0.7, "top_p": 0.9, "stop": ["\n"], "seed": 3},
    {"prompt": [1, 2, 3], "logprobs": 2, "stream": True, "stream_options": {"include_usage": True}},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
     "max_tokens": 8, "top_k": 20, "min_p": 0.05, "presence_penalty": 0.5, "frequency_penalty": 0.1,
     "repetition_penalty": 1.1, "logprobs": True, "top_logprobs": 3, "user": "u", "priority": 1},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
     "max_completion_tokens": 5, "stop": "x", "stop_token_ids": [2], "ignore_eos": True},
    {"messages": [{"role": "user", "content": "Hi"}],
     "response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": True,
                         "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}},
     "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
     "tool_choice": "auto", "logit_bias": {"5": -100}},
    {"prompt": "x", "guided_regex": "[a-z]+", "echo": True, "best_of": 2, "n": 1,
     "structured_outputs": {"choice": ["a", "b"]}},
]

TEMPLATES = [
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}[INST] {{ m.content | trim }}"
    " [/INST]{% else %}{{ m.content }}{{ eos_token }}{% endif %}{% endfor %}",
    "{% set ns = namespace(n=0) %}{% for m in messages|selectattr('role','equalto','user') %}"
    "{% set ns.n = ns.n + 1 %}{{ loop.index }}:{{ m.content|upper }}{% endfor %}{{ ns.n }}"
    "{% if tools %}{{ tools|tojson(indent=2) }}{% endif %}{{ raise_exception('x') if ns.n > 9 }}",
    "{% macro f(x, y=2) %}{{ x * y }}{% endmacro %}{{ f(3) }}{{ 'a,b'.split(',')|join('-') }}"
    "{{ messages[-1]['content'][:3] }}{{ range(3)|list }}{{ {'k': 1}.items()|list }}\0hello",
]

GRAMMARS = [
    (0, json.dumps({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                    "age": {"type": "integer", "minimum": 0, "maximum": 150},
                    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
                    "required": ["name"]})),
    (0, json.dumps({"$defs": {"node": {"type": "object", "properties": {
        "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}}},
        "$ref": "#/$defs/node"})),
    (4, json.dumps({"type": "array", "items": {"type": "number"}, "minItems": 1})),
    (1, r"(\d{3})-[a-z]+(foo|bar)*\s?\w{0,4}"),
    (2, 'root ::= "{" ws item ("," ws item)* "}"\nitem ::= [a-z]+ | [0-9]{1,3}\nws ::= [ \t]?\n'),
    (3, "yes\nno\nmaybe"),
]

TEXTS = ["Hello world", " leading space", "日本語のテキスト", "emoji 🦙 and \u00e9",
         "<s> special </s> <|im_start|>", "code:\n\tdef f(x):\n\t\treturn x*2\n", "12345 67.89",
         "\xff\xfe invalid"]


# GGUF type number: (elements, bytes) per block, for every block type the loader reads.
BLOCK_TYPES = {2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 10: (256, 84),
               11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 16: (256, 66),
               17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110),
               22: (256, 82), 23: (256, 136), 29: (256, 56), 34: (256, 54), 35: (256, 66),
               39: (32, 17)}


def block_types_gguf():
    """One [256, 2] tensor of every block type, filled with deterministic pseudo-random bytes: the
    fuzzer decodes and multiplies small tensors, so mutations reach every block decoder."""
    header = b"GGUF" + struct.pack("<IQQ", 3, len(BLOCK_TYPES), 1)
    header += gguf_string("general.architecture") + struct.pack("<I", GGUF_STRING)
    header += gguf_string("llama")
    offset, infos, data, state = 0, b"", b"", 12345
    for type_number, (block, size) in BLOCK_TYPES.items():
        infos += gguf_string(f"t{type_number}.weight") + struct.pack("<I", 2)
        infos += struct.pack("<QQ", 256, 2) + struct.pack("<IQ", type_number, offset)
        tensor = bytearray()
        for _ in range(2 * 256 // block * size):
            state = (state * 1103515245 + 12345) % (1 << 31)
            tensor.append(state >> 16 & 0xFF)
        tensor += b"\0" * (-len(tensor) % 32)
        data += bytes(tensor)
        offset += len(tensor)
    blob = header + infos
    blob += b"\0" * (-len(blob) % 32)
    return blob + data


def eagle3_head_ggufs():
    """An EAGLE-3 head's keys (its config reader), and a file whose tensors are integer data (an
    I64 d2t and an I32 table): the reader admits them as data, the decoders must leave them."""
    head = tiny_gguf("eagle3", extra=[("extract_layers", GGUF_ARRAY, (GGUF_INT32, [0, 0, 0])),
                                      ("target_hidden_size", GGUF_UINT32, 8),
                                      ("norm_before_residual", GGUF_BOOL, True)])
    header = b"GGUF" + struct.pack("<IQQ", 3, 2, 1)
    header += gguf_string("general.architecture") + struct.pack("<I", GGUF_STRING)
    header += gguf_string("eagle3")
    infos = gguf_string("d2t") + struct.pack("<I", 1) + struct.pack("<Q", 8)
    infos += struct.pack("<IQ", 27, 0)  # GGML_TYPE_I64
    infos += gguf_string("ids") + struct.pack("<I", 1) + struct.pack("<Q", 8)
    infos += struct.pack("<IQ", 26, 64)  # GGML_TYPE_I32
    blob = header + infos
    blob += b"\0" * (-len(blob) % 32)
    data = struct.pack("<8q", *range(8)) + struct.pack("<8i", *range(8, 0, -1))
    return [head, blob + data]


def family_config_ggufs():
    """Files whose metadata drives the per-layer and per-family config readers: Gemma 4's
    per-layer arrays, window pattern and shared K/V; gpt-oss's YaRN; GLM-4.5's routing keys."""
    u32, i32, f32, boolean = GGUF_UINT32, GGUF_INT32, GGUF_FLOAT32, GGUF_BOOL
    gemma4 = [("attention.head_count_kv", GGUF_ARRAY, (i32, [1, 2, 1, 2])),
              ("feed_forward_length", GGUF_ARRAY, (i32, [16, 16, 32, 32])),
              ("attention.key_length", u32, 8), ("attention.value_length", u32, 8),
              ("attention.key_length_swa", u32, 4), ("attention.value_length_swa", u32, 4),
              ("rope.dimension_count_swa", u32, 4), ("rope.freq_base_swa", f32, 1e4),
              ("attention.sliding_window", u32, 4),
              ("attention.sliding_window_pattern", GGUF_ARRAY, (boolean, [1, 0, 1, 0])),
              ("attention.shared_kv_layers", u32, 2),
              ("embedding_length_per_layer_input", u32, 4)]
    gpt_oss = [("rope.scaling.type", GGUF_STRING, "yarn"), ("rope.scaling.factor", f32, 4.0),
               ("rope.scaling.original_context_length", u32, 16),
               ("attention.sliding_window", u32, 4), ("expert_count", u32, 4),
               ("expert_used_count", u32, 2), ("expert_feed_forward_length", u32, 8)]
    glm4moe = [("expert_count", u32, 4), ("expert_used_count", u32, 2),
               ("expert_feed_forward_length", u32, 8), ("expert_shared_count", u32, 1),
               ("leading_dense_block_count", u32, 1), ("expert_gating_func", u32, 2),
               ("expert_weights_scale", f32, 2.5), ("expert_weights_norm", boolean, True),
               ("nextn_predict_layers", u32, 1), ("rope.dimension_count", u32, 2)]
    return [tiny_gguf("gemma4", layers=4, extra=gemma4),
            tiny_gguf("gpt-oss", layers=2, extra=gpt_oss),
            tiny_gguf("glm4moe", layers=3, extra=glm4moe)]


def main():
    out = sys.argv[1]
    seeds = {name: [] for name in ("gguf_fuzzer", "request_fuzzer", "chat_template_fuzzer",
                                    "tokenizer_fuzzer", "grammar_fuzzer")}
    seeds["gguf_fuzzer"] += [tiny_gguf("llama"), tiny_gguf("qwen2", n_vocab=12, layers=2),
                             block_types_gguf()] + family_config_ggufs() + eagle3_head_ggufs()
    seeds["request_fuzzer"] += [json.dumps(r).encode() for r in REQUESTS]
    seeds["chat_template_fuzzer"] += [t.encode() for t in TEMPLATES]
    seeds["tokenizer_fuzzer"] += [bytes([selector]) + t.encode("utf-8", "surrogateescape")
                                  for selector in (0, 1, 0xC2, 0x43) for t in TEXTS]
    seeds["grammar_fuzzer"] += [bytes([kind]) + text.encode() for kind, text in GRAMMARS]
    shared = os.environ.get("VELA_SHARED_DIR",
                            os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
    cases = os.path.join(shared, "chat-templates", "cases.jsonl")
    if os.path.exists(cases):
        templates = {json.loads(line)["template"] for line in open(cases, encoding="utf-8")}
        seeds["chat_template_fuzzer"] += [t.encode() for t in sorted(templates)]
    for name, inputs in seeds.items():
        os.makedirs(os.path.join(out, name), exist_ok=True)
        for i, data in enumerate(inputs):
            with open(os.path.join(out, name, f"seed-{i:03d}"), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
