"""Shared fixtures of the Python package's tests (run by ctest; see tests/python/CMakeLists.txt).

The shared models live in ../shared beside the checkout ($VELA_SHARED_DIR overrides); tests
that need them skip with a message when it is absent. VELA_CLI names the vela binary that the
outputs are compared with.
"""

import os
import subprocess
from pathlib import Path
from typing import List, Tuple

import pytest


def shared_dir() -> Path:
    # As the C++ tests: $VELA_SHARED_DIR, else the default ctest passes (../shared).
    candidate = (os.environ.get("VELA_SHARED_DIR") or os.environ.get("VELA_SHARED_DIR_DEFAULT")
                 or str(Path(__file__).resolve().parents[2].parent / "shared"))
    if (Path(candidate) / "models").is_dir():
        return Path(candidate)
    pytest.skip("shared test data not found (set VELA_SHARED_DIR or place ../shared)")


def shared_model(name: str) -> str:
    path = shared_dir() / "models" / name
    if not path.is_file():
        pytest.skip(f"shared model {name} not found")
    return str(path)


def vela_cli() -> str:
    cli = os.environ.get("VELA_CLI")
    if not cli or not os.path.isfile(cli):
        pytest.skip("VELA_CLI (the vela binary) is not set; run the tests through ctest")
    return cli


def run_cli_generate(model: str, prompt: str, *flags: str) -> Tuple[str, List[str]]:
    """`vela generate`'s text (stdout without its final newline) and stderr lines."""
    r = subprocess.run([vela_cli(), "generate", "-m", model, "-p", prompt, *flags],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    out = r.stdout.decode("utf-8", errors="replace")
    assert out.endswith("\n")
    return out[:-1], r.stderr.decode(errors="replace").splitlines()


@pytest.fixture(scope="module")
def aidreams():
    from vela import LLM
    with LLM(model=shared_model("aidreams260K.gguf")) as llm:
        yield llm


@pytest.fixture(scope="session")
def synth_model(tmp_path_factory):
    """A random-weight model (vela synth, shape tiny) whose file carries a ChatML template and
    a 354-token byte-level vocabulary: at a high temperature it draws end tokens now and then,
    which the trained shared model never does greedily."""
    path = tmp_path_factory.mktemp("synth") / "chatml.gguf"
    r = subprocess.run([vela_cli(), "synth", "-o", str(path), "--shape", "tiny", "--type", "f32",
                        "--vocab-from", "builtin", "-q"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return str(path)
