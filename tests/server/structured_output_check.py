#!/usr/bin/env python3
"""Drives a running `vela serve` with structured-output requests and checks every output with
an independent validator (python3-jsonschema, Python's re and json), not vela's own matcher.

Usage: structured_output_check.py BASE_URL MODEL N_REQUESTS [HOSTILE_SCALE]
HOSTILE_SCALE (default 1) scales the huge enum and the 1 MB schema (a sanitizer build passes
less: it checks the same paths at many times the cost).
Exits 0 when every check passes; prints each failure otherwise.
"""
import concurrent.futures
import json
import re
import sys
import time
import urllib.error
import urllib.request

import jsonschema

BASE, MODEL, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
HOSTILE_SCALE = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                      "age": {"type": "integer", "minimum": 0, "maximum": 150}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "object", "properties": {"ok": {"type": "boolean"}, "note": {"type": "null"},
                                      "score": {"type": "number", "minimum": 0, "maximum": 1}},
     "required": ["ok", "score"]},
    {"type": "array", "items": {"enum": ["red", "green", "blue", "日本", "a\"b"]},
     "minItems": 1, "maxItems": 4},
    {"type": "object", "properties": {
        "user": {"type": "object", "properties": {
            "id": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3}},
            "required": ["id", "tags"]}},
     "required": ["user"]},
    {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer", "minimum": -9, "maximum": 9},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "required": ["v"]}},
     "$ref": "#/$defs/node"},
    {"anyOf": [{"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
               {"type": "integer", "minimum": 10, "maximum": 99}]},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date"},
                                      "id": {"type": "string", "format": "uuid"}},
     "required": ["when", "id"]},
    {"type": "object", "properties": {"kind": {"const": "point"},
                                      "xy": {"type": "array", "prefixItems": [
                                          {"type": "number", "minimum": -5, "maximum": 5},
                                          {"type": "number", "minimum": -5, "maximum": 5}],
                                          "items": False, "minItems": 2}},
     "required": ["kind", "xy"]},
    {"type": "string", "minLength": 1, "maxLength": 16},
    {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
]

failures = []


def post(path, body, timeout=120):
    req = urllib.request.Request(BASE + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def one(i):
    schema = SCHEMAS[i % len(SCHEMAS)]
    body = {"model": MODEL, "prompt": "Answer in JSON:", "max_tokens": 400, "temperature": 1.0,
            "seed": i}
    # Every API spelling gets its share.
    style = i % 3
    if style == 0:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "s", "schema": schema, "strict": True}}
    elif style == 1:
        body["structured_outputs"] = {"json": schema}
    else:
        body["guided_json"] = json.dumps(schema)
    status, r = post("/v1/completions", body)
    if status != 200:
        return f"request {i}: status {status}: {r}"
    c = r["choices"][0]
    text = c["text"]
    if c["finish_reason"] != "stop":
        return f"request {i}: finish_reason {c['finish_reason']} text {text!r}"
    try:
        doc = json.loads(text)
    except ValueError as e:
        return f"request {i}: not JSON ({e}): {text!r}"
    try:
        jsonschema.validate(doc, schema)
    except jsonschema.ValidationError as e:
        return f"request {i}: schema {i % len(SCHEMAS)} rejects {text!r}: {e.message}"
    return None


def check(cond, message):
    if not cond:
        failures.append(message)


def other_constraints():
    # regex, choice and grammar, in each spelling
    for field, value, test in [
        ("guided_regex", r"[a-z]{3}-\d{2,4}", lambda t: re.fullmatch(r"[a-z]{3}-\d{2,4}", t)),
        ("guided_choice", ["alpha", "beta", "gamma"], lambda t: t in ("alpha", "beta", "gamma")),
        ("guided_grammar", 'root ::= "(" [0-9]+ ("+" [0-9]+)* ")"',
         lambda t: re.fullmatch(r"\(\d+(\+\d+)*\)", t)),
    ]:
        for seed in range(5):
            status, r = post("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 64,
                                                 "temperature": 1.0, "seed": seed, field: value})
            check(status == 200, f"{field}: status {status} {r}")
            if status == 200:
                t = r["choices"][0]["text"]
                check(test(t) and r["choices"][0]["finish_reason"] == "stop",
                      f"{field}: output {t!r} finish {r['choices'][0]['finish_reason']}")
    status, r = post("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 32,
                                         "structured_outputs": {"regex": "(yes|no)!"}})
    check(status == 200 and r["choices"][0]["text"] in ("yes!", "no!"), f"structured regex: {r}")
    status, r = post("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 200,
                                         "response_format": {"type": "json_object"}})
    if status == 200 and r["choices"][0]["finish_reason"] == "stop":
        check(isinstance(json.loads(r["choices"][0]["text"]), dict), f"json_object: {r}")
    else:
        check(status == 200, f"json_object: {status} {r}")
    # A constraint that cannot finish within max_tokens ends with "length".
    status, r = post("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 3,
                                         "guided_regex": "a{10}"})
    check(status == 200 and r["choices"][0]["finish_reason"] == "length"
          and r["choices"][0]["text"] == "a" * len(r["choices"][0]["text"]), f"length: {r}")


def errors():
    bad = [
        ({"guided_json": {"type": "strnig"}}, "unknown type"),
        ({"response_format": {"type": "json_schema",
                              "json_schema": {"name": "x", "schema": {"type": "object",
                                                                      "properties": {"a": {"not": {}}}}}}},
         "'not'"),
        ({"guided_regex": "(a"}, "invalid regex"),
        ({"guided_grammar": "root ::= undefined_rule"}, "not defined"),
        ({"response_format": {"type": "xml"}}, "json_object or json_schema"),
        ({"guided_regex": "a", "guided_choice": ["b"]}, "one structured-output"),
        ({"guided_json": "{not json"}, "not valid JSON"),
        ({"structured_outputs": {"json": {}, "disable_any_whitespace": "yes"}},
         "disable_any_whitespace"),
    ]
    for extra, expected in bad:
        body = {"model": MODEL, "prompt": "x", "max_tokens": 4}
        body.update(extra)
        status, r = post("/v1/completions", body)
        msg = r.get("error", {}).get("message", "")
        check(status == 400 and expected in msg, f"{extra}: {status} {msg!r}")


def hostile():
    # Deep nesting, a huge enum, a catastrophic regex, a 1 MB schema: an answer (200 or 400)
    # in bounded time, and the server still serves.
    deep = {"type": "integer"}
    for _ in range(300):
        deep = {"type": "array", "items": deep}
    props, size = {}, 0
    while size < (1 << 20) * HOSTILE_SCALE:
        key = f"property_{len(props)}"
        props[key] = {"type": "string", "maxLength": 4}
        size += len(key) + 40
    cases = [
        {"guided_json": deep},
        {"guided_json": {"enum": [f"v{i}" for i in range(int(50000 * HOSTILE_SCALE))]}},
        {"guided_regex": "(a+)+$"},
        {"guided_regex": "((a{1000}){1000}){1000}"},
        {"guided_json": {"type": "object", "properties": props}},
    ]
    for extra in cases:
        body = {"model": MODEL, "prompt": "x", "max_tokens": 8, "temperature": 1.0}
        body.update(extra)
        start = time.time()
        status, r = post("/v1/completions", body, timeout=300)
        took = time.time() - start
        check(status in (200, 400), f"hostile {list(extra)}: status {status}")
        check(took < 120, f"hostile {list(extra)}: {took:.1f} s")
        status, r = post("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 2})
        check(status == 200, f"server stopped serving after a hostile request: {status}")


def main():
    start = time.time()
    # Each phase reports its time, so a slow one is easy to find.
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for result in pool.map(one, range(N)):
            if result:
                failures.append(result)
    print(f"{N} schema requests in {time.time() - start:.1f} s")
    for phase in (other_constraints, errors, hostile):
        t = time.time()
        phase()
        print(f"{phase.__name__}: {time.time() - t:.1f} s")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
