"""Templates and contexts for make_reference.py: (name, template, context[, flags])."""

MSGS = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "  Hello!  "},
    {"role": "user", "content": "What's 2+2? ünïcødé 🦙"},
]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the weather",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web <fast> & \"free\"",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
]

TOOL_MSGS = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call12345", "type": "function",
         "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}]},
    {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 21.5}"},
    {"role": "assistant", "content": "It is 21.5°C."},
]

CASES = [
    # ---- whitespace control, trim_blocks, lstrip_blocks ----
    ("text only", "Hello\nworld\n", {}),
    ("trailing newlines", "a\n\n", {}),
    ("crlf", "a\r\nb\r\n{% if true %}\r\nc\r\n{% endif %}\r\n", {}),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("lstrip_blocks", "  {% if true %}\n    x\n  {% endif %}\ny", {}),
    ("lstrip only spaces before tag", "a  {% if true %}b{% endif %}", {}),
    ("lstrip tabs", "\t\t{% if true %}\n\tx\n\t{% endif %}\n", {}),
    ("var not lstripped", "  {{ 'x' }}\n  {{ 'y' }}\n", {}),
    ("minus strips", "a   \n  {%- if true -%}  \n  b  \n  {%- endif -%}  \n  c", {}),
    ("minus on vars", "a \n {{- 'b' -}} \n c", {}),
    ("plus disables lstrip", "  {%+ if true %}x{% endif %}", {}),
    ("plus disables trim", "{% if true +%}\nx{% endif %}", {}),
    ("comment trimmed", "a\n  {# comment #}\nb", {}),
    ("comment minus", "a   {#- c -#}   b", {}),
    ("multiline comment", "x{# line1\nline2 #}y\n", {}),
    ("raw block", "{% raw %}{{ not evaluated }}{% endraw %}", {}),
    ("raw block minus", "a  {%- raw -%}  {{ x }}  {%- endraw -%}  b", {}),
    ("raw trimmed end", "{% raw %}\nx\n{% endraw %}\ny", {}),
    ("nested whitespace", "{% for i in [1,2] %}\n  {% if i == 1 %}\n    one\n  {% else %}\n    other\n  {% endif %}\n{% endfor %}\n", {}),
    ("brace in text", "a { b } {x} }} %} #}", {}),
    ("block end after newline", "{% if true\n%}\nx{% endif %}", {}),
    ("variable with braces", "{{ {'a': {'b': 1}}['a']['b'] }}", {}),

    # ---- literals and printing ----
    ("ints floats", "{{ 1 }} {{ 1.0 }} {{ 1.5e3 }} {{ 0.1 + 0.2 }} {{ 1e100 }} {{ 1e-7 }} {{ 123456789.0 }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }}", {}),
    ("float repr", "{{ 1/3 }} {{ 2/3 }} {{ 10/4 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} {{ 3.14159265358979 }}", {}),
    ("bools none", "{{ true }} {{ True }} {{ false }} {{ none }} {{ None }}", {}),
    ("strings escapes", r"""{{ 'a\nb' }}|{{ "tab\there" }}|{{ 'q\'s' }}|{{ "d\"q" }}|{{ '\x41\u00e9\U0001F999' }}|{{ 'back\\slash' }}|{{ '\q' }}|{{ '\101' }}""", {}),
    ("adjacent strings", "{{ 'a' 'b' \"c\" }}", {}),
    ("list repr", "{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }}", {}),
    ("tuple repr", "{{ (1, 2) }} {{ (1,) }} {{ () }}", {}),
    ("dict repr", "{{ {'a': 1, 'b': [1, 2], 'c': {'d': none}} }}", {}),
    ("string repr quotes", """{{ ["it's", 'say "hi"', 'both \\' "', 'nl\\n', 'uni é 🦙'] }}""", {}),
    ("print tuple", "{{ 1, 2 }}", {}),
    ("context values", "{{ s }} {{ i }} {{ f }} {{ b }} {{ n }} {{ l }} {{ d }}",
     {"s": "str", "i": 42, "f": 2.5, "b": True, "n": None, "l": [1, "x"], "d": {"k": [True, None]}}),
    ("unicode passthrough", "{{ m }}|{{ m|length }}|{{ m[1] }}|{{ m[-1] }}|{{ m[::-1] }}", {"m": "añ你🦙"}),

    # ---- operators ----
    ("arithmetic", "{{ 7 + 2 }} {{ 7 - 2 }} {{ 7 * 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}", {}),
    ("negative division", "{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ -7.5 // 2 }} {{ 7.5 % -2 }} {{ -2 ** 2 }}", {}),
    ("mixed numeric", "{{ 1 + 1.5 }} {{ true + 1 }} {{ 3 * 1.0 }} {{ 4 / 2 }} {{ 2 ** 0.5 }}", {}),
    ("string ops", "{{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ 2 * 'x' }} {{ 'a' ~ 1 ~ none ~ true }} {{ [1] + [2] }} {{ [0] * 3 }}", {}),
    ("concat undefined", "[{{ 'a' ~ nothing ~ 'b' }}]", {}),
    ("comparisons", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 4 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ 'a' == 'a' }} {{ none == none }}", {}),
    ("chained compare", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1 == 1 }}", {}),
    ("in operator", "{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 3 not in [1] }} {{ 'x' in nothing }}", {}),
    ("logic values", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or none }} {{ not 0 }} {{ not 'a' }}", {}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ not true or true }} {{ not (true or true) }} {{ 2 * 3 ** 2 }} {{ 'x' ~ 2 * 3 }} {{ -3|abs }}", {}),
    ("concat binds tighter than plus", "{{ 1 + 2 ~ 3 }}", {}),
    ("ternary", "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} [{{ 'y' if false }}] {{ 1 if 0 else 2 if 0 else 3 }}", {}),
    ("dict equality", "{{ {'a': 1} == {'a': 1} }} {{ {'a': 1} == {'a': 2} }} {{ [1, [2]] == [1, [2]] }} {{ (1, 2) == [1, 2] }}", {}),

    # ---- variables, attribute/item access, undefined ----
    ("dot and subscript", "{{ m.role }} {{ m['role'] }} {{ l[0] }} {{ l.1 }} {{ l[-1] }} {{ d.a.b }}",
     {"m": {"role": "user"}, "l": [10, 20, 30], "d": {"a": {"b": "deep"}}}),
    ("missing key undefined", "[{{ m.missing }}][{{ m['missing'] }}][{{ l[10] }}][{{ undefined_var }}]",
     {"m": {"role": "user"}, "l": [1]}),
    ("is defined", "{{ x is defined }} {{ y is defined }} {{ m.role is defined }} {{ m.nope is defined }} {{ m.nope is undefined }} {{ none is defined }}",
     {"x": 1, "m": {"role": "u"}}),
    ("attr of undefined errors", "{{ nothing.attr }}", {}),
    ("item of undefined errors", "{{ nothing['x'] }}", {}),
    ("attr of missing key errors", "{{ m.a.b }}", {"m": {}}),
    ("none attribute", "[{{ n.x }}][{{ n['x'] }}]", {"n": None}),
    ("string attribute", "[{{ s.nope }}]", {"s": "abc"}),
    ("undefined arithmetic errors", "{{ nothing + 1 }}", {}),
    ("undefined truthiness", "{% if nothing %}yes{% else %}no{% endif %}{% for x in nothing %}x{% endfor %}{{ nothing|length }}", {}),
    ("undefined iteration", "{% for x in nothing %}x{% else %}empty{% endfor %}", {}),
    ("undefined compare errors", "{{ nothing < 1 }}", {}),
    ("undefined eq", "{{ nothing == none }} {{ nothing == nothing2 }} {{ nothing != 1 }}", {}),
    ("call undefined errors", "{{ nothing() }}", {}),
    ("dict method shadows key", "{{ d.items() | list }} {{ d['items'] }}", {"d": {"items": 5, "a": 1}}),
    ("getattr on dict key named like method", "{{ d.keys is defined }}", {"d": {"keys": 1}}),

    # ---- slices ----
    ("slices", "{{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[1:-1] }} {{ l[5:] }} {{ l[:-5] }} {{ l[3:0:-1] }}",
     {"l": [0, 1, 2, 3, 4]}),
    ("string slices", "{{ s[1:] }}|{{ s[:-1] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ s[-3:] }}", {"s": "hello world"}),
    ("slice of messages", "{% for m in messages[1:] %}{{ m.role }} {% endfor %}", {"messages": MSGS}),

    # ---- if / for ----
    ("if elif else", "{% for x in [1, 2, 3, 4] %}{% if x == 1 %}one{% elif x == 2 %}two{% elif x == 3 %}three{% else %}many{% endif %} {% endfor %}", {}),
    ("loop vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", {}),
    ("loop prev next", "{% for x in [1, 2, 3] %}[{{ loop.previtem }},{{ loop.nextitem }}]{% endfor %}", {}),
    ("loop cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}", {}),
    ("loop changed", "{% for x in [1, 1, 2, 2, 1] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}", {}),
    ("loop depth", "{% for a in [1] %}{{ loop.depth }}{% for b in [1] %}{{ loop.depth }}{{ loop.depth0 }}{% endfor %}{% endfor %}", {}),
    ("for else", "{% for x in [] %}x{% else %}none{% endfor %}|{% for x in [1] %}x{% else %}none{% endfor %}", {}),
    ("for filter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.index }},{% endfor %}", {}),
    ("for filter else", "{% for x in [2, 4] if x is odd %}{{ x }}{% else %}no odd{% endfor %}", {}),
    ("for unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {"d": {"b": 1, "a": 2}}),
    ("for unpack tuple list", "{% for a, b in [(1, 2), [3, 4]] %}{{ a + b }} {% endfor %}", {}),
    ("for over dict", "{% for k in d %}{{ k }}{% endfor %}", {"d": {"x": 1, "y": 2}}),
    ("for over string", "{% for c in 'héllo' %}{{ c }}.{% endfor %}", {}),
    ("nested loops outer loop", "{% for a in [1, 2] %}{% set outer = loop %}{% for b in [1, 2] %}{{ outer.index }}{{ loop.index }} {% endfor %}{% endfor %}", {}),
    ("break continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("break in nested", "{% for a in range(3) %}{% for b in range(3) %}{% if b == 1 %}{% break %}{% endif %}{{ a }}{{ b }} {% endfor %}{% endfor %}", {}),
    ("recursive loop", "{% for item in tree recursive %}{{ item.name }}{% if item.children %}({{ loop(item.children) }}){% endif %}{{ loop.depth }};{% endfor %}",
     {"tree": [{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}, {"name": "d"}]}, {"name": "e"}]}),
    ("loop over none errors", "{% for x in n %}{% endfor %}", {"n": None}),
    ("loop over int errors", "{% for x in 5 %}{% endfor %}", {}),
    ("unpack mismatch errors", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
    ("range forms", "{{ range(3)|list }} {{ range(1, 4)|list }} {{ range(10, 0, -3)|list }} {{ range(0)|list }}", {}),
    ("range too big", "{% for i in range(1000000) %}{% endfor %}", {}),

    # ---- scoping and set ----
    ("set basic", "{% set x = 5 %}{% set y = x * 2 %}{{ x }} {{ y }}", {}),
    ("set tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = [3, 4] %}{{ c }}{{ d }}", {}),
    ("set in loop does not leak", "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }} {% endfor %}{{ x }}", {}),
    ("set in if leaks", "{% if true %}{% set x = 'in if' %}{% endif %}{{ x }}", {}),
    ("namespace", "{% set ns = namespace(count=0, items='') %}{% for i in range(4) %}{% set ns.count = ns.count + i %}{% set ns.items = ns.items ~ i %}{% endfor %}{{ ns.count }} {{ ns.items }}", {}),
    ("namespace empty then set", "{% set ns = namespace() %}{% set ns.found = false %}{% for m in messages %}{% if m.role == 'assistant' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}", {"messages": MSGS}),
    ("namespace from dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.c is defined }}", {}),
    ("namespace repr", "{% set ns = namespace(a=1) %}{{ ns }}", {}),
    ("set non namespace attr errors", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("block set", "{% set content %}Hello {{ name }}!\n{% endset %}[{{ content }}]", {"name": "Bob"}),
    ("block set filter", "{% set content | upper | trim %}  shout {{ 'it' }}  {% endset %}[{{ content }}]", {}),
    ("set shadows context", "{% set messages = messages[1:] %}{{ messages|length }}", {"messages": MSGS}),
    ("set overrides add_generation_prompt", "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ add_generation_prompt }}", {}),
    ("with block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("with scope", "{% set x = 1 %}{% with %}{% set x = 2 %}{{ x }}{% endwith %}{{ x }}", {}),
    ("variable after loop", "{% for x in [1, 2] %}{% endfor %}[{{ x }}]", {}),

    # ---- macros and call blocks ----
    ("macro basic", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C', punct='.') }}", {}),
    ("macro default uses param", "{% macro m(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ m(3) }} {{ m(3, 1) }}", {}),
    ("macro varargs kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}", {}),
    ("macro missing arg", "{% macro m(a, b) %}[{{ a }}][{{ b }}]{% endmacro %}{{ m(1) }}", {}),
    ("macro sees globals", "{% set g = 'global' %}{% macro m() %}{{ g }} {{ bos_token }}{% endmacro %}{{ m() }}", {"bos_token": "<s>"}),
    ("macro local set", "{% set x = 1 %}{% macro m() %}{% set x = 2 %}{{ x }}{% endmacro %}{{ m() }}{{ x }}", {}),
    ("macro recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(6) }}", {}),
    ("macro returns string", "{% macro m() %}42{% endmacro %}{{ m() ~ '!' }} {{ m()|int + 1 }} {{ m() is string }}", {}),
    ("macro render json schema", """{%- macro render(p, indent) -%}
{%- for name, spec in p.properties.items() -%}
{{ indent }}{{ name }}: {{ spec.type }}{% if spec.description is defined %} // {{ spec.description }}{% endif %}
{% if spec.properties is defined %}{{ render(spec, indent ~ '  ') }}{% endif %}
{%- endfor -%}
{%- endmacro -%}
{{ render(schema, '') }}""", {"schema": {"properties": {"a": {"type": "string", "description": "A"}, "b": {"type": "object", "properties": {"c": {"type": "int"}}}}}}),
    ("call block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}", {}),
    ("call block args", "{% macro each(items) %}{% for i in items %}{{ caller(i, loop.index) }}{% endfor %}{% endmacro %}{% call(x, n) each(['a', 'b']) %}{{ n }}:{{ x }} {% endcall %}", {}),
    ("filter block", "{% filter upper %}hello {{ 'world' }}{% endfilter %}", {}),
    ("filter block chain", "{% filter trim | replace('a', 'o') %}  banana  {% endfilter %}", {}),

    # ---- tests ----
    ("type tests", "{{ 'a' is string }} {{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ none is none }} {{ {} is mapping }} {{ [] is mapping }}", {}),
    ("iterable sequence tests", "{{ [] is iterable }} {{ 'a' is iterable }} {{ {} is iterable }} {{ 1 is iterable }} {{ nothing is iterable }} {{ 'a' is sequence }} {{ 1 is sequence }} {{ none is iterable }}", {}),
    ("value tests", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }}", {}),
    ("comparison tests", "{{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} {{ 2 is gt 1 }} {{ 2 is ge 2 }} {{ 2 is le 1 }} {{ 'a' is in 'abc' }} {{ 1 is sameas 1 }} {{ none is sameas none }}", {}),
    ("string case tests", "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'Abc' is lower }} {{ '123' is upper }}", {}),
    ("callable test", "{% macro m() %}{% endmacro %}{{ m is callable }} {{ 'x' is callable }} {{ range is callable }}", {}),
    ("test not", "{{ 1 is not string }} {{ none is not none }} {{ x is not defined }}", {}),
    ("test in condition", "{% if messages[0].content is string and messages[0].role is not none %}ok{% endif %}", {"messages": MSGS}),
    ("filter and test tests", "{{ 'upper' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }}", {}),

    # ---- filters ----
    ("case filters", "{{ 'hello WORLD'|upper }} {{ 'Hello'|lower }} {{ 'hello world'|capitalize }} {{ \"hello wORLD they're-here (ok) x\"|title }}", {}),
    ("trim filter", "[{{ '  a b  '|trim }}][{{ 'xxaxx'|trim('x') }}][{{ '\n\t a \u00a0'|trim }}]", {}),
    ("replace filter", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }} {{ 123|replace('2', 'x') }}", {}),
    ("length filter", "{{ 'héllo'|length }} {{ [1, 2]|length }} {{ {'a': 1}|length }} {{ nothing|length }} {{ 'abc'|count }}", {}),
    ("first last", "{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} {{ 'abc'|last }} [{{ []|first }}]", {}),
    ("join filter", "{{ [1, 2, 3]|join }} {{ ['a', 'b']|join(', ') }} {{ users|join(', ', attribute='name') }} {{ [none, true]|join('-') }}",
     {"users": [{"name": "ann"}, {"name": "bo"}]}),
    ("default filter", "{{ nothing|default('dflt') }} {{ ''|default('dflt') }} {{ ''|default('dflt', true) }} {{ 0|d('zero', boolean=true) }} {{ none|default('x') }} {{ 'v'|d('x') }}", {}),
    ("tojson filter", "{{ d|tojson }}\n{{ d|tojson(indent=2) }}\n{{ 'é\"\n'|tojson }} {{ [1, 2.5, none, true]|tojson }} {{ {}|tojson }} {{ []|tojson(indent=2) }}",
     {"d": {"b": 1, "a": [1, {"x": "y"}], "c": {}, "e": "<tag> & 'q'"}}),
    ("tojson tools", "{% for t in tools %}{{ t|tojson }}\n{{ t|tojson(indent=4) }}\n{% endfor %}", {"tools": TOOLS}),
    ("tojson sort keys", "{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}", {}),
    ("tojson separators", "{{ {'b': 1, 'a': [1, 2]}|tojson(separators=(',', ':')) }}", {}),
    ("tojson float", "{{ [1.0, 0.1, 1e20, -2.5e-7]|tojson }}", {}),
    ("tojson undefined errors", "{{ nothing|tojson }}", {}),
    ("string filter", "{{ 1|string }} {{ [1, 'a']|string }} {{ {'a': none}|string }} {{ none|string }} [{{ nothing|string }}] {{ 1.0|string ~ 'x' }}", {}),
    ("int float filters", "{{ '42'|int }} {{ '42.9'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '0x1A'|int(0, 16) }} {{ ' 12 '|int }} {{ '3.5'|float }} {{ 'bad'|float }} {{ 2|float }} {{ true|int }} {{ none|int }}", {}),
    ("round abs", "{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 1.23456|round(3) }} {{ 2.1|round(method='ceil') }} {{ 2.9|round(0, 'floor') }} {{ 5|round }} {{ -3|abs }} {{ -2.5|abs }} {{ 1234|round(-2) }}", {}),
    ("list filter", "{{ 'abc'|list }} {{ {'a': 1, 'b': 2}|list }} {{ (1, 2)|list }}", {}),
    ("items filter", "{% for k, v in d|items %}{{ k }}:{{ v }} {% endfor %}{{ nothing|items|list }}", {"d": {"z": 1, "a": 2}}),
    ("dictsort", "{{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ d|dictsort(by='value') }}", {"d": {"b": 2, "A": 3, "c": 1}}),
    ("sort filter", "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [3, 1, 2]|sort(reverse=true) }} {{ users|sort(attribute='age')|map(attribute='name')|list }}",
     {"users": [{"name": "a", "age": 30}, {"name": "b", "age": 20}, {"name": "c", "age": 25}]}),
    ("sort multi attribute", "{{ users|sort(attribute='age,name')|map(attribute='name')|join(',') }}",
     {"users": [{"name": "z", "age": 1}, {"name": "a", "age": 2}, {"name": "b", "age": 1}]}),
    ("unique", "{{ [1, 2, 1, 3, 2]|unique|list }} {{ ['a', 'A', 'b']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }}", {}),
    ("min max sum", "{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A']|min }} {{ [1, 2, 3]|sum }} {{ users|sum(attribute='n') }} {{ [1.5, 2]|sum(start=10) }} [{{ []|max }}]",
     {"users": [{"n": 1}, {"n": 5}]}),
    ("reverse", "{{ 'abc'|reverse }} {{ [1, 2, 3]|reverse|list }}", {}),
    ("map filter", "{{ ['a', 'b']|map('upper')|list }} {{ users|map(attribute='name')|list }} {{ users|map(attribute='missing', default='?')|list }} {{ [1, 2]|map('string')|join('+') }}",
     {"users": [{"name": "ann"}, {"name": "bo"}]}),
    ("select reject", "{{ range(10)|select('odd')|list }} {{ range(10)|reject('odd')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ [1, 5, 10]|select('gt', 4)|list }} {{ ['a', 'b']|reject('equalto', 'a')|list }}", {}),
    ("selectattr rejectattr", "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }} {{ users|selectattr('admin')|map(attribute='name')|list }}",
     {"messages": MSGS, "users": [{"name": "a", "admin": True}, {"name": "b", "admin": False}, {"name": "c"}]}),
    ("selectattr defined", "{{ msgs|selectattr('tool_calls', 'defined')|list|length }}", {"msgs": TOOL_MSGS}),
    ("indent filter", "{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}|{{ 'x\ny'|indent('> ') }}", {}),
    ("center wordcount truncate", "[{{ 'ab'|center(7) }}] {{ 'hello big world'|wordcount }} {{ 'hello world this is long text'|truncate(15) }} {{ 'hello world this is long text'|truncate(15, true) }} {{ 'short'|truncate(10) }}", {}),
    ("escape safe", "{{ '<a href=\"x\">&\\'</a>'|escape }} {{ '<b>'|e }} {{ '<b>'|safe }}", {}),
    ("format filter", "{{ '%s is %d years'|format('Bob', 42) }} {{ '%.2f|%5s|%-5s|%03d'|format(3.14159, 'ab', 'cd', 7) }} {{ '%(a)s-%(b)s'|format(a=1, b=2) }}", {}),
    ("percent operator", "{{ '%s and %s' % ('a', 'b') }} {{ '%d%%' % 50 }} {{ '%r' % 'x' }}", {}),
    ("batch", "{% for row in range(7)|batch(3) %}{{ row }}{% endfor %} {{ range(5)|batch(2, 'x')|list }}", {}),
    ("striptags pprint", "{{ '<p>Hello <b>world</b></p>  again'|striptags }} {{ [1, 'a']|pprint }}", {}),
    ("attr filter", "{{ d|attr('a') }} [{{ d|attr('zz') }}]", {"d": {"a": 1}}),
    ("filter chain", "{{ '  Hello World  '|trim|lower|replace('world', 'there')|title }}", {}),
    ("filter precedence", "{{ 'a' ~ 'b'|upper }} {{ -1|abs }} {{ 1 + '2'|int }} {{ [3, 1]|sort|first }}", {}),
    ("filter binds tighter than plus", "{{ 1 + 2|string }}", {}),
    ("unknown filter", "{{ 1|nosuchfilter }}", {}),

    # ---- methods ----
    ("string methods", "[{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}][{{ 'xxhixx'.strip('x') }}] {{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }}", {}),
    ("string methods 2", "{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith('lo') }} {{ 'Hello'.startswith(('x', 'H')) }} {{ 'hello'.upper() }} {{ 'HeLLo'.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'aXb'.swapcase() }}", {}),
    ("string methods 3", "{{ 'banana'.replace('a', 'o') }} {{ 'banana'.replace('a', 'o', 1) }} {{ 'banana'.find('n') }} {{ 'banana'.rfind('n') }} {{ 'banana'.find('z') }} {{ 'banana'.count('a') }} {{ '-'.join(['a', 'b']) }} {{ 'añb'.find('b') }}", {}),
    ("string methods 4", "{{ '{} + {} = {}'.format(1, 2, 3) }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{name}!'.format(name='x') }} {{ '{:>5}|{:<4}|{:^6}|{:.2f}|{:05d}'.format('a', 'b', 'c', 3.14159, 42) }} {{ '{{literal}}'.format() }}", {}),
    ("string methods 5", "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'ab1'.isalnum() }} {{ '  '.isspace() }} {{ 'ABC'.isupper() }} {{ 'abc'.islower() }} {{ ''.isdigit() }} {{ '42'.zfill(5) }} {{ 'ab'.ljust(4, '.') }}|{{ 'ab'.rjust(4) }}|{{ 'ab'.center(6, '*') }}", {}),
    ("string methods 6", "{{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ 'prefix-x'.removeprefix('prefix-') }} {{ 'x.txt'.removesuffix('.txt') }} {{ 'l1\nl2\r\nl3'.splitlines() }}", {}),
    ("split think", "{% set content = '<think>reasoning</think>\n\nanswer' %}{% if '</think>' in content %}{{ content.split('</think>')[-1].lstrip() }}{% endif %}", {}),
    ("dict methods", "{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }}", {"d": {"a": 1, "b": 2}}),
    ("list methods", "{{ l.index(2) }} {{ l.count(1) }} {{ (1, 2).index(2) }}", {"l": [1, 2, 1]}),
    ("list append", "{% set l = [] %}{% for i in range(3) %}{% set _ = l.append(i * 2) %}{% endfor %}{{ l }} {{ l.pop() }} {{ l }}", {}, {"mutable": True}),
    ("dict update", "{% set d = {'a': 1} %}{% set _ = d.update({'b': 2}) %}{{ d }} {{ d.pop('a') }} {{ d }} {{ d.setdefault('c', 3) }} {{ d }}", {}, {"mutable": True}),
    ("method on undefined errors", "{{ nothing.strip() }}", {}),

    # ---- globals ----
    ("raise_exception", "{% if messages|length > 1 %}{{ raise_exception('Too many: ' ~ messages|length) }}{% endif %}", {"messages": MSGS}),
    ("strftime_now", "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d') }}|{{ strftime_now('%B %d, %Y %A') }}", {}),
    ("dict global", "{{ dict(a=1, b='x') }} {{ dict(a=1).a }}", {}),

    # ---- syntax errors ----
    ("unterminated block", "{% if true %}x", {}),
    ("unterminated tag", "{{ x ", {}),
    ("unterminated comment", "{# x", {}),
    ("unknown tag", "{% frobnicate %}", {}),
    ("bad expression", "{{ 1 + }}", {}),
    ("unbalanced paren", "{{ (1 + 2 }}", {}),
    ("mismatched end", "{% if true %}{% endfor %}", {}),
    ("unterminated string", "{{ 'abc }}", {}),

    # ---- realistic chat templates with tools ----
    ("chatml", "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
     {"messages": MSGS, "add_generation_prompt": True}),
    ("gemma style", """{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}""",
     {"messages": MSGS[1:], "bos_token": "<bos>", "add_generation_prompt": True}),
    ("gemma style error", """{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}""",
     {"messages": MSGS}),
    ("qwen tools", """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
""", {"messages": TOOL_MSGS, "tools": TOOLS, "add_generation_prompt": True}),
    ("llama31 tools", """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = strftime_now("%d %b %Y") %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\\n\\n"}}
{%- endif %}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- if tools_in_user_message and not tools is none %}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
""", {"messages": [{"role": "system", "content": "  Sys  "}] + TOOL_MSGS, "tools": TOOLS, "bos_token": "<|begin_of_text|>",
      "builtin_tools": ["brave_search", "code_interpreter"], "add_generation_prompt": True}),
    ("hermes tool macro", """{%- macro json_to_python_type(json_spec) %}
{%- set basic_type_map = {
    "string": "str",
    "number": "float",
    "integer": "int",
    "boolean": "bool"
} %}
{%- if basic_type_map[json_spec.type] is defined %}
    {{- basic_type_map[json_spec.type] }}
{%- elif json_spec.type == "array" %}
    {{- "list[" +  json_to_python_type(json_spec|items) + "]"}}
{%- elif json_spec.type == "object" %}
    {%- if json_spec.additionalProperties is defined %}
        {{- "dict[str, " + json_to_python_type(json_spec.additionalProperties) + ']'}}
    {%- else %}
        {{- "dict" }}
    {%- endif %}
{%- elif json_spec.type is iterable %}
    {{- "Union[" }}
    {%- for t in json_spec.type %}
      {{- json_to_python_type({"type": t}) }}
      {%- if not loop.last %}
        {{- "," }}
    {%- endif %}
    {%- endfor %}
    {{- "]" }}
{%- else %}
    {{- "Any" }}
{%- endif %}
{%- endmacro %}
{{- bos_token }}
{%- for tool in tools %}
    {%- if tool.function is defined %}
        {%- set tool = tool.function %}
    {%- endif %}
    {{- '{"type": "function", "function": ' }}
    {{- '{"name": "' + tool.name + '", ' }}
    {{- '"description": "' + tool.name + '(' }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {{- param_name + ": " + json_to_python_type(param_fields) }}
        {%- if not loop.last %}
            {{- ", " }}
        {%- endif %}
    {%- endfor %}
    {{- ")" }}
    {%- if tool.return is defined %}
        {{- " -> " + json_to_python_type(tool.return) }}
    {%- endif %}
    {{- " - " + tool.description + "\\n\\n" }}
    {{- '"parameters": ' }}
    {{- tool.parameters|tojson }}
    {{- "}" }}
    {%- if not loop.last %}
        {{- "\\n" }}
    {%- endif %}
{%- endfor %}
""", {"bos_token": "<s>", "tools": [
        {"type": "function", "function": {"name": "f", "description": "does f", "parameters": {"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": ["string", "number"]},
            "d": {"type": "object", "additionalProperties": {"type": "boolean"}}}}}}]}),
    ("runaway macro recursion", """{%- macro t(spec) %}{%- if spec.type is iterable %}{%- for x in spec.type %}{{ t({"type": x}) }}{%- endfor %}{%- endif %}{%- endmacro %}{{ t({"type": "null"}) }}""", {}),
    ("mistral v3 tools", """{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\\n\\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
""", {"messages": [{"role": "system", "content": "Sys"}] + TOOL_MSGS + [{"role": "user", "content": "thanks"}],
      "tools": TOOLS, "bos_token": "<s>", "eos_token": "</s>"}),
    ("deepseek r1 tool calls", """{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='') %}{%- for message in messages %}{%- if message['role'] == 'system' %}{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is none %}{%- set ns.is_tool = false -%}{%- for tool in message['tool_calls']%}{%- if not ns.is_first %}{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}{%- set ns.is_first = true -%}{%- else %}{{'\\n' + '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor %}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is not none %}{%- if ns.is_tool %}{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- set ns.is_tool = false -%}{%- else %}{% set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}{%- if message['role'] == 'tool' %}{%- set ns.is_tool = true -%}{%- if ns.is_output_first %}{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- set ns.is_output_first = false %}{%- else %}{{'\\n<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}{%- endif %}{%- endfor -%}{% if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{% endif %}{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\\n'}}{% endif %}""",
     {"bos_token": "<bos>", "add_generation_prompt": True, "messages": [
         {"role": "user", "content": "q"},
         {"role": "assistant", "content": None, "tool_calls": [
             {"type": "function", "function": {"name": "a", "arguments": "{\"x\": 1}"}},
             {"type": "function", "function": {"name": "b", "arguments": "{}"}}]},
         {"role": "tool", "content": "r1"}, {"role": "tool", "content": "r2"},
         {"role": "assistant", "content": "<think>hmm</think>done"}]}),
    ("phi3 generation block", "{% for message in messages %}{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] }}<|end|>{% endgeneration %}{% else %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endif %}\n{% endfor %}",
     {"messages": MSGS}),
]
# Edge cases collected while comparing against Jinja2 (whitespace control, literals, casing,
# number formatting, slicing, filters on odd inputs, ...).
EDGE_CASES = [
    ("edge 0", '{% for x in [1,2] -%}\n  {{ x }}\n{%- endfor %}', {}),
    ("edge 1", '  {#- c #}\nx', {}),
    ("edge 2", 'a\n  {# c -#}\n  b', {}),
    ("edge 3", '{% if true %}  \n x{% endif %}', {}),
    ("edge 4", '{% if true %}\r\n x{% endif %}', {}),
    ("edge 5", '\n\n{% if true %}\n\n{% endif %}\n\n', {}),
    ("edge 6", 'x {%- if true %} y {% endif -%} z', {}),
    ("edge 7", "{{- 'a' }}  {{- 'b' -}}  c", {}),
    ("edge 8", "  {{- 'a' }}", {}),
    ("edge 9", ' \t {% raw %} a {% endraw %} \n b', {}),
    ("edge 10", '{% raw %}\n  {% endraw %}\n  x', {}),
    ("edge 11", '{%- raw %}{{ }}{% endraw -%}   x', {}),
    ("edge 12", '{% set x %}\n  a\n  {% if true %}\n  b\n  {% endif %}\n{% endset %}[{{ x }}]', {}),
    ("edge 13", "{{ '{{' }} {{ '}}' }} {{ '%}' }}", {}),
    ("edge 14", '{{ "a\\"b" }}', {}),
    ("edge 15", "{{ 'a\\\nb' }}", {}),
    ("edge 16", '{{ 1.5e3|int }} {{ 1e3 }} {{ 1E3 }} {{ 2.e3 if false else 1 }}', {}),
    ("edge 17", "{{ [1,2,3][1:2][0] }} {{ 'abc'[0:1] }} {{ 'abc'[5] }}|{{ 'abc'[-4] }}", {}),
    ("edge 18", "{{ x | default('a') | upper }} {{ (x or 'b') | upper }}", {}),
    ("edge 19", "{{ messages|selectattr('role','equalto','user')|first|attr('content') }}", {'messages': [{'role': 'user', 'content': 'c'}]}),
    ("edge 20", "{{ (messages|selectattr('role','equalto','user')|first).content }}", {'messages': [{'role': 'user', 'content': 'c'}]}),
    ("edge 21", '{% set x = [1,2,3] %}{{ x|length > 2 and x[0] == 1 }}', {}),
    ("edge 22", '{% for m in messages %}{{ loop.index }}{% if not loop.last %}, {% endif %}{% endfor %}', {'messages': [1, 2, 3]}),
    ("edge 23", "{{ 'abc' if 'b' in 'abc' else 'no' }}", {}),
    ("edge 24", "{{ 3 in [1, 2, 3.0] }} {{ 1 in [true] }} {{ 'a' in ['a'] }} {{ none in [none] }} {{ [1] in [[1]] }}", {}),
    ("edge 25", "{{ {'a':1}|tojson }}{{ {1:2}|tojson }}{{ {true: 1, none: 2, 1.5: 3}|tojson }}", {}),
    ("edge 26", "{{ 1 == true }} {{ 0 == false }} {{ 1.0 == true }} {{ 'a' == none }}", {}),
    ("edge 27", '{{ [1, 2] == (1, 2) }} {{ [] == [] }} {{ {} == {} }}', {}),
    ("edge 28", '{{ \'hello world\'|title }} {{ \'HELLO-WORLD foo_bar\'|title }} {{ "o\'neil"|title }} {{ \'x(y)z[w]\'|title }}', {}),
    ("edge 29", "{{ 'Hello'|center(10) }}|{{ 'Hello'|center(11) }}|{{ 'Hi'|center(5) }}|{{ 'Hi'|center(6) }}", {}),
    ("edge 30", "{{ 3.0|int }} {{ -3.7|int }} {{ '-3.7'|int }} {{ '1e3'|int }} {{ ' 1_000 '|int }} {{ '1__0'|int }} {{ '+5'|int }} {{ 'inf'|float }} {{ '-nan'|float }}", {}),
    ("edge 31", "{{ 0.5|round }} {{ 1.5|round }} {{ -0.5|round }} {{ 0.125|round(2) }} {{ 0.375|round(2) }} {{ 1.005|round(2) }} {{ 123.456|round(-1) }} {{ 5|round(2) }} {{ 5|round(method='floor') }}", {}),
    ("edge 32", '{{ 1e22 }} {{ 1.5e-5 }} {{ 123456789012345678.0 }} {{ 0.1 * 3 }} {{ 100.0 }} {{ 1e16 - 1 }}', {}),
    ("edge 33", '{{ 5 / 0 }}', {}),
    ("edge 34", '{{ 5 // 0 }}', {}),
    ("edge 35", '{{ 5 % 0 }}', {}),
    ("edge 36", "{{ 'abc' * -1 }}|{{ [1] * 0 }}", {}),
    ("edge 37", "{{ 'a' < 1 }}", {}),
    ("edge 38", "{{ [1, 'a']|sort }}", {}),
    ("edge 39", "{{ -'a' }}", {}),
    ("edge 40", '{% set a = 1 %}{% set a = a + 1 %}{{ a }}', {}),
    ("edge 41", "{% macro m() %}{{ caller() if caller is defined else 'nocaller' }}{% endmacro %}{{ m() }}|{% call m() %}c{% endcall %}", {}),
    ("edge 42", '{% for i in range(3) %}{% for j in range(3) %}{% if j > i %}{% break %}{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %}', {}),
    ("edge 43", '{% for i in range(3) %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% else %}E{% endfor %}', {}),
    ("edge 44", "{% for a, b in {'x': 1}.items() %}{{ a }}{{ b }}{% endfor %}", {}),
    ("edge 45", '{% for a in [[1,2]] %}{% set x, y = a %}{{ x }}{{ y }}{% endfor %}', {}),
    ("edge 46", '{% set ns = namespace(l=[]) %}{% for i in range(3) %}{% set ns.l = ns.l + [i] %}{% endfor %}{{ ns.l }}', {}),
    ("edge 47", '{{ namespace(a=1).a }}', {}),
    ("edge 48", "{% set ns = namespace(a=1) %}{% set ns.a = ns.a ~ 'x' %}{{ ns.a }}", {}),
    ("edge 49", '{{ range(5)[::-1]|list if false else range(3)|list|reverse|list }}', {}),
    ("edge 50", "{{ 'x'.join(['a','b']) }} {{ ', '.join(messages|map(attribute='role')) }}", {'messages': [{'role': 'a'}, {'role': 'b'}]}),
    ("edge 51", "{{ 'ab cd'.split(' ')|length }} {{ 'a'.split('a') }} {{ ''.split() }} {{ '  '.split(' ') }}", {}),
    ("edge 52", "{{ 'a\\tb c'.split(None) }} {{ 'a b c d'.split(None, 2) }} {{ ' a b '.rsplit(None, 1) }}", {}),
    ("edge 53", "{{ '%5.1f%%' % 12.345 }} {{ '%x %o %X %e %g' % (255, 8, 255, 12345.678, 0.0001) }} {{ '%+d % d' % (5, 5) }} {{ '%-6s|' % 'ab' }} {{ '%c' % 97 }}", {}),
    ("edge 54", "{{ '{0:>8.3f}|{1:*^9}|{2:+d}|{3}'.format(3.14159, 'mid', 5, none) }}", {}),
    ("edge 55", "{{ '{a}-{b}'.format(a=[1], b={'x': 1}) }}", {}),
    ("edge 56", "{{ 'abc'.index('c') }} {{ 'abcabc'.rindex('b') }} {{ 'abc'.startswith('') }}", {}),
    ("edge 57", "{{ 'abc'.index('z') }}", {}),
    ("edge 58", '{{ [3,1,2].index(5) }}', {}),
    ("edge 59", "{{ 'hello'|truncate(3) }}", {}),
    ("edge 60", "{{ 'hello world foo bar baz'|truncate(9, leeway=0) }}|{{ 'hello world foo bar baz'|truncate(9, false, '>>', 0) }}", {}),
    ("edge 61", "{{ 'a b'|wordcount }} {{ 'héllo wörld, ok!'|wordcount }} {{ '你好 世界'|wordcount }} {{ 'foo_bar-baz'|wordcount }}", {}),
    ("edge 62", "{{ 'a\\nb'|indent(first=true) }}|{{ ''|indent }}|{{ 'x\\n'|indent }}|{{ 'a\\r\\nb'|indent(1) }}", {}),
    ("edge 63", '{{ [1,2,3,4,5]|batch(2)|list }} {{ []|batch(3)|list }}', {}),
    ("edge 64", "{{ users|map(attribute='a.b')|list }} {{ users|map(attribute='l.0')|list }}", {'users': [{'a': {'b': 1}, 'l': [9]}, {'a': {'b': 2}, 'l': [8]}]}),
    ("edge 65", "{{ users|selectattr('a.b', 'gt', 1)|list|length }}", {'users': [{'a': {'b': 1}}, {'a': {'b': 2}}]}),
    ("edge 66", "{{ [{'n': 'b'}, {'n': 'A'}]|sort(attribute='n')|map(attribute='n')|join }}", {}),
    ("edge 67", "{{ ['b', 'A', 'a', 'B']|unique|list }} {{ ['b','A']|max }} {{ ['b','A']|max(case_sensitive=true) }}", {}),
    ("edge 68", '{{ [[1],[1],[2]]|unique|list }}', {}),
    ("edge 69", "{{ {'a': 2, 'b': 1}|dictsort(false, 'value') }} {{ {'B': 1, 'a': 2}|dictsort(true) }}", {}),
    ("edge 70", '{{ [1, 2, 3]|sum }} {{ [0.1, 0.2]|sum }} {{ [[1], [2]]|sum(start=[]) }}', {}),
    ("edge 71", "{{ [none, 0, 1, 'x']|select|list }} {{ [none, 0, 1]|reject|list }} {{ ['a', 'bb']|select('string')|list }}", {}),
    ("edge 72", "{{ [1,2,3]|select('in', [1, 3])|list }} {{ [1,2,3]|reject('divisibleby', 2)|list }}", {}),
    ("edge 73", "{{ 'x'|first }} {{ ''|first }}|{{ {'a': 1, 'b': 2}|first }} {{ {'a': 1, 'b': 2}|last }}", {}),
    ("edge 74", "{{ nothing|first }}|{{ nothing|list }}|{{ nothing|join(',') }}|{{ nothing|sort }}|{{ nothing|reverse|list }}|{{ nothing|upper }}|{{ nothing|trim }}", {}),
    ("edge 75", '{{ nothing|int }}', {}),
    ("edge 76", '{{ none|length }}', {}),
    ("edge 77", '{{ 5|length }}', {}),
    ("edge 78", "{{ true|string }} {{ none|lower }} {{ 1.5|upper }} {{ [1]|trim }} {{ 12|replace('1', 'x') }}", {}),
    ("edge 79", "{{ 'abc'|list|join('.') }} {{ (1, 2, 3)|join('-') }}", {}),
    ("edge 80", '{{ \'<>&\\\'"\'|escape }} {{ 5|escape }}', {}),
    ("edge 81", "{{ nothing|default }}|{{ nothing|default(none) }}|{{ false|default('x') }}|{{ false|default('x', true) }}", {}),
    ("edge 82", "{{ x.y|default('dflt') }}", {'x': {}}),
    ("edge 83", "{{ x['y']|default('dflt') }}", {'x': {}}),
    ("edge 84", "{{ x[0]|default('dflt') }}", {'x': []}),
    ("edge 85", '{{ tools|tojson(indent=2) }}', {'tools': [{'a': [], 'b': {}, 'c': [1, [2, []]], 'é': 'ü\x01\x1f\x7f'}]}),
    ("edge 86", "{{ 'a\\u2028b\\ud7ff'|tojson }} {{ '\\u00e9'|tojson(ensure_ascii=false) }}", {}),
    ("edge 87", '{{ x|tojson }}', {'x': 1.0}),
    ("edge 88", '{{ x|tojson }} {{ x }}', {'x': 1e+300}),
    ("edge 89", "{{ [1, 2]|tojson(indent='\\t') }}", {}),
    ("edge 90", '{% if a %}{% elif b %}B{% endif %}', {'b': 1}),
    ("edge 91", '{% if a, b %}T{% endif %}', {}),
    ("edge 92", "{{ a if a is defined else 'x' }}", {}),
    ("edge 93", '{{ (a or b) is none }}', {'b': None}),
    ("edge 94", '{% if x is string and x|length > 0 %}s{% endif %}', {'x': 'a'}),
    ("edge 95", '{{ not x is defined }} {{ not (x is defined) }}', {}),
    ("edge 96", '{{ x is divisibleby 3 and x is not odd }}', {'x': 6}),
    ("edge 97", "{{ 'a' if 1 is even else 'b' if 2 is even else 'c' }}", {}),
    ("edge 98", "{{ m['tool_calls'] is defined and m['tool_calls']|length > 0 }}", {'m': {'tool_calls': [1]}}),
    ("edge 99", '{{ foo.bar is defined }}', {'foo': None}),
    ("edge 100", '{% for x in [1,2,3] if x > 1 %}{{ loop.index }}:{{ x }}{{ loop.length }} {% endfor %}', {}),
    ("edge 101", '{% for x in range(3) %}{{ loop.index }}{% for y in range(2) %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %}', {}),
    ("edge 102", '{{ loop }}', {}),
    ("edge 103", '{% for x in [1] %}{{ loop.nonexistent }}{% endfor %}', {}),
    ("edge 104", '{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}', {}),
    ("edge 105", '{% macro m(x) %}{% for i in range(x) %}{{ i }}{% endfor %}{% endmacro %}{% for j in range(3) %}{{ m(j) }}|{% endfor %}', {}),
    ("edge 106", '{% macro outer() %}{% macro inner() %}in{% endmacro %}{{ inner() }}{% endmacro %}{{ outer() }}', {}),
    ("edge 107", '{% for i in range(2) %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}', {}),
    ("edge 108", "{% macro m(a, b) %}{{ a }}{{ b }}{% endmacro %}{{ m(*[1, 2]) }} {{ m(**{'a': 3, 'b': 4}) }}", {}),
    ("edge 109", '{{ m }}', {}),
    ("edge 110", '{% macro m() %}x{% endmacro %}{{ m }}', {}),
    ("edge 111", "{% set d = {'a': 1, 'b': 2} %}{% for k in d|sort %}{{ k }}{% endfor %}", {}),
    ("edge 112", "{% set x = 'a' %}{% set y = x ~ 'b' %}{% set x = y ~ 'c' %}{{ x }}{{ y }}", {}),
    ("edge 113", '{% set l = [1, 2] %}{% set m = l %}{{ m is sameas l }}', {}),
    ("edge 114", "{{ ['a','b'][1:][0] }}{{ {'k': [1, 2]}.k[-1] }}{{ [[1, 2], [3]][0][1] }}", {}),
    ("edge 115", "{{ 'x'[0][0][0] }}", {}),
    ("edge 116", '{{ l[0:1:0] }}', {'l': [1]}),
    ("edge 117", "{{ l['a'] }}|{{ l[1.5] }}|{{ l[none] }}", {'l': [1]}),
    ("edge 118", '{{ d[1] }}|{{ d[1.0] }}|{{ d[true] }}', {}),
    ("edge 119", "{% set d = {1: 'a', 'b': 2} %}{{ d[1] }}{{ d[1.0] }}{{ d[true] }}{{ d['b'] }}", {}),
    ("edge 120", "{% set d = {(1, 2): 'tup'} %}{{ d[(1, 2)] }}", {}),
    ("edge 121", "{{ {'a': 1, 'a': 2} }}", {}),
    ("edge 122", "{{ [1, 2,] }} {{ {'a': 1,} }} {{ (1, 2,) }} {{ f(1,) if false else 'ok' }}", {}),
    ("edge 123", "{{ 'a' 'b' ~ 'c' }}", {}),
    ("edge 124", '{{ 1 -1 }} {{ 1--1 }} {{ - - 1 }} {{ +1 }} {{ -(-2) }}', {}),
    ("edge 125", '{{ 2**3**2 }} {{ (2**3)**2 }}', {}),
    ("edge 126", "{{ 1 if true }} {{ 'yes' if 1 > 0 else 'no' }}", {}),
    ("edge 127", '{{ [x for x in y] }}', {'y': [1]}),
    ("edge 128", "{{ true and 1 }} {{ false or '' }} {{ none and 1 }}", {}),
    ("edge 129", "{{ 5 is sameas 5 }} {{ 'a' is sameas 'a' }} {{ [] is sameas [] }}", {}),
    ("edge 130", '{{ 1.0 is integer }} {{ 1 is float }} {{ 1.0 is number }}', {}),
    ("edge 131", "{{ 'abc' is iterable }} {{ 'abc' is sequence }} {{ {} is sequence }} {{ none is sequence }} {{ 1.5 is iterable }}", {}),
    ("edge 132", "{{ 'abc' is lower }} {{ 'aBc' is lower }} {{ '' is lower }} {{ '1a' is lower }}", {}),
    ("edge 133", '{{ 3 is gt 2 }} {{ 3 is greaterthan 4 }} {{ 3 is lessthan 4 }} {{ 3 is == 3 }} {{ 3 is != 3 }} {{ 2 is >= 2 }}', {}),
    ("edge 134", '{{ 4 is divisibleby 2.0 }} {{ 4.5 is divisibleby 1.5 }} {{ 3.0 is odd }}', {}),
    ("edge 135", '{{ x is odd }}', {'x': 'a'}),
    ("edge 136", "{{ 'abc' is in ['abc'] }} {{ 'a' is in 'xyz' }}", {}),
    ("edge 137", '{{ x is nosuchtest }}', {}),
    ("edge 138", "{{ 'Привет Мир'|upper }} {{ 'ПРИВЕТ'|lower }} {{ 'ελληνικά'|upper }} {{ 'çağrı'|upper }} {{ 'ĞÜŞ'|lower }}", {}),
    ("edge 139", "{{ 'hello world'|capitalize }} {{ 'HELLO'|capitalize }} {{ 'éa'|capitalize }} {{ '1abc'|capitalize }}", {}),
    ("edge 140", "{{ 'é\\u00a0x'.strip('x') }}|{{ '\\u3000x\\u3000'.strip() }}|{{ '\\x1cx\\x1f'.strip() }}|{{ '\\u200bx'.strip() }}", {}),
    ("edge 141", "{{ ['\\u00a0', '\\u200b', '\\x7f', '\\x80', '\\u3000', '\\ufeff', '\\U0001F999', 'é', '\\t'] }}", {}),
    ("edge 142", '{{ {\'k\': \'it\\\'s\'} }} {{ (\'a"b\',) }}', {}),
    ("edge 143", '{{ d }}', {'d': {'a': [1.5, None, True, 'x'], 'b': {'c': []}}}),
    ("edge 144", '{{ d|string|length }} {{ d|list }}', {'d': {'a': 1, 'b': 2}}),
    ("edge 145", "{{ 'a,b'.split(',')|map('upper')|join }}", {}),
    ("edge 146", "{{ [1,2,3]|map('string')|map('int')|sum }}", {}),
    ("edge 147", "{{ ['a', 'b']|map('replace', 'a', 'x')|list }}", {}),
    ("edge 148", "{{ ['  a ', ' b']|map('trim')|join('|') }}", {}),
    ("edge 149", "{{ [{'a': 1}, {'b': 2}]|map(attribute='a')|list }}", {}),
    ("edge 150", '{{ [3, 2, 1]|sort|first }} {{ [1, 2, 3]|sort(reverse=true)|first }}', {}),
    ("edge 151", "{{ [{'a': 2}, {'a': 1}]|sort(attribute='a') }}", {}),
    ("edge 152", "{{ [[2, 'b'], [1, 'a']]|sort }} {{ [(2, 1), (1, 2)]|sort }}", {}),
    ("edge 153", "{{ ['B', 'a', 'C']|sort(case_sensitive=true) }} {{ ['B', 'a', 'C']|sort }}", {}),
    ("edge 154", "{{ {'b': 1, 'a': 2}|dictsort|first }}", {}),
    ("edge 155", "{{ range(3)|list|tojson }} {{ [none]|tojson }} {{ (1, 'a')|tojson }}", {}),
    ("edge 156", '{{ d|tojson }}', {'d': {'x': [1, 2, {'y': None}], 'z': 'a\\b"c\n\t\r\x08\x0c'}}),
    ("edge 157", "{{ '\\x00\\x1b'|tojson }}", {}),
    ("edge 158", "{{ 1|tojson(indent=2) }} {{ 'x'|tojson(indent=2) }}", {}),
    ("edge 159", "{{ {'a': {'b': [1, {'c': []}]}}|tojson(indent=0) }}", {}),
    ("edge 160", "{{ {'a': 1}|tojson(indent=-1) }}", {}),
    ("edge 161", '{{ x|tojson }}', {'x': {'nested': {'deep': [[[[1]]]]}}}),
    ("edge 162", "{{ strftime_now('%d %b %Y')|length }} {{ strftime_now('%A %a %j %U %p %I %H %M %S %y %m %e') }}", {}),
    ("edge 163", "{{ strftime_now('') }}|", {}),
    ("edge 164", '{% set x %}{% endset %}[{{ x }}]', {}),
    ("edge 165", '{% set x = 1 %}{% set x %}block{% endset %}{{ x }}', {}),
    ("edge 166", '{% filter upper %}{% for i in range(3) %}{{ i }}a{% endfor %}{% endfilter %}', {}),
    ("edge 167", '{% filter indent(2) %}a\nb{% endfilter %}', {}),
    ("edge 168", "{% filter replace('x', 'y') %}xx{% endfilter %}", {}),
    ("edge 169", '{% with x = 5 %}{% with y = x + 1 %}{{ x }}{{ y }}{% endwith %}{% endwith %}', {}),
    ("edge 170", "{% print 'p' %}", {}),
    ("edge 171", '{{ 1 }}{# {{ 2 }} #}{{ 3 }}', {}),
    ("edge 172", '{#- -#}', {}),
    ("edge 173", "{{ '{#' }}{{ '#}' }}", {}),
    ("edge 174", '{%- if true -%}{%- endif -%}', {}),
    ("edge 175", '{% if true %}{% endif %}\n\n', {}),
    ("edge 176", '{% for x in [] %}{% endfor %}\n', {}),
    ("edge 177", 'a\n{% if true %}\nb\n{% endif %}\nc\n', {}),
    ("edge 178", 'a\n  {% if true -%}\n  b\n  {%- endif %}\nc', {}),
    ("edge 179", "{{ 'x' }}\n{{ 'y' }}\n", {}),
    ("edge 180", '{% if true %}a{% else %}b{% endif %}\n{% if false %}a{% else %}b{% endif %}', {}),
    ("edge 181", '   {% for m in messages %}\n   [{{ m }}]\n   {% endfor %}\n', {'messages': [1, 2]}),
    ("edge 182", '{%- for m in messages -%}\n   [{{ m }}]\n{%- endfor -%}', {'messages': [1, 2]}),
    ("edge 183", "{% if true %}  {{ 'x' }}  {% endif %}", {}),
    ("edge 184", '\t{% if true %}\t\n\tx\n\t{% endif %}\t', {}),
    ("edge 185", '  {% if true %}  trailing after tag\n', {}),
    ("edge 186", 'x  \n  {%+ if true %}y{% endif %}', {}),
    ("edge 187", '{% if true -%}\n\n  x{% endif %}', {}),
    ("edge 188", '{% raw -%}   a   {%- endraw %}', {}),
    ("edge 189", '{% raw %}{% if %}{% endraw %}', {}),
    ("edge 190", '{%raw%}x{%endraw%}', {}),
    ("edge 191", '{% raw%}x{% endraw%}', {}),
]

CASES += EDGE_CASES
