"""The Python example of docs/python.md runs as written (on a small model with a chat template)."""

import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def test_docs_example_runs(synth_model, tmp_path):
    section = PAGE.read_text().split("## Example", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert 'LLM(model="model.gguf")' in code
    script = tmp_path / "example.py"
    script.write_text(code.replace('"model.gguf"', repr(synth_model)))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, timeout=120,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    lines = r.stdout.decode(errors="replace").splitlines()
    assert lines[0].startswith("Once upon a time ->")
    assert any(line.startswith("The quick brown fox ->") for line in lines)
