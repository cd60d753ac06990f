"""`pip install .` into a fresh virtual environment (Debian's python3-venv with
--system-site-packages, offline) gives a package that imports and generates from outside the
repository, with the CLI installed beside it for `python -m vela`.

The build reuses this ctest build tree's compiled targets (VELA_CMAKE_BUILD_DIR, see setup.py)
so the test takes seconds, not a full rebuild."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import shared_model

ROOT = Path(__file__).resolve().parents[2]


def test_pip_install_into_a_fresh_venv(tmp_path):
    build_dir = os.environ.get("VELA_BUILD_DIR")
    if not build_dir:
        pytest.skip("VELA_BUILD_DIR is not set; run the tests through ctest")
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                          capture_output=True, timeout=120)
    if made.returncode != 0:
        pytest.skip("python3 -m venv does not work here (install python3-venv): " +
                    made.stderr.decode(errors="replace")[-300:])
    python = venv / "bin" / "python"
    if subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True).returncode:
        pytest.skip("pip is not available in the virtual environment")
    env = dict(os.environ, VELA_CMAKE_BUILD_DIR=build_dir, PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)  # the build tree's package must not be what gets imported
    r = subprocess.run([str(python), "-m", "pip", "install", "--no-build-isolation",
                        "--no-deps", str(ROOT)], capture_output=True, env=env, timeout=170)
    assert r.returncode == 0, (r.stdout + r.stderr).decode(errors="replace")[-3000:]

    model = shared_model("aidreams260K.gguf")
    script = (
        "import vela, sys\n"
        "from vela import LLM, SamplingParams\n"
        "assert 'site-packages' in vela.__file__, vela.__file__\n"
        f"llm = LLM(model={model!r})\n"
        "out = llm.generate(['Once upon a time'], SamplingParams(temperature=0, max_tokens=8),"
        " use_tqdm=False)\n"
        "print(len(out[0].outputs[0].token_ids))\n")
    run = subprocess.run([str(python), "-c", script], capture_output=True, env=env,
                         cwd=str(tmp_path), timeout=120)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    assert run.stdout.decode().strip() == "8"
    cli = subprocess.run([str(python), "-m", "vela", "info", model], capture_output=True,
                         env=dict(env, VELA_CLI=""), cwd=str(tmp_path), timeout=60)
    assert cli.returncode == 0, cli.stderr.decode(errors="replace")
    shutil.rmtree(venv, ignore_errors=True)
