"""`python -m vela generate ...` runs the vela CLI with the same arguments."""

import os
import subprocess
import sys

from conftest import run_cli_generate, shared_model, vela_cli


def test_python_m_vela_forwards_to_the_cli():
    model = shared_model("aidreams260K.gguf")
    flags = ["-m", model, "-p", "Once upon a time", "-n", "16", "--temp", "0"]
    env = dict(os.environ, VELA_CLI=vela_cli())
    r = subprocess.run([sys.executable, "-m", "vela", "generate", *flags], capture_output=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    text, _ = run_cli_generate(model, "Once upon a time", "-n", "16", "--temp", "0")
    assert r.stdout.decode() == text + "\n"
    bad = subprocess.run([sys.executable, "-m", "vela", "serve", "--no-such-flag"],
                         capture_output=True, env=env, timeout=60)
    assert bad.returncode != 0
    assert b"no-such-flag" in bad.stderr
