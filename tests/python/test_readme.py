"""The README's Python example runs as written (on a small model with a chat template)."""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_runs(synth_model, tmp_path):
    section = README.read_text().split("## Python API", 1)[1]
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
