#!/usr/bin/env python3
"""Regenerates reference_cases.json: small templates rendered by Python Jinja2 configured the
way Hugging Face renders chat templates (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, raise_exception, strftime_now at 2024-07-26, json.dumps tojson).
Cases marked "mutable" use SandboxedEnvironment so list/dict mutators are allowed.

Usage: python3 make_reference.py > reference_cases.json   (needs jinja2 >= 3.1)
"""
import datetime
import json
import sys

from jinja2.exceptions import TemplateError
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from reference_corpus import CASES  # noqa: E402


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime(2024, 7, 26, 12, 0, 0).strftime(fmt)


class Generation(Extension):
    """{% generation %}...{% endgeneration %} renders its body (as Hugging Face's tracker does)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def make_env(cls):
    env = cls(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, Generation])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENVS = {False: make_env(ImmutableSandboxedEnvironment), True: make_env(SandboxedEnvironment)}

out = []
for case in CASES:
    name, template, context = case[0], case[1], case[2]
    flags = case[3] if len(case) > 3 else {}
    entry = {"name": name, "template": template, "context": context}
    try:
        entry["expected"] = ENVS[flags.get("mutable", False)].from_string(template).render(**context)
    except Exception as e:  # noqa: BLE001 - any Jinja failure is an expected error
        entry["expected_error"] = str(e) if isinstance(e, TemplateError) and \
            type(e).__name__ == "TemplateError" else ""
        entry["error_type"] = type(e).__name__
    out.append(entry)

json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
sys.stdout.write("\n")
