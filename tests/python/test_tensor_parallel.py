"""LLM(model, tensor_parallel_size=N): greedy output equals one process's, token for token, when
this process spawns its workers and under `mpirun -np 2 python3`; later LLMs of the same size
reuse the workers; sizes the model does not split, another size in the same process, a second
open tensor-parallel LLM and a missing vela binary are clear errors. Registered only where the
build has MPI (tests/python/CMakeLists.txt); skipped when the module has none."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import shared_model, vela_cli
from vela import LLM, SamplingParams, _vela

pytestmark = pytest.mark.skipif(not _vela.tensor_parallel_available(),
                                reason="this vela module was built without MPI")

# Models tests/dist compares under two ranks, with prompts their greedy outputs agree on: a
# trained model (MHA), every prompt batched together; random weights with packed int8 slices,
# the prompt tests/dist uses (flat distributions: on other prompts a near-tie within float
# rounding of the reordered sums can flip a token after a few dozen, as the README says).
CASES = [("aidreams260K.gguf", ["Once upon a time", "The little robot",
                                "In the forest there was", "She said"]),
         ("tiny-llama-256-Q8_0.gguf", ["Once upon a time"])]


@pytest.fixture(autouse=True, scope="module")
def mpi_environment():
    # As CI runs it: as root, with more ranks than cores.
    saved = dict(os.environ)
    os.environ.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                       "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    os.environ.setdefault("VELA_BINARY", vela_cli())
    yield
    os.environ.clear()
    os.environ.update(saved)


def greedy():
    return SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)


def outputs(llm, prompts):
    return [(o.prompt_token_ids, o.outputs[0].token_ids, o.outputs[0].text)
            for o in llm.generate(prompts, greedy(), use_tqdm=False)]


def one_process(model, prompts):
    with LLM(model=model, num_threads=1) as llm:
        return outputs(llm, prompts)


@pytest.mark.parametrize("name,prompts", CASES, ids=[name for name, _ in CASES])
def test_greedy_output_equals_one_process(name, prompts):
    model = shared_model(name)
    expected = one_process(model, prompts)
    # The second model reuses the first one's workers (the group lives as long as the process).
    with LLM(model=model, tensor_parallel_size=2, num_threads=1) as llm:
        got = outputs(llm, prompts)
        streamed = "".join(p.outputs[0].text
                           for p in llm.generate_stream(prompts[0], greedy()))
    assert got == expected
    assert all(len(ids) == 24 for _, ids, _ in got)
    assert streamed == expected[0][2]


def test_one_open_llm_per_group_and_one_size_per_process():
    model = shared_model("tiny-llama-256-F16.gguf")
    with LLM(model=model, tensor_parallel_size=2, num_threads=1) as llm:
        with pytest.raises(RuntimeError, match="another tensor-parallel LLM is open"):
            LLM(model=model, tensor_parallel_size=2, num_threads=1)
        assert llm.generate("hi", SamplingParams(max_tokens=2), use_tqdm=False)
    # 4 ranks split this model (2 KV heads replicated), but the process's group has 2.
    with pytest.raises(RuntimeError, match="group has 2 ranks.*tensor_parallel_size=2"):
        LLM(model=model, tensor_parallel_size=4)
    # Closed, the group serves the next LLM.
    with LLM(model=model, tensor_parallel_size=2, num_threads=1) as llm:
        assert llm.generate("hi", SamplingParams(max_tokens=2), use_tqdm=False)


def test_sizes_the_model_does_not_split():
    with pytest.raises(ValueError, match="tensor_parallel_size=3: .*8 attention heads do not "
                                         "split over 3 ranks"):
        LLM(model=shared_model("tiny-llama-256-Q8_0.gguf"), tensor_parallel_size=3)
    with pytest.raises(ValueError, match="does not split a Q/K norm over all heads"):
        LLM(model=shared_model("tiny-olmoe-F32.gguf"), tensor_parallel_size=2)
    with pytest.raises(ValueError, match="at most 256"):
        LLM(model=shared_model("aidreams260K.gguf"), tensor_parallel_size=257)


def test_a_missing_or_wrong_vela_binary(monkeypatch, tmp_path):
    model = shared_model("aidreams260K.gguf")
    monkeypatch.setenv("VELA_BINARY", str(tmp_path / "no-such-vela"))
    with pytest.raises(RuntimeError, match="VELA_BINARY=.*no-such-vela.* is not an executable"):
        LLM(model=model, tensor_parallel_size=2)
    # Spawned, another program would never join the group: it is not started.
    monkeypatch.setenv("VELA_BINARY", shutil.which("true") or "/bin/true")
    with pytest.raises(RuntimeError, match="is not a vela binary with the tensor-parallel"):
        LLM(model=model, tensor_parallel_size=2)


# Every rank runs it; rank 1 ends inside its first LLM(...), once rank 0 exits.
SCRIPT = """
import json, sys
from vela import LLM, SamplingParams
params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
results = []
for model, prompts in json.loads(sys.argv[1]):  # one after another: the ranks serve each
    with LLM(model=model, tensor_parallel_size=2, num_threads=1) as llm:
        results.append([o.outputs[0].text for o in llm.generate(prompts, params,
                                                                   use_tqdm=False)])
print(json.dumps(results), flush=True)
"""


def test_under_mpirun_the_other_rank_serves(tmp_path):
    mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
    if mpirun is None:
        pytest.skip("mpirun not found")
    cases = [(shared_model(name), prompts) for name, prompts in CASES]
    expected = [[text for _, _, text in one_process(m, prompts)] for m, prompts in cases]
    script = tmp_path / "tp.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env.pop("VELA_BINARY", None)  # mpirun starts the ranks: nothing is spawned
    r = subprocess.run(["timeout", "120", mpirun, "-np", "2", "--oversubscribe", sys.executable,
                        str(script), json.dumps(cases)], capture_output=True, env=env,
                       timeout=150)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err
    lines = r.stdout.decode(errors="replace").splitlines()
    assert len(lines) == 1, lines  # rank 1 ended inside LLM(...): only rank 0 prints
    assert json.loads(lines[0]) == expected
